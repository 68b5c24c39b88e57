"""The state model: declaring, dumping and loading state (issue 2)."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import enum
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from statekit import JSONSession, LoadResult, StateModule, StatekitError, StateLoadError, from_config, state_field, stateful
from statekit.errors import StateDefinitionError, StateDumpError

from agent_models import ClassA, ClassB, Counted


@stateful
class Msg:
    role: str
    content: str | list[dict[str, Any]]
    name: str | None = None


@stateful
class Memory(StateModule):
    content: list[Msg] = state_field(factory=list)


@stateful
class Toolkit(StateModule):
    active_groups: list[str] = state_field(factory=list)


@stateful
class Agent(StateModule):
    name: str = state_field()
    sys_prompt: str = state_field(default="You're a helpful assistant.")
    memory: Memory = state_field(factory=Memory)
    toolkit: Toolkit = state_field(factory=Toolkit)
    turns: int = state_field(default=0)
    client: object = attrs.field(default=None)


def chatted_agent() -> Agent:
    agent = Agent(name="Friday")
    agent.memory.content.append(Msg("user", "Hello, agent!", "user"))
    agent.memory.content.append(
        Msg("assistant", [{"type": "tool_use", "id": "1", "input": {"q": ["a", "b"]}}], "Friday")
    )
    agent.toolkit.active_groups.append("web")
    agent.turns = 1
    return agent


# --- the reference's example, verbatim but for the import -------------------


def test_reference_nested_example() -> None:
    obj_b = ClassB()
    assert obj_b.a.state_dict() == {"cnt": 123}
    assert json.dumps(obj_b.state_dict(), indent=4) == json.dumps({"a": {"cnt": 123}, "c": "Hello, world!"}, indent=4)


def test_reference_imperative_load_round_trip() -> None:
    obj_b = ClassB()
    saved = obj_b.state_dict()
    obj_b.a.cnt = 0
    obj_b.c = "changed"
    obj_b.load_state_dict(saved)
    assert (obj_b.a.cnt, obj_b.c) == (123, "Hello, world!")


def test_reassigned_module_becomes_the_state() -> None:
    obj_b = ClassB()
    replacement = ClassA()
    replacement.cnt = 7
    obj_b.a = replacement
    assert obj_b.state_dict()["a"] == {"cnt": 7}
    obj_b.load_state_dict({"a": {"cnt": 9}, "c": "x"})
    assert replacement.cnt == 9


def test_register_state_with_codec() -> None:
    class Clock(StateModule):
        def __init__(self) -> None:
            self.at = dt.datetime(2025, 1, 2, 3, 4, 5)
            self.register_state("at", dt.datetime.isoformat, dt.datetime.fromisoformat)

    clock = Clock()
    assert clock.state_dict() == {"at": "2025-01-02T03:04:05"}
    clock.load_state_dict({"at": "2026-11-21T00:00:00"})
    assert clock.at == dt.datetime(2026, 11, 21)


@stateful
class HoldsCounted(StateModule):
    counted: Counted | None = state_field(default=None)


def test_a_new_module_takes_the_state_it_registers_when_built() -> None:
    state = {"name": "b", "counter": 7, "scratch": {"content": [], "summary": "s"}}
    built = from_config(Counted, state)
    assert (built.counter, built.scratch.summary) == (7, "s")
    holder = HoldsCounted()
    holder.load_state_dict({"counted": state})
    assert holder.counted is not None and holder.counted.state_dict() == state


def test_a_new_module_refuses_unknown_keys_beside_what_it_registers() -> None:
    holder = HoldsCounted()
    with pytest.raises(StateLoadError) as caught:
        holder.load_state_dict({"counted": {"name": "b", "counter": 7, "scratch": {"content": [], "summary": ""}, "countr": 1}})
    assert [(p.path, p.message) for p in caught.value.problems] == [(("counted", "countr"), "unknown key; did you mean 'counter'?")]
    assert holder.counted is None
    with pytest.raises(StateLoadError, match=r"counted\.counter: required key is missing"):
        holder.load_state_dict({"counted": {"name": "b", "scratch": {"content": [], "summary": ""}}})
    assert from_config(Counted, {"name": "c"}).counter == 0  # a config takes what the class sets


def test_register_unknown_attribute_is_an_error() -> None:
    with pytest.raises(StatekitError, match="no attribute 'nope'"):
        ClassA().register_state("nope")


# --- state_dict --------------------------------------------------------------


def test_state_dict_keys_in_declaration_order_and_plain_json() -> None:
    state = chatted_agent().state_dict()
    assert list(state) == ["name", "sys_prompt", "memory", "toolkit", "turns"]
    assert state["memory"]["content"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "1", "input": {"q": ["a", "b"]}}],
        "name": "Friday",
    }
    assert json.loads(json.dumps(state)) == state


def test_plain_attrs_fields_are_not_state() -> None:
    agent = Agent(name="x", client=object())
    assert "client" not in agent.state_dict()


def test_plain_attrs_field_holding_a_module_is_state() -> None:
    @stateful
    class Holder(StateModule):
        inner: Memory = attrs.field(factory=Memory)

    assert Holder().state_dict() == {"inner": {"content": []}}


def test_state_dict_is_a_snapshot() -> None:
    agent = chatted_agent()
    initial = agent.state_dict()
    frozen = copy.deepcopy(initial)
    agent.memory.content.append(Msg("user", "more"))
    agent.memory.content[1].content[0]["input"]["q"].append("c")  # type: ignore[index, union-attr]
    agent.toolkit.active_groups.append("files")
    assert initial == frozen


def test_save_initial_run_load_back() -> None:
    agent = Agent(name="Friday")
    initial = agent.state_dict()
    agent.memory.content.append(Msg("user", "hi"))
    agent.toolkit.active_groups.append("web")
    agent.load_state_dict(initial)
    assert agent.state_dict() == initial
    assert agent.memory.content == [] and agent.toolkit.active_groups == []


def test_non_json_value_in_any_field_is_a_dump_error_with_path() -> None:
    agent = Agent(name="x")
    agent.memory.content.append(Msg("user", [{"when": dt.date(2025, 1, 1)}]))
    with pytest.raises(StateDumpError, match=r"memory\.content.*when"):
        agent.state_dict()


# --- load_state_dict: strict -------------------------------------------------


def test_strict_reports_every_problem_at_every_depth() -> None:
    state = chatted_agent().state_dict()
    del state["sys_prompt"]
    state["extra"] = 1
    state["memory"]["content"][0]["role"] = None
    state["memory"]["content"][1]["bogus"] = True
    del state["toolkit"]["active_groups"]
    state["toolkit"]["colour"] = "red"
    with pytest.raises(StateLoadError) as info:
        Agent(name="y").load_state_dict(state)
    assert sorted(info.value.paths) == sorted(
        [
            "sys_prompt",
            "extra",
            "memory.content[0].role",
            "memory.content[1].bogus",
            "toolkit.active_groups",
            "toolkit.colour",
        ]
    )


@pytest.mark.parametrize(
    ("path", "bad", "message"),
    [
        (("name",), None, "expected a string, got null"),
        (("toolkit", "active_groups"), "web", "expected list[str], got a string"),
        (("turns",), True, "expected an integer, got a boolean"),
        (("turns",), 1.5, "expected an integer, got a number"),
        (("memory", "content", 0, "content"), 3, "got an integer"),
        (("memory", "content"), {"0": {}}, "expected a list"),
    ],
)
def test_wrong_shapes_are_named_in_both_modes(path: tuple[Any, ...], bad: Any, message: str) -> None:
    for strict in (True, False):
        state = chatted_agent().state_dict()
        target = state
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = bad
        agent = chatted_agent()
        before = agent.state_dict()
        with pytest.raises(StateLoadError, match=re.escape(message)) as info:
            agent.load_state_dict(state, strict=strict)
        dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        assert dotted in info.value.paths
        assert agent.state_dict() == before


def test_missing_required_record_field_is_an_error_in_both_modes() -> None:
    state = chatted_agent().state_dict()
    del state["memory"]["content"][0]["role"]
    for strict in (True, False):
        with pytest.raises(StateLoadError) as info:
            Agent(name="z").load_state_dict(state, strict=strict)
        assert info.value.paths == ["memory.content[0].role"]


def test_failed_load_changes_nothing() -> None:
    agent = chatted_agent()
    before = agent.state_dict()
    memory, content = agent.memory, agent.memory.content
    state = Agent(name="other").state_dict()
    state["turns"] = "many"  # the last key: everything before it would load
    with pytest.raises(StateLoadError):
        agent.load_state_dict(state)
    assert agent.state_dict() == before
    assert agent.memory is memory and agent.memory.content is content


def test_from_json_exception_becomes_load_error_with_path() -> None:
    def parse(data: Any) -> int:
        raise RuntimeError("boom")

    @stateful
    class Counter(StateModule):
        n: int = state_field(default=0, from_json=parse)

    with pytest.raises(StateLoadError, match=r"n: from_json raised RuntimeError: boom"):
        Counter().load_state_dict({"n": 1})


# --- load_state_dict: non-strict ----------------------------------------------


def test_non_strict_keeps_missing_and_reports_both() -> None:
    agent = chatted_agent()
    result = agent.load_state_dict(
        {"name": "New", "memory": {"content": [{"role": "user", "content": "x", "extra": 1}]}, "q": 1},
        strict=False,
    )
    assert result == LoadResult(
        missing_keys=["sys_prompt", "toolkit", "turns"],
        unexpected_keys=["memory.content[0].extra", "q"],
    )
    assert agent.name == "New" and agent.turns == 1 and agent.toolkit.active_groups == ["web"]
    assert agent.memory.content == [Msg("user", "x")]


def test_strict_load_result_is_empty() -> None:
    agent = chatted_agent()
    assert agent.load_state_dict(agent.state_dict()) == LoadResult([], [])


# --- identity and aliasing -----------------------------------------------------


def test_nested_modules_load_in_place_and_keep_non_state() -> None:
    agent = chatted_agent()
    client = object()
    agent.client = client
    memory = agent.memory
    agent.load_state_dict(Agent(name="fresh").state_dict())
    assert agent.memory is memory and agent.client is client and agent.memory.content == []


def test_loaded_values_share_nothing_with_the_input() -> None:
    state = chatted_agent().state_dict()
    agent = Agent(name="a")
    agent.load_state_dict(state)
    saved = copy.deepcopy(state)
    agent.memory.content[1].content[0]["input"]["q"].append("z")  # type: ignore[index, union-attr]
    agent.toolkit.active_groups.clear()
    assert state == saved


# --- value types ---------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int


@stateful
class Kitchen(StateModule):
    colour: Colour = state_field(default=Colour.RED)
    at: dt.datetime = state_field(default=dt.datetime(2025, 1, 1, 12, 30, tzinfo=dt.timezone.utc))
    day: dt.date = state_field(default=dt.date(2025, 1, 1))
    ident: uuid.UUID = state_field(default=uuid.UUID(int=5))
    where: Path = state_field(default=Path("/tmp/x"))
    pair: tuple[int, str] = state_field(default=(1, "a"))
    many: tuple[int, ...] = state_field(default=(1, 2))
    tags: frozenset[str] = state_field(default=frozenset({"b", "a"}))
    seen: set[int] = state_field(factory=lambda: {3, 1, 2})
    scores: dict[str, float] = state_field(factory=lambda: {"a": 1.5})
    point: Point = state_field(factory=lambda: Point(1, 2))
    maybe: int | None = state_field(default=None)
    blob: Any = state_field(factory=lambda: {"k": [1, None, True]})


@stateful
class Nothing(StateModule):
    none: tuple[()] = state_field(default=())


def test_the_empty_tuple_type_holds_an_empty_list_only() -> None:
    """``tuple[()]`` has no type arguments, as a bare ``tuple`` has none: it is not ``tuple[Any, ...]``."""
    module = Nothing()
    assert module.state_dict() == {"none": []}
    module.load_state_dict({"none": []})
    assert module.none == ()
    with pytest.raises(StateLoadError, match="none: expected a list of 0 items, got 1"):
        module.load_state_dict({"none": [1]})


def test_value_types_round_trip_as_plain_json() -> None:
    kitchen = Kitchen()
    state = kitchen.state_dict()
    assert state == {
        "colour": "red",
        "at": "2025-01-01T12:30:00+00:00",
        "day": "2025-01-01",
        "ident": "00000000-0000-0000-0000-000000000005",
        "where": "/tmp/x",
        "pair": [1, "a"],
        "many": [1, 2],
        "tags": ["a", "b"],
        "seen": [1, 2, 3],
        "scores": {"a": 1.5},
        "point": {"x": 1, "y": 2},
        "maybe": None,
        "blob": {"k": [1, None, True]},
    }
    other = Kitchen(colour=Colour.BLUE, seen=set(), point=Point(0, 0), maybe=4)
    other.load_state_dict(json.loads(json.dumps(state)))
    assert other == kitchen


def test_bad_enum_and_date_are_named() -> None:
    state = Kitchen().state_dict()
    state["colour"] = "green"
    state["at"] = "yesterday"
    with pytest.raises(StateLoadError) as info:
        Kitchen().load_state_dict(state)
    assert info.value.paths == ["colour", "at"]
    assert "'red', 'blue'" in str(info.value)


class Priority(enum.Enum):
    LOW = 1
    HIGH = 2


@stateful
class Task(StateModule):
    priority: Priority = state_field(default=Priority.HIGH)


class Ratio(enum.Enum):
    HALF = 0.5
    ONE = 1.0


@stateful
class Scaled(StateModule):
    ratio: Ratio = state_field(default=Ratio.HALF)


def test_an_enum_of_floats_takes_an_int_as_a_float_field_does() -> None:
    scaled = Scaled()
    scaled.load_state_dict({"ratio": 1})
    assert scaled.state_dict() == {"ratio": 1.0}
    with pytest.raises(StateLoadError, match="expected one of 0.5, 1.0, got True"):
        scaled.load_state_dict({"ratio": True})


@pytest.mark.parametrize("stored", [True, 1.0, "1"])
def test_an_enum_member_is_matched_by_its_value_and_its_type(stored: object) -> None:
    """Python's ``Priority(True)`` and ``Priority(1.0)`` return ``LOW``: a load must not."""
    task = Task()
    with pytest.raises(StateLoadError, match=f"priority: expected one of 1, 2, got {stored!r}"):
        task.load_state_dict({"priority": stored})
    assert task.priority is Priority.HIGH
    task.load_state_dict({"priority": 1})
    assert task.state_dict() == {"priority": 1}


