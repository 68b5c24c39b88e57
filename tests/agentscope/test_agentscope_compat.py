"""statekit's side of AgentScope compatibility: overrides on every path, tuples,
``del``, error classes, logging and ``close()`` (issue 10)."""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentscope_like import InMemoryMemory, Msg, Toolkit
from statekit import JSONSession, StateModule, from_config, state_field, stateful
from statekit.state.load import build
from statekit.errors import (
    SessionError,
    SessionNotFoundError,
    StateAttributeError,
    StateDumpError,
    StatekitError,
    StateLoadError,
    StateModuleNameError,
)


class Agent(StateModule):
    """A plain module holding overriding ones, in AgentScope's style."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "Friday"
        self.memory = InMemoryMemory()
        self.toolkit = Toolkit()
        self.toolkit.create_tool_group("web")
        self.register_state("name")


class Returns(StateModule):
    """An override returning whatever the test puts in ``self.out``."""

    def __init__(self, out: Any) -> None:
        super().__init__()
        self.out = out

    def state_dict(self) -> dict[str, Any]:
        return self.out  # type: ignore[no-any-return]


class Holder(StateModule):
    def __init__(self, child: StateModule) -> None:
        super().__init__()
        self.child = child


class Fragile(StateModule):
    """Loads in place, then fails on a bad item: half-loaded unless restored."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[int] = [1, 2]

    def state_dict(self) -> dict[str, Any]:
        return {"items": list(self.items)}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:  # type: ignore[override]
        self.items.clear()
        for item in state_dict["items"]:
            if not isinstance(item, int):
                raise ValueError(f"bad item {item!r}")
            self.items.append(item)


async def _memory_with(text: str) -> InMemoryMemory:
    memory = InMemoryMemory()
    await memory.add(Msg("user", text, "user"), marks="seen")
    return memory


# -- overrides on every path ---------------------------------------------------------


async def test_a_nested_override_is_dumped_through_it() -> None:
    agent = Agent()
    await agent.memory.add(Msg("user", "hi", "user"))
    agent.toolkit.groups["web"].active = True
    state = agent.state_dict()
    assert state["toolkit"] == {"active_groups": ["web"]}
    assert [item[0]["content"] for item in state["memory"]["content"]] == ["hi"]
    assert state["memory"]["_compressed_summary"] == ""


async def test_overrides_round_trip_through_a_session(tmp_path: Path) -> None:
    agent = Agent()
    await agent.memory.add(Msg("user", "hi", "user"), marks=["a"])
    agent.toolkit.groups["web"].active = True
    session = JSONSession(tmp_path)
    await session.asave("s", agent=agent)
    fresh = Agent()
    await session.aload("s", allow_not_exist=False, agent=fresh)
    assert [(m.content, marks) for m, marks in fresh.memory.content] == [("hi", ["a"])]
    assert fresh.toolkit.groups["web"].active


def test_an_override_result_is_copied_and_its_tuples_become_lists() -> None:
    inner = [1, 2]
    module = Returns({"pairs": [({"a": inner}, ("x", "y"))]})
    state = Holder(module).state_dict()["child"]
    assert state == {"pairs": [[{"a": [1, 2]}, ["x", "y"]]]}
    inner.append(3)
    assert state["pairs"][0][0]["a"] == [1, 2]


@pytest.mark.parametrize(
    ("out", "path", "words"),
    [
        ({"bad": {1: "x"}}, "child.bad", "keys must be strings"),
        ({"bad": [math.nan]}, "child.bad[0]", "not a finite number"),
        ({"bad": {1, 2}}, "child.bad", "set"),
        (["not", "a", "dict"], "child", "not an object"),
    ],
)
def test_an_override_result_json_cannot_hold_is_refused_with_its_path(out: Any, path: str, words: str) -> None:
    with pytest.raises(StateDumpError) as caught:
        Holder(Returns(out)).state_dict()
    assert [p.dotted for p in caught.value.problems] == [path]
    assert words in str(caught.value)


def test_an_override_that_raises_is_named_with_its_path() -> None:
    class Broken(StateModule):
        def state_dict(self) -> dict[str, Any]:
            raise RuntimeError("boom")

    with pytest.raises(StateDumpError, match=r"child: .*Broken.state_dict\(\) raised RuntimeError: boom"):
        Holder(Broken()).state_dict()


