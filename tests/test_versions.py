"""Class versions and migrations (issue 7): old sessions always load."""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import orjson
import pytest

import statekit
from statekit import (
    StateDefinitionError,
    StatekitError,
    StateLoadError,
    StateModule,
    StateVersionError,
    from_config,
    json_schema,
    state_field,
    stateful,
)
from statekit.cli import main
from statekit.testing import SessionFactory
from version_models import (
    Agent,
    AgentV1,
    AgentV2,
    Memory,
    MemoryV1,
    Note,
    NoteV1,
)


def v1_agent() -> AgentV1:
    return AgentV1(
        name="Friday",
        turns=4,
        user="Ada Lovelace",
        tool_group="search",
        memory=MemoryV1([NoteV1("likes tea"), NoteV1("lives in London")]),
    )


def v3_expected() -> Agent:
    memory = Memory([Note("likes tea"), Note("lives in London")], summary="")
    return Agent("Friday", 4, "Ada", "Lovelace", ["search"], memory)


def keep(state: dict[str, Any]) -> dict[str, Any]:
    return state


# -- definitions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"version": 0}, "Bad: version must be an int >= 1, got 0"),
        ({"version": True}, "Bad: version must be an int >= 1, got True"),
        ({"version": "2"}, "Bad: version must be an int >= 1, got '2'"),
        ({"version": 3, "migrations": {1: keep}}, "Bad is version 3 but has no migration for 2 -> 3"),
        ({"version": 4, "migrations": {2: keep}}, "Bad is version 4 but has no migration for 1 -> 2, 3 -> 4"),
        ({"version": 2, "migrations": {1: keep, 2: keep}}, "Bad: migrations[2]: a migration turns version N into N + 1, for 1 <= N < 2 (the class is version 2)"),
        ({"version": 2, "migrations": {0: keep, 1: keep}}, "Bad: migrations[0]: a migration turns version N"),
        ({"migrations": {1: keep}}, "Bad: migrations[1]: a migration turns version N into N + 1, for 1 <= N < 1 (the class is version 1)"),
        ({"version": 2, "migrations": {"1": keep}}, "Bad: migrations['1']"),
        ({"version": 2, "migrations": {1: "keep"}}, "Bad: migrations[1] is str, not a function"),
        ({"version": 2, "migrations": [keep]}, "Bad: migrations must map versions to functions, got list"),
    ],
)
def test_wrong_versions_fail_when_the_class_is_defined(options: dict[str, Any], message: str) -> None:
    with pytest.raises(StateDefinitionError) as caught:

        @stateful(**options)
        class Bad(StateModule):
            name: str = state_field(default="")

    assert str(caught.value).split("<locals>.")[-1].startswith(message), caught.value


def test_migrations_without_version_say_which_version_to_set() -> None:
    with pytest.raises(StateDefinitionError) as caught:

        @stateful(migrations={1: keep})
        class Bad(StateModule):
            name: str = state_field(default="")

    assert str(caught.value).endswith(
        "(the class is version 1); the last migration makes version 2: set @stateful(version=2, migrations=...) "
        "(without version=, a class is version 1)"
    )
    with pytest.raises(StateDefinitionError) as caught:

        @stateful(version=2, migrations={1: keep, 2: keep})
        class Ahead(StateModule):
            name: str = state_field(default="")

    assert str(caught.value).endswith("; the last migration makes version 3: set @stateful(version=3, migrations=...)")


def test_a_field_may_not_take_the_version_key() -> None:
    with pytest.raises(StateDefinitionError, match="'__version__' is reserved"):

        @stateful(version=2, migrations={1: keep})
        class Bad:
            __version__: int = 0


def test_a_subclass_is_version_1_unless_it_says_otherwise() -> None:
    @stateful
    class Plain(Agent):
        extra: int = state_field(default=0)

    @stateful(version=2, migrations={1: keep})
    class Own(Agent):
        extra: int = state_field(default=0)

    assert "__version__" not in Plain().state_dict() and Own().state_dict()["__version__"] == 2


def test_version_error_is_exported_a_statekit_error_and_pickles() -> None:
    assert statekit.StateVersionError is StateVersionError and "StateVersionError" in statekit.__all__
    error = StateVersionError("too new", path=("agent", "memory"), found=3, expected=2)
    assert isinstance(error, StatekitError)
    again = pickle.loads(pickle.dumps(error.located("s.json")))
    assert (str(again), again.path, again.found, again.expected) == ("s.json: agent.memory: too new", ("agent", "memory"), 3, 2)