def test_unsupported_type_fails_at_definition_naming_the_field() -> None:
    class Opaque:
        pass

    with pytest.raises(StateDefinitionError, match=r"Broken\.thing"):

        @stateful
        class Broken(StateModule):
            thing: Opaque = state_field(factory=Opaque)


UNSTRUCTURABLE = Literal["a", 1] | dt.datetime  # no way to tell a string of one from the other


@pytest.mark.parametrize(
    "tp", [list[UNSTRUCTURABLE] | None, dict[str, list[UNSTRUCTURABLE]] | int, tuple[int, UNSTRUCTURABLE | None] | None]
)
def test_an_unsupported_type_under_a_union_fails_at_definition(tp: Any) -> None:
    namespace = {"__annotations__": {"thing": tp}, "thing": state_field(default=None)}
    with pytest.raises(StateDefinitionError, match=r"Nested\.thing: statekit cannot save or load values of type"):
        stateful(type("Nested", (StateModule,), namespace))  # cattrs would make the member's hook at the first load


class Undecorated:
    """A record that forgot ``@stateful``."""

    def __init__(self, role: str) -> None:
        self.role = role


@pytest.mark.parametrize("tp", [list[Undecorated], dict[str, Undecorated], Undecorated | None])
def test_a_record_without_stateful_is_told_to_add_it_first_and_the_codec_advice_once(tp: Any) -> None:
    namespace = {"__annotations__": {"content": tp}, "content": state_field(default=None)}
    with pytest.raises(StateDefinitionError) as refused:
        stateful(type("Memory", (StateModule,), namespace))
    message = str(refused.value)
    assert message.startswith("Memory.content: statekit cannot save or load values of type ")
    assert message.endswith(
        "; if Undecorated holds data, decorate it with @stateful (a value record: every field is data); "
        "else give the field to_json= and from_json=, or register cattrs hooks on a converter passed as @stateful(converter=...)"
    )
    assert message.count("to_json") == 1