async def test_a_failing_override_load_restores_every_module(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    memory, fragile, agent = await _memory_with("saved"), Fragile(), Agent()
    await session.asave("s", memory=memory, fragile=fragile, agent=agent)
    document = (tmp_path / "s.json").read_text(encoding="utf-8").replace("[\n      1,", '[\n      "x",')
    (tmp_path / "s.json").write_text(document, encoding="utf-8")

    memory2, fragile2, agent2 = await _memory_with("kept"), Fragile(), Agent()
    fragile2.items.append(3)
    agent2.name = "Kept"
    with pytest.raises(StateLoadError, match=r"fragile: Fragile.load_state_dict\(\) raised ValueError: bad item 'x'"):
        await session.aload("s", memory=memory2, fragile=fragile2, agent=agent2)
    assert [m.content for m, _ in memory2.content] == ["kept"]
    assert fragile2.items == [1, 2, 3]
    assert agent2.name == "Kept"


def test_the_override_gets_a_private_copy_and_strict() -> None:
    seen: list[tuple[dict[str, Any], bool]] = []

    class Spy(StateModule):
        def state_dict(self) -> dict[str, Any]:
            return {}

        def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:  # type: ignore[override]
            seen.append((state_dict, strict))

    data = {"child": {"deep": [1]}}
    Holder(Spy()).load_state_dict(data, strict=False)
    assert seen == [({"deep": [1]}, False)]
    assert seen[0][0]["deep"] is not data["child"]["deep"]


def test_a_load_result_from_an_override_is_reported_under_its_path() -> None:
    class Inner(StateModule):
        def __init__(self) -> None:
            super().__init__()
            self.a = 1
            self.register_state("a")

        def load_state_dict(self, state_dict: Any, strict: bool = True) -> Any:
            return super().load_state_dict(state_dict, strict)

    result = Holder(Inner()).load_state_dict({"child": {"a": 2, "zzz": 0}}, strict=False)
    assert result.unexpected_keys == ["child.zzz"]


def test_super_state_dict_leaves_a_replaced_registered_value_to_the_override() -> None:
    memory = InMemoryMemory()
    memory.content.append((Msg("user", "hi", "user"), []))
    assert memory.state_dict()["content"][0][0]["content"] == "hi"


def test_build_and_from_config_go_through_the_override(tmp_path: Path) -> None:
    @stateful
    class Team(StateModule):
        toolkit: Toolkit | None = state_field(default=None)

    config = tmp_path / "team.yaml"
    config.write_text("toolkit:\n  active_groups: []\n", encoding="utf-8")
    team = from_config(Team, config)
    assert isinstance(team.toolkit, Toolkit)
    (tmp_path / "memory.yaml").write_text("_compressed_summary: from a config\ncontent: []\n", encoding="utf-8")
    assert from_config(InMemoryMemory, tmp_path / "memory.yaml")._compressed_summary == "from a config"
    built = build(InMemoryMemory, {"_compressed_summary": "s", "content": []})
    assert built._compressed_summary == "s"
    with pytest.raises(StateLoadError, match="InMemoryMemory.load_state_dict"):
        build(InMemoryMemory, {"content": [42]})


# -- tuples, del, error classes --------------------------------------------------------


def test_registered_tuples_are_json_arrays() -> None:
    class Pairs(StateModule):
        def __init__(self) -> None:
            super().__init__()
            self.pairs = [("a", 1)]
            self.register_state("pairs")
            self.codec = (1, 2)
            self.register_state("codec", custom_to_json=lambda value: (value, {"k": (3,)}))

    assert Pairs().state_dict() == {"pairs": [["a", 1]], "codec": [[1, 2], {"k": [3]}]}


def test_deleting_a_registered_attribute_drops_it_from_the_state() -> None:
    agent = Agent()
    agent.c = 1  # type: ignore[attr-defined]
    agent.register_state("c")
    assert "c" in agent.state_dict()
    del agent.c  # type: ignore[attr-defined]
    assert "c" not in agent.state_dict()
    with pytest.raises(StateLoadError, match="c: unknown key"):
        agent.load_state_dict({**agent.state_dict(), "c": 1})


def test_error_classes_are_what_agentscope_code_catches(tmp_path: Path) -> None:
    with pytest.raises(AttributeError) as caught:
        Agent().register_state("missing")
    assert isinstance(caught.value, StateAttributeError) and isinstance(caught.value, StatekitError)
    with pytest.raises(ValueError) as not_found:
        JSONSession(tmp_path).load("nope", allow_not_exist=False, agent=Agent())
    assert isinstance(not_found.value, SessionNotFoundError)


# -- logging ----------------------------------------------------------------------------


async def test_logs_say_where_and_how_much_but_never_what(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="statekit")
    session = JSONSession(tmp_path)
    memory = await _memory_with("secret-token-123")
    await session.asave("s", "u", memory=memory)
    await session.aload("s", "u", memory=InMemoryMemory())
    await session.aload("gone", "u", memory=InMemoryMemory())
    size = (tmp_path / "@u" / "s.json").stat().st_size
    messages = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "statekit"]
    assert messages[0][0] == "DEBUG" and messages[0][1].startswith(f"saved memory ({size} bytes) to {tmp_path / '@u' / 's.json'} in ")
    assert messages[1][0] == "DEBUG" and messages[1][1].startswith(f"loaded memory ({size} bytes) from ")
    assert messages[2][0] == "INFO" and "does not exist" in messages[2][1]
    assert not any("secret-token-123" in text for _, text in messages)


