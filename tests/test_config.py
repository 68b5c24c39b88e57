"""from_config() and seed(): state from hand-written YAML/JSON, positioned errors."""

from __future__ import annotations

import datetime
import enum
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest

from statekit import LoadResult, StateModule, state_field, stateful
from statekit.state.config import from_config, seed
from statekit.errors import DocumentError, StateDefinitionError, StateLoadError


class Role(enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"


@stateful
class Message:
    role: Role
    content: str


@stateful
class Memory(StateModule):
    content: list[Message] = state_field(factory=list)


@stateful
class Agent(StateModule):
    name: str = state_field()
    turns: int = state_field(default=0)
    tools: list[str] = state_field(factory=list)
    memory: Memory = attrs.field(factory=Memory)
    client: object = attrs.field(default=None)  # not state


@stateful
class Limits:
    max_turns: int = 10
    stop: list[str] = attrs.field(factory=list)


@stateful
class Office:
    opens: datetime.time
    closes: datetime.time
    country: str
    open_on_sunday: bool = False


CONFIG = """\
# The agent's first state, written by hand.
name: Friday   # shown in every reply
tools:
  - web
  - math
memory:
  content:
    - role: user
      content: |
        Hello!
        Who are you?
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def only_problem(excinfo: pytest.ExceptionInfo[StateLoadError]) -> Any:
    assert len(excinfo.value.problems) == 1
    return excinfo.value.problems[0]


def test_yaml_config_with_comments_builds_an_agent_with_defaults(tmp_path: Path) -> None:
    agent = from_config(Agent, write(tmp_path, "agent.yaml", CONFIG))
    assert (agent.name, agent.turns, agent.tools) == ("Friday", 0, ["web", "math"])
    assert agent.memory.content == [Message(Role.USER, "Hello!\nWho are you?\n")]


def test_yaml_config_reads_times_and_words_as_editors_and_the_schema_do(tmp_path: Path) -> None:
    """YAML 1.2, not 1.1: 10:30 is not the number 630 (while 09:50 was text), ``no`` is not false."""
    path = write(tmp_path, "office.yaml", "opens: 09:50\ncloses: 17:30\ncountry: no\nopen_on_sunday: false\n")
    assert from_config(Office, path) == Office(datetime.time(9, 50), datetime.time(17, 30), "no", False)


@pytest.mark.parametrize("word", ["yes", "on", "off", "no"])
def test_yaml_config_booleans_are_true_and_false_only(tmp_path: Path, word: str) -> None:
    path = write(tmp_path, "office.yaml", f"opens: 09:00\ncloses: 17:00\ncountry: se\nopen_on_sunday: {word}\n")
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Office, path)
    problem = only_problem(excinfo)
    assert (problem.dotted, problem.line) == ("open_on_sunday", 4)
    assert "got a string" in problem.message


@stateful
class Gauge:
    value: Any = None


@pytest.mark.parametrize(("text", "value"), [("42", 42), ("0x2a", 42), ("0o52", 42), ("1.5", 1.5), ("1e-3", 0.001), ("1_000", "1_000")])
def test_yaml_config_numbers_are_those_docs_list(tmp_path: Path, text: str, value: object) -> None:
    """docs/config-and-schema.md: the YAML 1.2 core schema's numbers; ``1_000`` is text."""
    loaded = from_config(Gauge, write(tmp_path, "gauge.yaml", f"value: {text}\n")).value
    assert (loaded, type(loaded)) == (value, type(value))


@pytest.mark.parametrize("text", [".inf", "-.inf", ".nan"])
def test_yaml_config_infinities_are_refused_with_their_line(tmp_path: Path, text: str) -> None:
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Limits, write(tmp_path, "limits.yaml", f"stop: []\nmax_turns: {text}\n"))
    problem = only_problem(excinfo)
    assert (problem.dotted, problem.line) == ("max_turns", 2)
    assert "not a finite number" in problem.message


@pytest.mark.parametrize("suffix", [".yml", ".YAML"])
def test_other_yaml_suffixes_and_str_paths(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path, f"agent{suffix}", "name: Friday\n")
    assert from_config(Agent, str(path)).name == "Friday"


def test_json_config(tmp_path: Path) -> None:
    path = write(tmp_path, "agent.json", '{"name": "Friday", "turns": 2}')
    assert from_config(Agent, path).turns == 2


def test_mapping_config_and_value_records() -> None:
    assert from_config(Agent, {"name": "Friday"}).name == "Friday"
    assert from_config(Limits, {"stop": ["bye"]}) == Limits(10, ["bye"])


def test_empty_or_comment_only_file_gives_the_defaults(tmp_path: Path) -> None:
    assert from_config(Limits, write(tmp_path, "limits.yaml", "# nothing set yet\n")) == Limits()