def test_unsupported_type_with_codec_is_fine() -> None:
    class Opaque:
        def __init__(self, v: int = 0) -> None:
            self.v = v

    @stateful
    class Fine(StateModule):
        thing: Opaque = state_field(factory=Opaque, to_json=lambda o: o.v, from_json=Opaque)

    fine = Fine()
    fine.load_state_dict({"thing": 5})
    assert fine.thing.v == 5 and fine.state_dict() == {"thing": 5}


def test_to_json_result_is_copied() -> None:
    shared = ["a"]

    @stateful
    class Leaky(StateModule):
        items: list[str] = state_field(factory=list, to_json=lambda _: shared)

    state = Leaky().state_dict()
    state["items"].append("b")
    assert shared == ["a"]


def test_forward_references_resolve_on_first_use() -> None:
    agent = Later()
    assert agent.state_dict() == {"part": {"n": 1}}


@stateful
class Later(StateModule):
    part: LaterPart = state_field(factory=lambda: LaterPart())


@stateful
class LaterPart:
    n: int = 1


def test_user_converter_is_used() -> None:
    from statekit import make_converter

    class Money:
        def __init__(self, cents: int) -> None:
            self.cents = cents

    conv = make_converter()
    conv.register_unstructure_hook(Money, lambda m: m.cents)
    conv.register_structure_hook(Money, lambda v, _: Money(v))

    @stateful(converter=conv)
    class Wallet(StateModule):
        balance: Money = state_field(factory=lambda: Money(5))

    wallet = Wallet()
    assert wallet.state_dict() == {"balance": 5}
    wallet.load_state_dict({"balance": 7})
    assert wallet.balance.cents == 7