def test_a_non_strict_load_warns_about_ignored_keys(caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent()
    with caplog.at_level(logging.WARNING, logger="statekit"):
        agent.load_state_dict({**agent.state_dict(), "mood": "secret-value"}, strict=False)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "mood" in caplog.records[0].getMessage()
    assert "secret-value" not in caplog.records[0].getMessage()



def test_the_statekit_logger_is_silent_until_configured(tmp_path: Path) -> None:
    """No handler configured: a warning must not reach stderr through logging's last resort."""
    script = (
        "from statekit import JSONSession, StateModule, state_field, stateful\n"
        "@stateful\n"
        "class A(StateModule):\n"
        "    n: int = state_field(default=0)\n"
        "a = A()\n"
        "a.load_state_dict({'n': 1, 'mood': 'x'}, strict=False)\n"
        f"JSONSession({str(tmp_path)!r}).load('gone', a=a)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")


# -- close ------------------------------------------------------------------------------


def test_close_blocks_outside_a_loop(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s", agent=Agent())
    session.close()
    assert session._portal is None or session._portal._loop is None


async def test_close_is_awaited_inside_a_loop(tmp_path: Path) -> None:
    closed: list[bool] = []

    class Watched(JSONSession):
        async def _close(self) -> None:
            closed.append(True)

    session = Watched(tmp_path)
    await session.close()
    assert closed == [True]


async def test_a_blocking_with_block_inside_a_loop_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="cannot be called inside a running event loop"):
        with JSONSession(tmp_path):
            await asyncio.sleep(0)


def test_to_json_tuples_are_arrays_through_a_session_but_typed_fields_refuse_them(tmp_path: Path) -> None:
    @stateful
    class Span(StateModule):
        span: Any = state_field(default=None, to_json=lambda v: (v, (v,)), from_json=lambda d: d[0])
        raw: Any = state_field(default=None)

    session = JSONSession(tmp_path)
    session.save("s", span=Span(span=3))
    assert '"span": [\n      3,\n      [\n        3\n      ]\n    ]' in (tmp_path / "s.json").read_text(encoding="utf-8")
    loaded = Span()
    session.load("s", span=loaded)
    assert loaded.span == 3
    with pytest.raises(StateDumpError):
        session.save("s", span=Span(raw=(1, 2)))


async def test_registered_tuples_are_arrays_through_a_session_too(tmp_path: Path) -> None:
    class Pairs(StateModule):
        def __init__(self) -> None:
            super().__init__()
            self.pairs: list[Any] = [("a", 1), ("b", (2, 3))]
            self.register_state("pairs")

    session = JSONSession(tmp_path)
    await session.asave("s", pairs=Pairs())
    loaded = Pairs()
    loaded.pairs = []
    await session.aload("s", pairs=loaded)
    assert loaded.pairs == [["a", 1], ["b", [2, 3]]]


# -- a refused assignment or restore is reported, and nothing is kept --------------------


class Tuned(StateModule):
    """Imperative state whose ``temperature`` is a property with a checking setter."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "friday"
        self._temperature = 0.5
        self.fragile = Fragile()
        self.register_state("name")
        self.register_state("temperature")

    @property
    def temperature(self) -> float:
        return self._temperature

    @temperature.setter
    def temperature(self, value: float) -> None:
        if not 0 <= value <= 2:
            raise ValueError(f"temperature {value} out of range")
        self._temperature = value


def test_a_setter_refusing_a_value_at_the_commit_changes_nothing(tmp_path: Path) -> None:
    tuned = Tuned()
    state = {"name": "jarvis", "temperature": 7, "fragile": {"items": [3]}}
    with pytest.raises(StateLoadError) as caught:
        tuned.load_state_dict(state)
    assert [(p.path, p.message) for p in caught.value.problems] == [
        (("temperature",), "setting it raised ValueError: temperature 7 out of range")
    ]
    assert (tuned.name, tuned.temperature, tuned.fragile.items) == ("friday", 0.5, [1, 2])
    (tmp_path / "s.json").write_bytes(b'{"tuned": {"name": "jarvis", "temperature": 7, "fragile": {"items": [3]}}}')
    with pytest.raises(StateLoadError, match=r"tuned\.temperature: setting it raised ValueError"):
        JSONSession(tmp_path).load("s", tuned=tuned)
    assert (tuned.name, tuned.temperature, tuned.fragile.items) == ("friday", 0.5, [1, 2])


class Merging(StateModule):
    """An override that merges into its dict instead of replacing it: a restore cannot undo it."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: dict[str, bool] = {"basic": True}

    def state_dict(self) -> dict[str, Any]:
        return {"groups": dict(self.groups)}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:  # type: ignore[override]
        self.groups.update(state_dict["groups"])


def test_an_override_that_cannot_be_put_back_is_reported_as_half_loaded() -> None:
    holder = Holder(Merging())
    holder.bad = Fragile()  # type: ignore[attr-defined]  # a submodule set at run time, AgentScope style
    with pytest.raises(StateLoadError) as caught:
        holder.load_state_dict({"child": {"groups": {"web": True}}, "bad": {"items": ["x"]}})
    messages = {p.dotted: p.message for p in caught.value.problems}
    assert messages["child"] == "could not be restored (its load_state_dict() did not put it back); it may be half-loaded"
    assert "bad item 'x'" in messages["bad"]


class RegistersWhenLoaded(StateModule):
    """An override that registers a new attribute as it loads, then fails."""

    def __init__(self) -> None:
        super().__init__()
        self.a = 0
        self.register_state("a")

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:  # type: ignore[override]
        self.a = state_dict["a"]
        self.b = state_dict["b"]
        self.register_state("b")
        raise ValueError("bad b")


def test_an_override_that_registers_state_then_raises_is_restored_whole() -> None:
    holder = Holder(RegistersWhenLoaded())
    with pytest.raises(StateLoadError) as caught:
        holder.load_state_dict({"child": {"a": 5, "b": 6}})
    assert [p.message for p in caught.value.problems] == ["RegistersWhenLoaded.load_state_dict() raised ValueError: bad b"]
    assert holder.state_dict() == {"child": {"a": 0}}


class Counter(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.register_state("n")


class LoadsThenRefuses(StateModule):
    """An override that loads everything through super() (its submodule in place), then refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.label = "start"
        self.register_state("label")
        self.counter = Counter()

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:  # type: ignore[override]
        super().load_state_dict(state_dict, strict=strict)
        raise ValueError("refused after loading")


def test_an_override_that_loaded_its_submodules_then_raised_is_put_back_without_calling_it_again() -> None:
    child = LoadsThenRefuses()
    counter = child.counter
    holder = Holder(child)
    with pytest.raises(StateLoadError) as caught:
        holder.load_state_dict({"child": {"label": "new", "counter": {"n": 5}}})
    assert [p.message for p in caught.value.problems] == ["LoadsThenRefuses.load_state_dict() raised ValueError: refused after loading"]
    assert holder.child is child and child.counter is counter
    assert (child.label, counter.n) == ("start", 0)


# -- foreign modules: AgentScope's protocol without statekit's base class (issue 24) --------


class Foreign:
    """A module in the protocol alone, like ``agentscope.module.StateModule``'s subclasses:
    loads key by key (half-loaded when a later key fails, unless restored)."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.mood: Any = "calm"
        self.inner: Foreign | None = None

    def state_dict(self) -> dict[str, Any]:
        inner = {} if self.inner is None else {"inner": self.inner.state_dict()}
        return {**inner, "notes": self.notes, "mood": self.mood}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        if self.inner is not None:
            self.inner.load_state_dict(state_dict["inner"], strict=strict)
        self.notes = list(state_dict["notes"])
        if not isinstance(state_dict["mood"], str):
            raise TypeError("mood must be a string")
        self.mood = state_dict["mood"]


class Keeps(StateModule):
    """A statekit module holding a foreign one, in AgentScope's style."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.register_state("count")
        self.foreign = Foreign()


class Mood(str, enum.Enum):
    HAPPY = "happy"


def test_a_foreign_module_is_saved_and_loaded_at_the_top_level(tmp_path: Path) -> None:
    foreign = Foreign()
    foreign.notes = ["a", "b"]
    session = JSONSession(tmp_path)
    session.save("s", foreign=foreign)
    fresh = Foreign()
    session.load("s", allow_not_exist=False, foreign=fresh)
    assert (fresh.notes, fresh.mood) == (["a", "b"], "calm")


def test_a_foreign_module_held_by_a_statekit_module_is_nested_state_first(tmp_path: Path) -> None:
    keeps = Keeps()
    keeps.foreign.notes.append("kept")
    keeps.count = 2
    assert keeps.state_dict() == {"foreign": {"notes": ["kept"], "mood": "calm"}, "count": 2}
    assert list(keeps.state_dict()) == ["foreign", "count"]
    session = JSONSession(tmp_path)
    session.save("s", keeps=keeps)
    fresh = Keeps()
    session.load("s", allow_not_exist=False, keeps=fresh)
    assert (fresh.foreign.notes, fresh.count) == (["kept"], 2)


def test_a_foreign_module_that_fails_half_way_is_put_back_with_everything_else() -> None:
    keeps = Keeps()
    keeps.foreign.inner = Foreign()
    keeps.foreign.inner.notes = ["inner"]
    keeps.foreign.notes = ["outer"]
    before = keeps.state_dict()
    data = {"foreign": {"inner": {"notes": ["new"], "mood": "x"}, "notes": ["new"], "mood": 5}, "count": 9}
    with pytest.raises(StateLoadError) as caught:
        keeps.load_state_dict(data)
    assert [p.dotted for p in caught.value.problems] == ["foreign"]
    assert "Foreign.load_state_dict() raised TypeError: mood must be a string" in str(caught.value)
    assert keeps.state_dict() == before  # its inner module and its notes were loaded, then restored


def test_what_a_foreign_module_returns_is_checked_as_json_data_with_its_path() -> None:
    keeps = Keeps()
    keeps.foreign.mood = {1, 2}
    with pytest.raises(StateDumpError) as caught:
        keeps.state_dict()
    assert [p.dotted for p in caught.value.problems] == ["foreign.mood"]


def test_what_json_dumps_writes_is_plain_json_in_a_foreign_modules_state(tmp_path: Path) -> None:
    keeps = Keeps()
    keeps.foreign.mood = Mood.HAPPY
    keeps.foreign.notes = collections.OrderedDict(a=("x", "y"))  # type: ignore[assignment]
    assert keeps.state_dict()["foreign"] == {"notes": {"a": ["x", "y"]}, "mood": "happy"}
    assert type(keeps.state_dict()["foreign"]["mood"]) is str


def test_registering_a_foreign_modules_name_is_a_value_error() -> None:
    keeps = Keeps()
    with pytest.raises(StateModuleNameError, match="Keeps.foreign holds a module, which is nested state already"):
        keeps.register_state("foreign", custom_to_json=lambda m: {}, custom_from_json=lambda d: Foreign())
    assert list(keeps.state_dict()) == ["foreign", "count"]


def test_typed_state_fields_keep_exact_types_where_registered_attributes_take_json_dumps_values() -> None:
    @stateful
    class Typed(StateModule):
        options: dict[str, int] = state_field(factory=dict)
        word: str = state_field(default="")
        mood: Mood = state_field(default=Mood.HAPPY)

    for typed, path in [(Typed(options=collections.OrderedDict(a=1)), "options"), (Typed(word=Mood.HAPPY), "word")]:
        with pytest.raises(StateDumpError) as caught:
            typed.state_dict()
        assert [p.dotted for p in caught.value.problems] == [path]
    typed = Typed(options={"a": 1}, word="w")
    fresh = Typed()
    fresh.load_state_dict(typed.state_dict())
    assert fresh.mood is Mood.HAPPY  # a declared enum loads back as the enum

    class Loose(StateModule):
        def __init__(self) -> None:
            super().__init__()
            self.options = collections.OrderedDict(a=1)
            self.word = Mood.HAPPY
            self.register_state("options")
            self.register_state("word")

    assert Loose().state_dict() == {"options": {"a": 1}, "word": "happy"}


def test_a_state_field_typed_with_a_foreign_class_is_a_nested_module(tmp_path: Path) -> None:
    @stateful
    class Declared(StateModule):
        foreign: Foreign = state_field(factory=Foreign)
        spare: Foreign | None = state_field(default=None)

    declared = Declared()
    declared.foreign.notes = ["a"]
    assert declared.state_dict() == {"foreign": {"notes": ["a"], "mood": "calm"}, "spare": None}
    session = JSONSession(tmp_path)
    session.save("s", declared=declared)
    fresh = Declared()
    session.load("s", allow_not_exist=False, declared=fresh)
    assert fresh.foreign.notes == ["a"] and fresh.spare is None
    fresh.load_state_dict({"foreign": {"notes": [], "mood": "calm"}, "spare": {"notes": ["built"], "mood": "ok"}})
    assert fresh.state_dict()["spare"] == {"notes": ["built"], "mood": "ok"}  # built with Foreign(), loaded through its method