def test_unknown_key_names_the_key_and_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "agent.yaml", "name: Friday\ntunrs: 3\n")
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Agent, path)
    problem = only_problem(excinfo)
    assert (problem.dotted, problem.message) == ("tunrs", "unknown key; did you mean 'turns'?")
    assert (problem.source, problem.line, problem.column) == (str(path), 2, 1)
    assert f"{path}:2:1: tunrs: unknown key; did you mean 'turns'?" in str(excinfo.value)


def test_a_module_field_that_cannot_hold_none_refuses_null_as_seed_does(tmp_path: Path) -> None:
    """``memory: null`` built an Agent whose memory was None, which seed() and a load refuse."""
    path = write(tmp_path, "agent.yaml", "name: Friday\nmemory: null\n")
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Agent, path)
    problem = only_problem(excinfo)
    assert (problem.dotted, problem.message, problem.line) == ("memory", "expected an object of state, got null", 2)
    with pytest.raises(StateLoadError, match="memory: expected an object of state, got null"):
        seed(Agent(name="Friday"), path)


def test_a_module_field_that_may_hold_none_takes_null(tmp_path: Path) -> None:
    @stateful
    class Holder(StateModule):
        optional: Memory | None = state_field(factory=Memory)
        unset: Memory = state_field(default=None)  # type: ignore[assignment]  # set up later, as some apps do

    path = write(tmp_path, "holder.yaml", "optional: null\nunset: null\n")
    built = from_config(Holder, path)
    assert [built.optional, built.unset] == [None, None]
    held = Holder()
    seed(held, path)
    assert [held.optional, held.unset] == [None, None]


def test_unknown_key_is_ignored_when_not_strict(tmp_path: Path) -> None:
    path = write(tmp_path, "agent.yaml", "name: Friday\ntunrs: 3\n")
    assert from_config(Agent, path, strict=False).turns == 0


def test_every_problem_is_reported_with_its_position(tmp_path: Path) -> None:
    text = """\
        name: Friday
        turns: [1, 2]
        memory:
          content:
            - role: user
              content: hi
            - role: robot
              content: hi
              mood: happy
        """
    path = write(tmp_path, "agent.yaml", text)
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Agent, path)
    found = {(p.dotted, p.line) for p in excinfo.value.problems}
    assert found == {("turns", 2), ("memory.content[1].role", 7), ("memory.content[1].mood", 9)}
    assert all(p.source == str(path) and p.column is not None for p in excinfo.value.problems)


def test_missing_required_field_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "agent.yaml", "turns: 1\n")
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Agent, path)
    problem = only_problem(excinfo)
    assert (problem.dotted, problem.message) == ("name", "required key is missing")
    assert problem.source == str(path)


def test_json_errors_are_positioned_too(tmp_path: Path) -> None:
    path = write(tmp_path, "agent.json", '{\n  "name": "Friday",\n  "turns": "two"\n}\n')
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Agent, path)
    problem = only_problem(excinfo)
    assert (problem.dotted, problem.line, problem.column) == ("turns", 3, 3)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Agent, write(tmp_path, "agent.yaml", "- name: Friday\n"))
    problem = only_problem(excinfo)
    assert problem.path == ()
    assert problem.line == 1


def test_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "agent.yaml", "name: Friday\ntools: [web\n")
    with pytest.raises(DocumentError) as excinfo:
        from_config(Agent, path)
    assert excinfo.value.source == str(path)
    assert (excinfo.value.line, excinfo.value.column) == (2, 8)  # where the '[' opens


def test_python_tags_are_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(DocumentError) as excinfo:
        from_config(Agent, write(tmp_path, "agent.yaml", text))
    assert excinfo.value.line == 1
    assert not marker.exists()


@pytest.mark.parametrize("name", ["agent.toml", "agent"])
def test_unknown_suffix_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(DocumentError, match=r"cannot tell the format .* use one of \.json, \.yaml, \.yml"):
        from_config(Agent, write(tmp_path, name, "name = 'x'\n"))


def test_missing_file_is_a_document_error(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="cannot read the file: No such file or directory") as excinfo:
        from_config(Agent, tmp_path / "nope.yaml")
    assert excinfo.value.source == str(tmp_path / "nope.yaml")


def test_a_path_with_a_nul_character_is_a_document_error() -> None:
    for call in (lambda: from_config(Agent, "agent\x00.yaml"), lambda: seed(Agent(name="x"), "agent\x00.yaml")):
        with pytest.raises(DocumentError, match=r"cannot read the file: the path 'agent\\x00.yaml' contains a NUL") as excinfo:
            call()
        assert excinfo.value.source == "agent\x00.yaml"


def test_bad_arguments_are_definition_errors() -> None:
    with pytest.raises(StateDefinitionError, match="is not a @stateful class"):
        from_config(dict, {})
    with pytest.raises(StateDefinitionError, match="a config source is a file path or a mapping"):
        from_config(Agent, 42)  # type: ignore[arg-type]
    with pytest.raises(StateDefinitionError, match="loads into a StateModule instance"):
        seed(Limits(), {})  # type: ignore[arg-type]