def test_frozen_module_is_refused() -> None:
    with pytest.raises(StatekitError, match="cannot be frozen"):

        @stateful(frozen=True)
        class Ice(StateModule):
            x: int = state_field(default=0)


def test_optional_module_field_is_built_from_state() -> None:
    @stateful
    class Holder(StateModule):
        memory: Memory | None = state_field(default=None)

    holder = Holder()
    assert holder.state_dict() == {"memory": None}
    holder.load_state_dict({"memory": {"content": [{"role": "user", "content": "x", "name": None}]}})
    assert holder.memory == Memory([Msg("user", "x")])
    holder.load_state_dict({"memory": None})
    assert holder.memory is None


def test_validators_run_on_load_and_refusal_changes_nothing() -> None:
    @stateful
    class Positive(StateModule):
        n: int = state_field(default=1, validator=attrs.validators.gt(0))
        label: str = state_field(default="a")

    p = Positive()
    with pytest.raises(StateLoadError, match="n: "):
        p.load_state_dict({"n": -1, "label": "b"})
    assert (p.n, p.label) == (1, "a")


@stateful
class Turn:
    role: str = attrs.field(validator=attrs.validators.in_(["user", "assistant"]))


@stateful
class Turns(StateModule):
    mode: str = state_field(default="a", validator=attrs.validators.in_(["a", "b"]))
    content: list[Turn] = state_field(factory=list)