# -- what is written ---------------------------------------------------------------------


def test_version_1_writes_nothing_later_versions_write_their_own() -> None:
    assert "__version__" not in str(v1_agent().state_dict())
    state = v3_expected().state_dict()
    assert list(state)[0] == "__version__" and state["__version__"] == 3
    assert state["memory"]["__version__"] == 2
    assert [note["__version__"] for note in state["memory"]["notes"]] == [2, 2]


def test_versioned_state_round_trips_strictly() -> None:
    agent, state = Agent(), v3_expected().state_dict()
    assert agent.load_state_dict(state) == statekit.LoadResult()
    assert agent == v3_expected()
    assert agent.state_dict() == state


def test_a_version_1_class_accepts_an_explicit_version_1() -> None:
    memory = MemoryV1()
    memory.load_state_dict({"__version__": 1, "notes": [{"__version__": 1, "text": "x"}]})
    assert memory == MemoryV1([NoteV1("x")])


# -- the rename story --------------------------------------------------------------------


def test_renamed_field_survives_a_lenient_load_and_the_next_save() -> None:
    old = AgentV1(name="Friday", turns=7).state_dict()
    agent = AgentV2()
    result = agent.load_state_dict(old, strict=False)
    assert agent.turn_count == 7
    assert result == statekit.LoadResult()
    assert agent.state_dict()["turn_count"] == 7


def test_lenient_load_still_reports_what_the_migrations_left_unknown() -> None:
    old = {**AgentV1().state_dict(), "colour": "red"}
    result = AgentV2().load_state_dict(old, strict=False)
    assert result.unexpected_keys == ["colour"]
    with pytest.raises(StateLoadError) as caught:
        AgentV2().load_state_dict(old)
    assert caught.value.paths == ["colour"]


# -- the four changes, a chain, outermost first --------------------------------------------


def test_version_1_data_loads_into_version_3() -> None:
    agent = Agent()
    agent.load_state_dict(v1_agent().state_dict())
    assert agent == v3_expected()


def test_version_2_data_loads_into_version_3() -> None:
    v2 = AgentV2()
    v2.load_state_dict(v1_agent().state_dict())
    state = v2.state_dict()
    assert state["__version__"] == 2 and "__version__" not in state["memory"]
    agent = Agent()
    agent.load_state_dict(state)
    assert agent == v3_expected()


def test_migrations_run_outermost_first_on_a_private_copy_handed_from_step_to_step() -> None:
    calls: list[tuple[str, object]] = []
    returned: list[dict[str, Any]] = []

    def inner(state: dict[str, Any]) -> dict[str, Any]:
        calls.append(("inner", copy.deepcopy(state)))
        return {"level": state["level"] + 1}

    def outer_1(state: dict[str, Any]) -> dict[str, Any]:
        calls.append(("outer_1", copy.deepcopy(state)))
        state["child"]["level"] = 10  # an outer migration may reshape nested state
        returned.append(state)
        return state

    def outer_2(state: dict[str, Any]) -> dict[str, Any]:
        calls.append(("outer_2", state is returned[0]))
        return state

    @stateful(version=2, migrations={1: inner})
    class Child(StateModule):
        level: int = state_field(default=0)

    @stateful(version=3, migrations={1: outer_1, 2: outer_2})
    class Parent(StateModule):
        child: Child = state_field(factory=Child)

    data = {"child": {"level": 1}}
    parent = Parent()
    parent.load_state_dict(data)
    assert calls == [("outer_1", {"child": {"level": 1}}), ("outer_2", True), ("inner", {"level": 10})]
    assert parent.child.level == 11
    assert data == {"child": {"level": 1}}


def test_callers_data_is_never_mutated() -> None:
    data = v1_agent().state_dict()
    before = copy.deepcopy(data)
    Agent().load_state_dict(data)
    statekit.state.load.build(Agent, data)
    assert data == before


def test_nested_modules_at_different_versions() -> None:
    state = {"__version__": 2, **AgentV2(turn_count=2, tool_group="").state_dict()}
    state["memory"] = Memory([Note("new")], "s").state_dict()
    agent = Agent()
    agent.load_state_dict(state)
    assert (agent.turn_count, agent.tool_groups) == (2, [])
    assert agent.memory == Memory([Note("new")], "s")