def test_seed_loads_leniently_and_reports_what_it_ignored(tmp_path: Path) -> None:
    agent = Agent(name="Friday", turns=5, client="kept")
    path = write(tmp_path, "seed.yaml", "tools: [web]\ncolour: blue\nmemory:\n  content: []\n  extra: 1\n")
    result = seed(agent, path)
    assert (agent.name, agent.turns, agent.tools, agent.client) == ("Friday", 5, ["web"], "kept")
    assert set(result.unexpected_keys) == {"colour", "memory.extra"}
    assert set(result.missing_keys) == {"name", "turns"}


def test_failed_seed_changes_nothing_and_is_positioned(tmp_path: Path) -> None:
    agent = Agent(name="Friday", tools=["web"])
    before = agent.state_dict()
    path = write(tmp_path, "seed.yaml", "tools: [math]\nturns: many\n")
    with pytest.raises(StateLoadError) as excinfo:
        seed(agent, path)
    assert agent.state_dict() == before
    problem = only_problem(excinfo)
    assert (problem.dotted, problem.source, problem.line) == ("turns", str(path), 2)


def test_seed_from_a_mapping() -> None:
    agent = Agent(name="Friday")
    assert seed(agent, {"turns": 4}).unexpected_keys == []
    assert agent.turns == 4


class Legacy(StateModule):
    """A module in AgentScope's style: state registered at run time, its own load_state_dict()."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = 1, 2
        self.register_state("a")
        self.register_state("b")

    def load_state_dict(self, state: Any, strict: bool = True) -> None:  # type: ignore[override]
        self.a = state["a"]
        self.b = int(state["b"])  # raises after a was set


def test_seed_through_an_overriding_load_state_dict_restores_the_module_when_it_raises(tmp_path: Path) -> None:
    legacy = Legacy()
    with pytest.raises(StateLoadError) as excinfo:
        seed(legacy, write(tmp_path, "legacy.yaml", "a: 99\nb: x\n"))
    assert (legacy.a, legacy.b) == (1, 2)
    problem = only_problem(excinfo)
    assert problem.message.startswith("Legacy.load_state_dict() raised ValueError")
    assert problem.source == str(tmp_path / "legacy.yaml")


class Reporting(Legacy):
    def load_state_dict(self, state: Any, strict: bool = True) -> LoadResult:  # type: ignore[override]
        self.a = state.get("a", self.a)
        return LoadResult([] if "a" in state else ["a"], [key for key in state if key != "a"])


def test_seed_through_an_overriding_load_state_dict_returns_a_load_result() -> None:
    legacy, reporting = Legacy(), Reporting()
    result = seed(legacy, {"a": 5, "b": "7"})
    assert (legacy.a, legacy.b, result.missing_keys, result.unexpected_keys) == (5, 7, [], [])
    result = seed(reporting, {"b": 3})
    assert (result.missing_keys, result.unexpected_keys) == (["a"], ["b"])


@stateful
class Connected(StateModule):
    client: object = attrs.field()  # not state, and no default
    name: str = state_field(default="x")


@pytest.mark.parametrize("config", [{}, {"client": 1}, {"client": 1, "name": "y"}])
def test_a_required_attribute_that_is_not_state_says_to_build_the_module_in_code(config: dict[str, Any]) -> None:
    with pytest.raises(StateLoadError) as excinfo:
        from_config(Connected, config)
    problem = only_problem(excinfo)
    assert problem.dotted == "client"
    assert "not state, but the constructor needs it" in problem.message
    assert "seed()" in problem.message


def test_yaml_1_1_booleans_and_numbers_are_explained(tmp_path: Path) -> None:
    path = tmp_path / "office.yaml"
    path.write_text("opens: '09:00:00'\ncloses: '17:00:00'\ncountry: no\nopen_on_sunday: yes\n", encoding="utf-8")
    limits = tmp_path / "limits.yaml"
    limits.write_text("max_turns: 1_000\nstop: [\"yes\"]\n", encoding="utf-8")
    with pytest.raises(StateLoadError) as failed:
        from_config(Office, path)
    assert [str(p) for p in failed.value.problems] == [
        f"{path}:4:1: open_on_sunday: expected a boolean, got a string (YAML 1.2 reads yes as text, not a boolean: write true)"
    ]  # `country: no` is the text the field wants
    shown = failed.value.problems[0].message
    with pytest.raises(StateLoadError) as failed:
        from_config(Limits, limits)
    assert [p.message for p in failed.value.problems] == [
        "expected an integer, got a string (YAML 1.2 reads 1_000 as text, not an integer: write 1000)"
    ]
    path.write_text("opens: '09:00:00'\ncloses: '17:00:00'\ncountry: x\nopen_on_sunday: 'yes'\n", encoding="utf-8")
    with pytest.raises(StateLoadError) as failed:
        from_config(Office, path)
    assert [p.message for p in failed.value.problems] == ["expected a boolean, got a string"]  # quoted: meant as text
    page = " ".join((Path(__file__).parent.parent / "docs" / "config-and-schema.md").read_text(encoding="utf-8").split())
    assert f"`open: {shown}`" in page