ROLE_REFUSED = "'role' must be in ['user', 'assistant'] (got 'bogus')"


def test_attrs_validators_are_reported_at_the_field_they_name_with_their_own_message(tmp_path: Path) -> None:
    turns = Turns(content=[Turn("user")])
    with pytest.raises(StateLoadError) as in_record:
        turns.load_state_dict({"mode": "a", "content": [{"role": "user"}, {"role": "bogus"}]})
    assert [(p.path, p.message) for p in in_record.value.problems] == [(("content", 1, "role"), ROLE_REFUSED)]
    assert "Attribute(" not in str(in_record.value)  # not the repr of the error's arguments
    with pytest.raises(StateLoadError) as in_module:
        turns.load_state_dict({"mode": "z", "content": []})
    assert [p.path for p in in_module.value.problems] == [("mode",)]  # named once, not mode.mode
    with pytest.raises(StateLoadError) as built:
        from_config(Turns, {"mode": "z"})
    assert [p.path for p in built.value.problems] == [("mode",)]
    assert turns == Turns(content=[Turn("user")])
    JSONSession(tmp_path).save("s", turns=turns)
    saved = tmp_path / "s.json"
    saved.write_bytes(saved.read_bytes().replace(b'"user"', b'"bogus"'))
    with pytest.raises(StateLoadError) as loaded:
        JSONSession(tmp_path).load("s", turns=turns)
    (problem,) = loaded.value.problems
    assert (problem.path, problem.message) == (("turns", "content", 0, "role"), ROLE_REFUSED)
    assert problem.line is not None and problem.column is not None
    line = saved.read_text().splitlines()[problem.line - 1]
    assert line[problem.column - 1 :] == '"role": "bogus"'  # at the field, as every problem of a key is


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


