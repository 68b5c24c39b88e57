"""Property tests of the state layer (issue 2): round trips, snapshots, all or nothing.

The module trees come from :mod:`strategies` (classes in :mod:`agent_models`).
The tests under "Faults found" each pin a place where the core once departed
from the issue (all fixed in 1bf0a00); they stay as regression tests.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import datetime as dt
import enum
from pathlib import Path
from typing import Any

import attrs
import cattrs
import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agent_models import Agent, ClassB, Memory, Message, Plan, Role, Scratchpad, Team
from statekit import LoadResult, StateLoadError, StateModule, state_field, stateful
from statekit.errors import StateDefinitionError, StateDumpError, format_path
from strategies import (
    UNKNOWN_KEY,
    Corruption,
    agents,
    big_ints,
    corruptions,
    examples,
    is_plain_json,
    iter_modules,
    json_data,
    live_equal,
    mutable_containers,
    mutate_everything,
    state_modules,
    typed_nodes,
)

PROPERTY = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def ordered(data: Any) -> bytes:
    """Key-order-sensitive and sign-of-zero-sensitive form of JSON data."""
    return orjson.dumps(data)


def dotted(paths: set[tuple[str | int, ...]]) -> set[str]:
    return {format_path(p) for p in paths}


def shared(a: Any, b: Any) -> set[int]:
    return mutable_containers(a).keys() & mutable_containers(b).keys()


def module_identities(module: StateModule) -> list[tuple[str, int]]:
    return [(type(m).__name__, id(m)) for m in iter_modules(module)]


# ------------------------------------------------------------------ round trips


@PROPERTY
@given(state_modules)
def test_round_trip_at_every_depth(module: StateModule) -> None:
    for node in iter_modules(module):
        state = node.state_dict()
        assert is_plain_json(state)
        assert orjson.loads(orjson.dumps(state)) == state
        for source in (state, orjson.loads(orjson.dumps(state))):
            fresh = type(node)()
            result = fresh.load_state_dict(source)
            assert result == LoadResult([], [])
            assert ordered(fresh.state_dict()) == ordered(state)
            assert live_equal(fresh, node)


@settings(max_examples=examples(20), deadline=None)
@given(big=big_ints, blob=json_data)
def test_round_trip_keeps_integers_beyond_64_bits(big: int, blob: Any) -> None:
    agent = Agent(turns=big, extra={"big": big, "blob": blob, "list": [big]})
    fresh = Agent()
    fresh.load_state_dict(agent.state_dict())
    assert fresh.turns == big and fresh.extra == agent.extra


@PROPERTY
@given(state_modules)
def test_dump_keys_follow_declaration_order(module: StateModule) -> None:
    for node in iter_modules(module):
        keys = list(node.state_dict())
        cls = type(node)
        if attrs.has(cls):
            declared = [f.name for f in attrs.fields(cls) if f.name in keys]
            assert keys[: len(declared)] == declared


def test_dump_keys_of_the_agent() -> None:
    assert list(Agent().state_dict()) == [
        "name", "sys_prompt", "memory", "toolkit", "plan", "turns",
        "temperature", "started", "extra", "scratch",
    ]  # fmt: skip
    assert list(Team().state_dict()) == ["lead", "pad", "budget"]  # pad: a plain attrs.field holding a module


def test_reference_class_b_verbatim() -> None:
    obj_b = ClassB()
    assert obj_b.a.state_dict() == {"cnt": 123}
    assert obj_b.state_dict() == {"a": {"cnt": 123}, "c": "Hello, world!"}


# -------------------------------------------------------------------- snapshots


@PROPERTY
@given(state_modules)
def test_dump_shares_nothing_and_later_changes_do_not_reach_it(module: StateModule) -> None:
    state = module.state_dict()
    frozen = copy.deepcopy(state)
    assert not shared(state, module)
    tree = list(iter_modules(module))
    mutate_everything(module)
    for node in tree:  # reassign every nested module, keep the old ones mutated
        for key in list(frozen if node is module else {}):
            if isinstance(getattr(node, key), StateModule):
                setattr(node, key, type(getattr(node, key))())
    assert ordered(state) == ordered(frozen)


@PROPERTY
@given(state_modules)
def test_load_shares_nothing_and_later_changes_to_the_input_do_not_reach_it(module: StateModule) -> None:
    state = module.state_dict()
    for target in (type(module)(), module):  # a fresh tree, and a load in place
        target.load_state_dict(state)
        assert not shared(state, target)
        snapshot = target.state_dict()
        mutate_everything(state)
        assert ordered(target.state_dict()) == ordered(snapshot)
        state = copy.deepcopy(snapshot)


@PROPERTY
@given(agents, agents)
def test_nested_modules_load_in_place(target: Agent, source: Agent) -> None:
    client = object()
    target.model = client
    memory, toolkit, scratch, plan = target.memory, target.toolkit, target.scratch, target.plan
    target.load_state_dict(source.state_dict())
    assert target.model is client
    assert target.memory is memory and target.toolkit is toolkit and target.scratch is scratch
    if plan is not None and source.plan is not None:
        assert target.plan is plan
    assert ordered(target.state_dict()) == ordered(source.state_dict())


def test_reassigned_declared_module_is_the_state() -> None:
    agent = Agent()
    agent.memory = Memory(summary="new")
    assert agent.state_dict()["memory"]["summary"] == "new"
    pad = Scratchpad()
    agent.scratch = pad
    agent.load_state_dict(Agent().state_dict())
    assert agent.scratch is pad


def test_reference_snapshot_pattern_with_registered_list() -> None:
    pad = Scratchpad()
    initial = pad.state_dict()
    pad.notes.append("later")
    pad.memory.content.append(Message(Role.USER, [{"type": "text", "text": "hi"}]))
    assert initial["notes"] == [] and initial["memory"]["content"] == []
    pad.load_state_dict(initial)
    assert pad.notes == [] and pad.memory.content == []


# ---------------------------------------------------------------- all or nothing


def _check_failed_load(module: StateModule, corruption: Corruption, strict: bool) -> StateLoadError:
    before = ordered(module.state_dict())
    identities = module_identities(module)
    with pytest.raises(StateLoadError) as info:
        module.load_state_dict(corruption.state, strict=strict)
    assert ordered(module.state_dict()) == before
    assert module_identities(module) == identities
    return info.value


def _fresh_target(data: st.DataObject, **options: Any) -> tuple[StateModule, Corruption]:
    """A module with default values, and a damaged state of another of its class.

    Loading into a tree whose values differ from the state is what shows a
    half-done load; nested modules the target lacks (``plan=None``) are built
    by the load, and must be just as strict.
    """
    source = data.draw(state_modules)
    return type(source)(), data.draw(corruptions(source, **options))


@pytest.mark.parametrize(("fewest", "most"), [(1, 1), (2, 6)], ids=["one-problem", "every-problem-in-one-error"])
@PROPERTY
@given(data=st.data())
def test_strict_load_of_corruptions_changes_nothing_and_names_every_path(
    fewest: int, most: int, data: st.DataObject
) -> None:
    target, corruption = _fresh_target(data, min_count=fewest, max_count=most)
    error = _check_failed_load(target, corruption, strict=True)
    assert set(error.paths) == dotted(corruption.paths)


@PROPERTY
@given(st.data())
def test_same_tree_corruption_is_refused_in_place(data: st.DataObject) -> None:
    module = data.draw(state_modules)
    corruption = data.draw(corruptions(module, min_count=1, max_count=3))
    error = _check_failed_load(module, corruption, strict=True)
    assert set(error.paths) == dotted(corruption.paths)


@PROPERTY
@given(st.data())
def test_non_strict_load_reports_unknown_and_missing_keys(data: st.DataObject) -> None:
    module = data.draw(state_modules)
    corruption = data.draw(corruptions(module))
    ((kind, path),) = corruption.changes
    if kind in ("wrong", "missing-field"):  # a wrong value is a problem in both modes
        error = _check_failed_load(module, corruption, strict=False)
        assert error.paths == [format_path(path)]
        return
    before = ordered(module.state_dict())
    result = module.load_state_dict(corruption.state, strict=False)
    assert ordered(module.state_dict()) == before
    if kind == "unknown":
        assert result == LoadResult(missing_keys=[], unexpected_keys=[format_path(path)])
    else:
        assert result == LoadResult(missing_keys=[format_path(path)], unexpected_keys=[])


@PROPERTY
@given(st.data())
def test_non_strict_missing_keys_keep_the_current_values(data: st.DataObject) -> None:
    module = data.draw(state_modules)
    corruption = data.draw(corruptions(module, kinds=("missing",), max_count=3))
    target = type(module)()
    target_state = target.state_dict()
    module_paths = {n.path for n in typed_nodes(target) if n.module}
    kept = [p for k, p in corruption.changes if k == "missing"]
    assume(kept and all(p[:-1] in module_paths for p in kept))
    expected = copy.deepcopy(corruption.state)
    for path in kept:
        parent: Any = expected
        current: Any = target_state
        for segment in path[:-1]:
            parent, current = parent[segment], current[segment]
        parent[path[-1]] = current[path[-1]]
    result = target.load_state_dict(corruption.state, strict=False)
    assert sorted(result.missing_keys) == sorted(dotted(set(kept)))
    assert result.unexpected_keys == []
    assert target.state_dict() == expected


@PROPERTY
@given(st.data())
def test_unknown_keys_are_refused_at_every_depth(data: st.DataObject) -> None:
    target, corruption = _fresh_target(data, kinds=("unknown",), min_count=1, max_count=4)
    error = _check_failed_load(target, corruption, strict=True)
    assert set(error.paths) == dotted(corruption.paths)
    assert all(p.endswith(UNKNOWN_KEY) for p in error.paths)


# ----------------------------------------------------------- shapes and examples


def test_examples_of_wrong_shapes() -> None:
    agent = Agent()
    state = agent.state_dict()
    state["name"] = None
    state["toolkit"]["groups"] = {"search": "web"}
    state["memory"]["content"] = [{"role": "user", "content": None}, {"role": "robot", "content": "x"}]
    before = agent.state_dict()
    with pytest.raises(StateLoadError) as info:
        agent.load_state_dict(state, strict=False)
    assert set(info.value.paths) == {
        "name", "toolkit.groups.search", "memory.content[0].content", "memory.content[1].role",
    }  # fmt: skip
    assert agent.state_dict() == before


def _refuse_negative(data: Any) -> int:
    if not isinstance(data, int) or data < 0:
        raise ValueError(f"not a count: {data!r}")
    return data


@stateful
class Counted:
    n: int = state_field(default=0, from_json=_refuse_negative)


@stateful
class Counter(StateModule):
    hits: int = state_field(default=0, from_json=_refuse_negative, to_json=lambda n: n)
    history: list[Counted] = state_field(factory=list)


def test_from_json_failures_are_load_errors_with_their_paths() -> None:
    counter = Counter(hits=3, history=[Counted(1), Counted(2)])
    with pytest.raises(StateLoadError) as info:
        counter.load_state_dict({"hits": -1, "history": [{"n": 5}, {"n": -2}]})
    assert info.value.paths == ["hits", "history[1].n"]
    assert "not a count: -1" in str(info.value)
    assert counter.hits == 3 and counter.history == [Counted(1), Counted(2)]


@stateful
class Inbox(StateModule):
    # Forward references to classes defined further down.
    latest: Letter | None = state_field(default=None)
    drafts: list[Letter] = state_field(factory=list)


@stateful
class Letter:
    to: str
    sent: dt.datetime | None = None


def test_forward_references_resolve_on_first_use() -> None:
    inbox = Inbox(latest=Letter("a", dt.datetime(2024, 1, 2, 3, 4, 5)), drafts=[Letter("b")])
    state = inbox.state_dict()
    assert state == {"latest": {"to": "a", "sent": "2024-01-02T03:04:05"}, "drafts": [{"to": "b", "sent": None}]}
    fresh = Inbox()
    fresh.load_state_dict(state)
    assert fresh == inbox


@pytest.mark.parametrize("annotation", ["object", "complex", "list[object]", "dict[str, type]"])
def test_unsupported_types_fail_at_definition_naming_the_field(annotation: str) -> None:
    namespace: dict[str, Any] = {}
    source = f"@stateful\nclass Bad(StateModule):\n    payload: {annotation} = state_field(default=None)\n"
    scope = {"StateModule": StateModule, "state_field": state_field, "stateful": stateful}
    with pytest.raises(StateDefinitionError, match=r"Bad\.payload"):
        exec(source, scope, namespace)  # noqa: S102


# ------------------------------------------------------------------ faults found


class Mood(str, enum.Enum):
    CALM = "calm"
    ANGRY = "angry"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@stateful
class Moody(StateModule):
    mood: Mood = state_field(default=Mood.CALM)
    level: Level = state_field(default=Level.LOW)


def test_str_and_int_enums_dump_as_plain_json() -> None:
    # Was a fault (fixed in 1bf0a00): cattrs dispatches by MRO, so a str/int enum
    # took the str/int hooks and state_dict() held the enum members, which the
    # JSON codec (OPT_PASSTHROUGH_SUBCLASS) refuses.
    state = Moody().state_dict()
    assert is_plain_json(state), state


def test_str_and_int_enums_round_trip() -> None:
    # Was a fault (fixed in 1bf0a00), same cause: a module's own state_dict() did
    # not load back, and {"mood": "angry"} loaded as the str, not Mood.ANGRY.
    moody = Moody(mood=Mood.ANGRY, level=Level.HIGH)
    fresh = Moody()
    fresh.load_state_dict(orjson.loads(orjson.dumps(moody.state_dict())))
    assert type(fresh.mood) is Mood and type(fresh.level) is Level
    fresh.load_state_dict(moody.state_dict())
    assert fresh == moody


@pytest.mark.parametrize(("annotation", "value"), [("dict[int, str]", {1: "a"}), ("bytes", b"raw")])
def test_non_json_types_fail_at_definition_or_dump_as_json(annotation: str, value: Any) -> None:
    # Was a fault (fixed in 1bf0a00): `dict[int, str]` and `bytes` passed the
    # definition check and state_dict() returned {1: "a"} / b"raw". The issue
    # wants plain JSON only, or a definition error.
    namespace: dict[str, Any] = {}
    source = f"@stateful\nclass Odd(StateModule):\n    payload: {annotation} = state_field(default=None)\n"
    scope = {"StateModule": StateModule, "state_field": state_field, "stateful": stateful}
    try:
        exec(source, scope, namespace)  # noqa: S102
    except StateDefinitionError:
        return
    cls = namespace["Odd"]
    state = cls(payload=value).state_dict()
    assert is_plain_json(state), state


@stateful
class Shout:
    text: str


def _shout_converter() -> cattrs.Converter:
    from statekit.values.converter import make_converter

    conv = make_converter()
    conv.register_structure_hook(Shout, lambda data, _: Shout(data["text"].upper()))
    return conv


@stateful(converter=_shout_converter())
class Megaphone(StateModule):
    last: Shout = state_field(factory=lambda: Shout(""))
    all: list[Shout] = state_field(factory=list)


def test_user_converter_structure_hooks_are_used() -> None:
    # Was a fault (fixed in 1bf0a00): the fast path built records itself and
    # fell back to the converter only on failure, so a user's structure hook
    # for a record was ignored whenever the data was well formed.
    megaphone = Megaphone()
    megaphone.load_state_dict({"last": {"text": "hi"}, "all": [{"text": "yo"}]})
    assert megaphone.last == Shout("HI")
    assert megaphone.all == [Shout("YO")]


@stateful
class Ticker(StateModule):
    label: str = state_field(default="")
    count: int = attrs.field(default=0)

    def __attrs_post_init__(self) -> None:
        self.register_state("count")


def test_register_state_on_a_declared_attribute() -> None:
    # Was a fault (fixed in 1bf0a00): registered state was looked up in the
    # instance __dict__ only, and @stateful classes are slotted, so
    # register_state() of a plain attrs.field() was silently ignored.
    ticker = Ticker()
    ticker.count = 5
    assert ticker.state_dict() == {"label": "", "count": 5}


@stateful
class Span(StateModule):
    span: tuple[int, str] = state_field(default=(0, ""))


def test_fixed_tuple_items_are_reported_with_their_index() -> None:
    # Was a fault (fixed in 1bf0a00): fixed-length tuples stopped at the first
    # bad item and named `span`, not `span[0]` and `span[1]`.
    with pytest.raises(StateLoadError) as info:
        Span().load_state_dict({"span": ["one", 2]})
    assert info.value.paths == ["span[0]", "span[1]"]


def test_strict_load_requires_every_key_of_a_module_it_builds() -> None:
    # Was a fault (fixed in 1bf0a00): a module built by the load (the field held
    # None) took defaults for missing keys even when strict, and a non-strict
    # load did not report them. Strictness must not depend on whether the
    # nested module existed before the load.
    state = Agent().state_dict()
    state["plan"] = {"goal": "ship"}
    with pytest.raises(StateLoadError) as info:
        Agent(plan=Plan()).load_state_dict(state)
    expected = {"plan.steps", "plan.progress", "plan.subplan"}
    assert set(info.value.paths) == expected
    with pytest.raises(StateLoadError) as info:
        Agent().load_state_dict(state)
    assert set(info.value.paths) == expected
    result = Agent().load_state_dict(state, strict=False)
    assert set(result.missing_keys) == expected


def _codec_with_key_error(data: Any) -> int:
    return {"a": 1}[data]


@stateful
class Lookup(StateModule):
    code: int = state_field(default=0, from_json=_codec_with_key_error)


def test_codec_key_error_is_not_reported_as_a_missing_key() -> None:
    # Was a fault (fixed in 1bf0a00): every KeyError read as "required key is
    # missing", so a codec's KeyError('zz') looked like a missing `code`.
    with pytest.raises(StateLoadError) as info:
        Lookup().load_state_dict({"code": "zz"})
    assert info.value.paths == ["code"]
    assert "required key is missing" not in str(info.value)
    assert "zz" in str(info.value)


@stateful
class Note:
    meta: Any = None


@stateful
class Notebook(StateModule):
    note: Note = state_field(factory=Note)


def test_dump_errors_in_records_name_the_field() -> None:
    # Was a fault (fixed in 1bf0a00): a dump error inside a record field was
    # reported at the record (`note`), not at the value (`note.meta.k`).
    with pytest.raises(StateDumpError) as info:
        Notebook(note=Note(meta={"k": {1, 2}})).state_dict()
    assert [p.dotted for p in info.value.problems] == ["note.meta.k"]


@pytest.mark.parametrize(("profile", "counts"), [(None, "10 40 10"), ("ci", "100 400 20")])
def test_hypothesis_profile_is_dev_unless_hypothesis_profile_says_ci(profile: str | None, counts: str) -> None:
    """conftest.py's profiles (issue 23): a quick `dev` by default; `ci`, as .ci/run exports it, tries every example."""
    code = (
        "import conftest\nfrom hypothesis import settings\nfrom strategies import examples\n"
        "print(settings().max_examples, examples(400), examples(20))"
    )
    env = {name: value for name, value in os.environ.items() if name != "HYPOTHESIS_PROFILE"}
    if profile is not None:
        env["HYPOTHESIS_PROFILE"] = profile
    tests = Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, "-c", code], cwd=tests, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, counts), done.stderr