def test_records_in_a_list_migrate_item_by_item() -> None:
    memory = Memory()
    memory.load_state_dict({"notes": [{"text": "old"}, {"__version__": 2, "body": "new"}, {"text": "older"}]})
    assert memory.notes == [Note("old"), Note("new"), Note("older")]
    assert memory.summary == ""


def test_from_config_and_build_migrate_too(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("name: Jarvis\nturns: 2\nuser: Alan Turing\ntool_group: math\nmemory:\n  notes: []\n")
    agent = from_config(Agent, config)
    assert (agent.name, agent.turn_count, agent.last_name, agent.tool_groups) == ("Jarvis", 2, "Turing", ["math"])
    current = tmp_path / "current.yaml"
    current.write_text("__version__: 3\nname: Jarvis\ntool_groups: [math]\n")
    assert from_config(Agent, current).tool_groups == ["math"]
    assert from_config(Note, {"text": "a"}) == Note("a")
    current.write_text("__version__: 4\nname: Jarvis\n")
    with pytest.raises(StateVersionError, match=f"^{re.escape(str(current))}: <root>: the data is version 4"):
        from_config(Agent, current)


# -- refusals: nothing changes -------------------------------------------------------------


def test_data_newer_than_the_code_is_refused_naming_the_path_and_both_versions() -> None:
    agent = v3_expected()
    state = agent.state_dict()
    newer = copy.deepcopy(state)
    newer["memory"]["__version__"] = 5
    newer["name"] = "changed"
    with pytest.raises(StateVersionError) as caught:
        agent.load_state_dict(newer, strict=False)
    assert str(caught.value) == (
        "memory: the data is version 5 but Memory is version 2: it was saved by newer code; nothing was loaded"
    )
    assert (caught.value.path, caught.value.found, caught.value.expected) == (("memory",), 5, 2)
    assert agent.state_dict() == state


def test_a_newer_record_in_a_list_is_named_by_index() -> None:
    agent = v3_expected()
    state = agent.state_dict()
    newer = copy.deepcopy(state)
    newer["memory"]["notes"][1]["__version__"] = 3
    with pytest.raises(StateVersionError) as caught:
        agent.load_state_dict(newer)
    assert caught.value.path == ("memory", "notes", 1)
    assert "the data is version 3 but Note is version 2" in str(caught.value)
    assert agent.state_dict() == state


@pytest.mark.parametrize("bad", ["3", 2.0, True, None, 0])
def test_a_version_that_is_not_an_int_is_refused(bad: object) -> None:
    agent = Agent()
    with pytest.raises(StateVersionError, match=r"^<root>: __version__ should be an int >= 1, got "):
        agent.load_state_dict({**Agent().state_dict(), "__version__": bad})
    assert agent == Agent()


def test_a_failing_migration_leaves_the_object_untouched() -> None:
    agent = v3_expected()
    state = agent.state_dict()
    broken = {**AgentV1().state_dict(), "name": "changed"}
    del broken["turns"]
    with pytest.raises(StateVersionError) as caught:
        agent.load_state_dict(broken)
    assert str(caught.value) == (
        "<root>: cannot migrate the data of version 1 (it has no __version__) to Agent version 3: "
        "the migration from 1 to 2 (agent_1_to_2) raised KeyError: 'turns'; nothing was loaded"
    )
    assert isinstance(caught.value.__cause__, KeyError)
    assert (caught.value.found, caught.value.expected) == (1, 3)
    assert agent.state_dict() == state


def test_a_migration_returning_no_dict_is_refused() -> None:
    def listed(state: dict[str, Any]) -> Any:
        return [state]

    @stateful(version=3, migrations={1: keep, 2: listed})
    class Odd(StateModule):
        x: int = state_field(default=0)

    odd = Odd(x=5)
    with pytest.raises(StateVersionError, match=r"from 2 to 3 \(.*listed\) returned list, not a dict") as caught:
        odd.load_state_dict({"__version__": 2, "x": 1})
    assert (caught.value.found, caught.value.expected) == (2, 3)
    assert odd.x == 5


def test_a_version_error_in_one_module_of_a_session_loads_none(tmp_path: Path) -> None:
    session = statekit.JSONSession(tmp_path)
    session.save("s", agent=v1_agent(), other=v1_agent())
    document = orjson.loads((tmp_path / "s.json").read_bytes())
    document["other"]["__version__"] = 9
    (tmp_path / "s.json").write_bytes(orjson.dumps(document))
    first, second = Agent(), Agent()
    with pytest.raises(StateVersionError) as caught:
        session.load("s", agent=first, other=second)
    assert (caught.value.path, caught.value.source) == (("other",), str(tmp_path / "s.json"))
    assert str(caught.value).startswith(f"{tmp_path / 's.json'}: other: the data is version 9 but Agent is version 3")
    assert first == Agent() and second == Agent()
    session.close()


# -- the schema ----------------------------------------------------------------------------


def test_json_schema_describes_the_current_version() -> None:
    schema = json_schema(Agent)
    assert schema["properties"]["__version__"]["const"] == 3
    assert "__version__" in schema["required"] and "tool_groups" in schema["properties"]
    assert schema["$defs"]["Note"]["properties"]["__version__"]["const"] == 2
    jsonschema.validate(v3_expected().state_dict(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(v1_agent().state_dict(), schema)
    assert "__version__" not in json_schema(AgentV1)["properties"]


# -- every backend -------------------------------------------------------------------------


async def test_a_version_1_session_loads_into_version_3(backend: SessionFactory) -> None:
    async with backend() as session:
        await session.asave("chat", "ada", agent=v1_agent())
        agent = Agent()
        assert await session.aload("chat", "ada", agent=agent) == {"agent": statekit.LoadResult()}
        assert agent == v3_expected()
        await session.asave("chat", "ada", agent=agent)
        again = Agent()
        await session.aload("chat", "ada", agent=again)
    assert again == v3_expected()


async def test_a_chain_of_versions_through_a_session(backend: SessionFactory) -> None:
    async with backend() as session:
        await session.asave("chat", agent=v1_agent())
        v2 = AgentV2()
        await session.aload("chat", agent=v2, strict=False)
        assert (v2.turn_count, v2.first_name, v2.last_name) == (4, "Ada", "Lovelace")
        v2.turn_count += 1
        await session.asave("chat", agent=v2)
        v3 = Agent()
        await session.aload("chat", agent=v3)
    assert v3.turn_count == 5 and v3.tool_groups == ["search"] and v3.memory.notes[0] == Note("likes tea")


async def test_nested_states_at_different_versions_through_a_session(backend: SessionFactory) -> None:
    agent_v2 = {**AgentV2(turn_count=3, tool_group="math").state_dict()}
    agent_v2["memory"] = {
        "__version__": 2,
        "notes": [{"text": "old"}, {"__version__": 2, "body": "new"}, {"__version__": 1, "text": "oldest"}],
        "summary": "s",
    }
    async with backend() as session:
        await session.awrite_document("mixed", {"agent": agent_v2}, "ada")
        agent = Agent()
        await session.aload("mixed", "ada", agent=agent)
    assert (agent.turn_count, agent.tool_groups, agent.memory.summary) == (3, ["math"], "s")
    assert agent.memory.notes == [Note("old"), Note("new"), Note("oldest")]


@stateful
class NoTurns(StateModule):
    """Saved under the agent's name: version-1 data that the first migration cannot take."""

    name: str = state_field(default="x")


async def test_sessions_refuse_newer_data_and_failing_migrations(backend: SessionFactory) -> None:
    async with backend() as session:
        await session.asave("new", agent=v3_expected())
        await session.asave("broken", agent=NoTurns())
        old = v1_agent()
        with pytest.raises(StateVersionError, match="the data is version 3 but AgentV1 is version 1"):
            await session.aload("new", agent=old)
        assert old == v1_agent()
        current = v3_expected()
        with pytest.raises(StateVersionError, match=r"agent: .*\(agent_1_to_2\) raised KeyError: 'turns'"):
            await session.aload("broken", agent=current)
        assert current == v3_expected()


def test_convert_keeps_the_versions(tmp_path: Path) -> None:
    session = statekit.JSONSession(tmp_path)
    session.save("chat", agent=v3_expected())
    (tmp_path / "yaml").mkdir()
    assert main(["convert", str(tmp_path / "chat.json"), str(tmp_path / "yaml" / "chat.yaml")]) == 0
    agent = Agent()
    with statekit.YAMLSession(tmp_path / "yaml") as yaml_session:
        yaml_session.load("chat", agent=agent)
    assert agent == v3_expected()
    session.close()


_upgrades: list[dict[str, Any]] = []


def _n_to_count(data: dict[str, Any]) -> dict[str, Any]:
    _upgrades.append(dict(data))
    data["count"] = data.pop("n", 0)  # tolerant: a second run would silently reset the count
    return data


@stateful(version=2, migrations={1: _n_to_count})
class OwnLoadCounter(StateModule):
    """A versioned module with its own load_state_dict() (AgentScope style)."""

    count: int = state_field(default=0)

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> statekit.LoadResult:
        return super().load_state_dict(state_dict, strict)


@stateful
class HoldsOwnLoadCounter(StateModule):
    counter: OwnLoadCounter | None = state_field(default=None)


@pytest.mark.parametrize("stored", [{"__version__": 2, "count": 3}, {"n": 3}], ids=["current", "version 1"])
def test_a_versioned_module_with_its_own_load_is_upgraded_once_when_built(tmp_path: Path, stored: dict[str, Any]) -> None:
    _upgrades.clear()
    holder = HoldsOwnLoadCounter()  # counter is None: statekit builds one and loads it through its own method
    holder.load_state_dict({"counter": copy.deepcopy(stored)})
    assert holder.counter is not None and holder.counter.count == 3
    path = tmp_path / "counter.json"
    path.write_bytes(orjson.dumps(stored))
    assert from_config(OwnLoadCounter, path).count == 3
    assert len(_upgrades) == (0 if "__version__" in stored else 2)  # once per load that needed it


_DEFAULT_TOOLS: dict[str, Any] = {"tools": ["search"]}


def _adds_defaults(data: dict[str, Any]) -> dict[str, Any]:
    data["extra"] = _DEFAULT_TOOLS  # a module-level constant, not a copy
    return data


def _adds_non_json(data: dict[str, Any]) -> dict[str, Any]:
    data["extra"] = {"ratio": float("nan"), "pair": (1, 2)}
    return data


@stateful(version=2, migrations={1: _adds_defaults})
class GainsDefaults(StateModule):
    name: str = state_field(default="")
    extra: dict[str, Any] = state_field(factory=dict)


@stateful(version=2, migrations={1: _adds_non_json})
class GainsNonJSON(StateModule):
    name: str = state_field(default="")
    extra: dict[str, Any] = state_field(factory=dict)


@pytest.mark.parametrize("kind", [statekit.JSONSession, statekit.YAMLSession])
def test_a_module_migration_output_is_checked_and_copied_by_every_load(tmp_path: Path, kind: type[Any]) -> None:
    session = kind(tmp_path)
    session.write_document("s", {"m": {"name": "x"}})  # version 1: no __version__
    loaded = GainsDefaults()
    session.load("s", m=loaded)
    assert loaded.extra == _DEFAULT_TOOLS and loaded.extra is not _DEFAULT_TOOLS
    loaded.extra["tools"].append("shell")
    assert _DEFAULT_TOOLS == {"tools": ["search"]}
    target = GainsNonJSON()
    with pytest.raises(StateLoadError) as caught:
        session.load("s", m=target)
    assert sorted(p.dotted for p in caught.value.problems) == ["m.extra.pair", "m.extra.ratio"]
    assert target.extra == {}


def test_a_newer_version_of_a_class_with_its_own_load_is_a_version_error(tmp_path: Path) -> None:
    path = tmp_path / "counter.json"
    path.write_bytes(orjson.dumps({"__version__": 3, "count": 1}))
    with pytest.raises(StateVersionError, match="the data is version 3 but OwnLoadCounter is version 2"):
        from_config(OwnLoadCounter, path)
    holder = HoldsOwnLoadCounter(counter=OwnLoadCounter(count=7))
    with pytest.raises(StateVersionError) as caught:
        holder.load_state_dict({"counter": {"__version__": 3, "count": 1}})
    assert caught.value.path == ("counter",)
    assert holder.counter is not None and holder.counter.count == 7


@stateful
class Extras(StateModule):
    extra: Any = state_field(default=None)


def _hands_defaults_to_its_child(data: dict[str, Any]) -> dict[str, Any]:
    data["child"] = {"extra": _DEFAULT_TOOLS}  # a module-level constant, not a copy
    return data


def _hands_non_json_to_its_child(data: dict[str, Any]) -> dict[str, Any]:
    data["child"] = {"extra": {"ratio": float("nan"), "pair": (1, 2)}}
    return data


@stateful(version=2, migrations={1: _hands_defaults_to_its_child})
class MakesItsChildWithDefaults(StateModule):
    name: str = state_field(default="")

    def __attrs_post_init__(self) -> None:
        self.child = Extras()


@stateful(version=2, migrations={1: _hands_non_json_to_its_child})
class MakesItsChildWithNonJSON(StateModule):
    name: str = state_field(default="")

    def __attrs_post_init__(self) -> None:
        self.child = Extras()


@stateful
class BuildsDefaults(StateModule):
    inner: MakesItsChildWithDefaults | None = state_field(default=None)


@stateful
class BuildsNonJSON(StateModule):
    inner: MakesItsChildWithNonJSON | None = state_field(default=None)


@pytest.mark.parametrize("kind", [statekit.JSONSession, statekit.YAMLSession])
def test_a_built_module_migration_output_is_checked_and_copied_by_every_load(tmp_path: Path, kind: type[Any]) -> None:
    session = kind(tmp_path)
    session.write_document("s", {"m": {"inner": {"name": "x"}}})  # inner is version 1, and None in the holder
    loaded = BuildsDefaults()
    session.load("s", m=loaded)
    assert loaded.inner is not None and loaded.inner.child.extra == _DEFAULT_TOOLS
    assert loaded.inner.child.extra is not _DEFAULT_TOOLS
    target = BuildsNonJSON()
    with pytest.raises(StateLoadError) as caught:
        session.load("s", m=target)
    assert sorted(p.dotted for p in caught.value.problems) == ["m.inner.child.extra.pair", "m.inner.child.extra.ratio"]
    assert target.inner is None


def test_a_failing_migration_of_data_that_says_version_1_does_not_call_it_unversioned() -> None:
    broken = {"__version__": 1, **NoTurns().state_dict()}
    with pytest.raises(StateVersionError) as caught:
        Agent().load_state_dict(broken)
    assert str(caught.value) == (
        "<root>: cannot migrate the data of version 1 to Agent version 3: "
        "the migration from 1 to 2 (agent_1_to_2) raised KeyError: 'turns'; nothing was loaded"
    )


# -- issue 23: a strict load of data that an older class saved hints at a migration --------


@stateful
class Tally(StateModule):
    name: str = state_field(default="")
    turns: int = state_field(default=0)


@stateful
class TallyRenamed(StateModule):  # Tally with turns renamed, and no migration
    name: str = state_field(default="")
    turn_count: int = state_field(default=0)


@stateful
class TallyRetyped(StateModule):  # Tally with turns now a list, and no migration
    name: str = state_field(default="")
    turns: list[int] = state_field(factory=list)


HINT = "give it a version and a migration that brings old data up: @stateful(version=..., migrations=...) (docs/versions.md)"


def test_a_renamed_or_retyped_field_hints_at_a_migration(backend: SessionFactory) -> None:
    with backend() as session:
        session.save("chat", tally=Tally("a", 3))
        with pytest.raises(StateLoadError) as renamed:
            session.load("chat", tally=TallyRenamed())
        with pytest.raises(StateLoadError) as retyped:
            session.load("chat", tally=TallyRetyped())
    assert renamed.value.hint == (
        f"if the class changed since this data was saved (a field renamed: tally.turns -> tally.turn_count?), {HINT}"
    )
    assert str(renamed.value).endswith(f"\nhint: {renamed.value.hint}")
    assert retyped.value.hint == f"if the class changed since this data was saved (a field's type changed), {HINT}"
    with pytest.raises(StateLoadError) as direct:
        TallyRenamed().load_state_dict({"name": "a", "turns": 3})
    assert direct.value.hint is not None and "turns -> turn_count?" in direct.value.hint
    assert pickle.loads(pickle.dumps(direct.value)).hint == direct.value.hint


def test_no_migration_hint_for_a_lenient_load_a_config_or_an_unrelated_problem(tmp_path: Path) -> None:
    assert TallyRenamed().load_state_dict({"name": "a", "turns": 3}, strict=False).unexpected_keys == ["turns"]
    (tmp_path / "tally.yaml").write_text("name: a\nturns: 3\n", encoding="utf-8")
    with pytest.raises(StateLoadError) as config:  # written by hand: a typo, not an older class
        from_config(TallyRenamed, tmp_path / "tally.yaml")
    with pytest.raises(StateLoadError) as missing:
        TallyRenamed().load_state_dict({"name": "a"})
    assert (config.value.hint, missing.value.hint) == (None, None)
    assert "hint:" not in str(config.value)