def test_recursive_records_round_trip_at_any_depth() -> None:
    @stateful
    class Tree(StateModule):
        root: Node = state_field(factory=lambda: Node("a", [Node("b", [Node("c", [Node("d")])])]))

    state = Tree().state_dict()
    assert state["root"]["children"][0]["children"][0]["children"][0] == {"name": "d", "children": []}
    tree = Tree(root=Node("x"))
    tree.load_state_dict(state)
    assert tree.root == Tree().root
    state["root"]["children"][0]["children"][0]["name"] = 5
    with pytest.raises(StateLoadError) as info:
        tree.load_state_dict(state)
    assert info.value.paths == ["root.children[0].children[0].name"]


class Mode(enum.Enum):
    FAST = "fast"


def test_literal_fields_check_type_and_value() -> None:
    @stateful
    class Switch(StateModule):
        mode: Literal["a", "b", 1] = state_field(default="a")
        speed: Literal[Mode.FAST] = state_field(default=Mode.FAST)

    switch = Switch()
    assert switch.state_dict() == {"mode": "a", "speed": "fast"}
    switch.load_state_dict({"mode": 1, "speed": "fast"})
    assert switch.mode == 1 and switch.speed is Mode.FAST
    with pytest.raises(StateLoadError) as info:
        switch.load_state_dict({"mode": True, "speed": "slow"})
    assert info.value.paths == ["mode", "speed"]
    assert "expected one of 'a', 'b', 1, got True" in str(info.value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_floats_are_refused_both_ways(bad: float) -> None:
    @stateful
    class Gauge(StateModule):
        level: float = state_field(default=0.0)
        extra: dict[str, Any] = state_field(factory=dict)

    with pytest.raises(StateDumpError, match="level: expected a number"):
        Gauge(level=bad).state_dict()
    with pytest.raises(StateDumpError, match=r"extra\.x: .*not a finite number"):
        Gauge(extra={"x": bad}).state_dict()
    gauge = Gauge()
    with pytest.raises(StateLoadError) as info:
        gauge.load_state_dict({"level": bad, "extra": {"y": [1.0, bad]}})
    assert info.value.paths == ["level", "extra.y[1]"]
    assert gauge.level == 0.0


# --- error wording in one voice (issue 9, item 13) ---------------------------------


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ({"toolkit": {"active_group": []}}, "toolkit.active_group: unknown key; did you mean 'active_groups'?"),
        ({"memory": {"content": [{"rol": "user", "content": "x"}]}}, "memory.content[0].rol: unknown key; did you mean 'role'?"),
        ({"turns": "3"}, "turns: expected an integer, got a string"),
        ({"name": 3}, "name: expected a string, got an integer"),
        ({"memory": {"content": [{"role": "u", "content": "x", "name": 1}]}}, "memory.content[0].name: expected a string or null, got an integer"),
        ({"memory": 3}, "memory: expected an object of state, got an integer"),
        ({"toolkit": {"active_groups": [{}]}}, "toolkit.active_groups[0]: expected a string, got an object"),
    ],
)
def test_messages_speak_in_one_voice(state: dict[str, Any], problem: str) -> None:
    agent = chatted_agent()
    before = agent.state_dict()
    merged = {**before, **state}
    with pytest.raises(StateLoadError) as caught:
        agent.load_state_dict(merged)
    assert problem in [str(p) for p in caught.value.problems]
    assert not re.search(r"got (str|int|float|bool|dict|list|NoneType)\b|\ba object\b", str(caught.value))
    assert agent.state_dict() == before


def test_an_unknown_key_far_from_any_known_one_gets_no_guess() -> None:
    with pytest.raises(StateLoadError) as caught:
        Toolkit().load_state_dict({"active_groups": [], "zzz": 1})
    assert [str(p) for p in caught.value.problems] == ["zzz: unknown key"]


class Mood(str, enum.Enum):
    CALM = "calm"


@stateful
class Said:
    role: str
    turn: int
    final: bool


@dataclasses.dataclass
class Noted:
    text: str


@stateful
class Talk(StateModule):
    title: str = state_field(default="")
    count: int = state_field(default=0)
    said: list[Said] = state_field(factory=list)
    noted: list[Noted] = state_field(factory=list)


@pytest.mark.parametrize(
    ("make", "path", "message"),
    [
        (lambda: Talk(title=5), ("title",), "expected a string, got an integer"),  # type: ignore[arg-type]
        (lambda: Talk(count=True), ("count",), "expected an integer, got a boolean"),
        (lambda: Talk(title=Mood.CALM), ("title",), "expected a string, got a Mood"),
        (lambda: Talk(said=[Said("user", 1, False), Said("user", "2", False)]), ("said", 1, "turn"), "expected an integer, got a string"),  # type: ignore[arg-type]
        (lambda: Talk(said=[Said("user", 1, 0)]), ("said", 0, "final"), "expected a boolean, got an integer"),  # type: ignore[arg-type]
        (lambda: Talk(noted=[Noted(None)]), ("noted", 0, "text"), "expected a string, got null"),  # type: ignore[arg-type]
    ],
)
def test_a_dump_refuses_a_scalar_of_the_wrong_type_that_a_load_would_refuse(
    tmp_path: Path, make: Any, path: tuple[Any, ...], message: str
) -> None:
    from statekit import JSONSession

    with pytest.raises(StateDumpError) as caught:
        make().state_dict()
    assert [(p.path, p.message) for p in caught.value.problems] == [(path, message)]
    session = JSONSession(tmp_path)
    session.save("s", talk=Talk(title="kept"))
    before = (tmp_path / "s.json").read_bytes()
    with pytest.raises(StateDumpError) as caught:
        session.save("s", talk=make())
    assert [(p.path, p.message) for p in caught.value.problems] == [(("talk", *path), message)]
    assert (tmp_path / "s.json").read_bytes() == before


def test_an_integer_too_large_for_a_float_field_is_named() -> None:
    @stateful
    class Scores(StateModule):
        best: float = state_field(default=0.0)
        all: list[float] = state_field(factory=list)
        last: float | None = state_field(default=None)

    scores = Scores()
    with pytest.raises(StateLoadError) as caught:
        scores.load_state_dict({"best": 10**400, "all": [1, -(10**309)], "last": 10**400})
    too_large = "expected a number, got an integer too large for a float (beyond 1.8e308)"
    assert [(p.path, p.message) for p in caught.value.problems] == [
        (("best",), too_large), (("all", 1), too_large), (("last",), too_large)
    ]
    scores.load_state_dict({"best": 2**1023, "all": [10**308], "last": None})
    assert (scores.best, scores.all) == (float(2**1023), [1e308])
    bound = 2**1024 - 2**970  # the first integer float() overflows on; the one before rounds down
    scores.load_state_dict({"best": bound - 1, "all": [-(bound - 1)], "last": None})
    assert (scores.best, scores.all) == (sys.float_info.max, [-sys.float_info.max])
    with pytest.raises(StateLoadError, match="too large for a float"):
        scores.load_state_dict({"best": bound, "all": [], "last": None})


def test_a_session_load_takes_the_integers_load_state_dict_takes_in_a_float_field(tmp_path: Path) -> None:
    @stateful
    class Score(StateModule):
        best: float = state_field(default=0.0)

    bound = 2**1024 - 2**970
    (tmp_path / "ok.json").write_text(f'{{"score": {{"best": {bound - 1}}}}}')
    (tmp_path / "over.json").write_text(f'{{"score": {{"best": {bound}}}}}')
    typed, full = Score(), Score()
    JSONSession(tmp_path).load("ok", score=typed)
    full.load_state_dict({"best": bound - 1})
    assert typed.best == full.best == sys.float_info.max
    with pytest.raises(StatekitError, match="best"):
        JSONSession(tmp_path).load("over", score=Score())


# --- modules a load builds anew (a `Child | None` field holding None) ---------------------


def _non_negative(instance: object, attribute: object, value: int) -> None:
    if value < 0:
        raise ValueError("must be >= 0")


@stateful
class Registering(StateModule):
    k: int = state_field(default=0, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        self.cnt = 0
        self.register_state("cnt")


@stateful
class Note(StateModule):
    text: str = state_field(default="")


@stateful
class Holder(StateModule):
    turns: int = state_field(default=0)
    opt: Registering | None = state_field(default=None)
    notes: list[Point] = state_field(factory=list)
    later: Note | None = state_field(default=None)


@pytest.mark.parametrize(
    ("state", "problems"),
    [
        ({"turns": "x", "opt": {"k": 1, "cnt": 5}}, [("turns", "expected an integer, got a string")]),
        ({"turns": 1, "opt": {"k": -1, "cnt": 5}}, [("opt", "must be >= 0")]),
        ({"turns": "x", "opt": {"k": -1, "cnt": 5}}, [("turns", "expected an integer, got a string"), ("opt", "must be >= 0")]),
    ],
    ids=["other-problem", "its-own-validator", "both"],
)
def test_a_module_built_by_a_load_is_built_despite_other_problems(state: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    """Only its own problems stop it being built; the keys it registers are never called unknown."""
    with pytest.raises(StateLoadError) as caught:
        Holder().load_state_dict({**state, "notes": [], "later": None})
    assert [(p.dotted, p.message) for p in caught.value.problems] == problems


def test_a_lenient_load_lists_the_keys_it_ignores_in_a_module_it_builds() -> None:
    holder = Holder()
    result = holder.load_state_dict(
        {"turns": 1, "opt": None, "notes": [], "later": {"text": "t", "old": 1}}, strict=False
    )
    assert result.unexpected_keys == ["later.old"] and holder.later == Note("t")
    result = Holder().load_state_dict({"turns": 1, "opt": None, "notes": [{"x": 1, "y": 2, "z": 3}], "later": None}, strict=False)
    assert result.unexpected_keys == ["notes[0].z"]


@pytest.mark.parametrize("strict", [True, False])
def test_a_key_that_is_not_a_string_is_a_problem_with_its_path(strict: bool) -> None:
    """Python data only (JSON has no such keys): never a raw TypeError from sorting or suggesting."""
    holder = Holder()
    state: Any = {"turns": 1, "opt": None, "notes": [{"x": 1, "y": 2, 3: "z", "w": 0}], "later": None, 7: 1}
    if strict:
        with pytest.raises(StateLoadError) as caught:
            holder.load_state_dict(state)
        assert [(p.dotted, p.message) for p in caught.value.problems] == [
            ("notes[0].w", "unknown key"),
            ("notes[0]", "the key 3 is an integer; keys are strings"),
            ("<root>", "the key 7 is an integer; keys are strings"),
        ]
    else:
        with pytest.raises(StateLoadError, match="the key 7 is an integer; keys are strings"):
            holder.load_state_dict(state, strict=False)
    assert holder.turns == 0


def test_register_state_refuses_the_version_key() -> None:
    @stateful
    class Versioned(StateModule):
        def __attrs_post_init__(self) -> None:
            self.__dict__["__version__"] = "v3-beta"
            self.register_state("__version__")

    with pytest.raises(StateDefinitionError, match="'__version__' is reserved for the data's version"):
        Versioned()
