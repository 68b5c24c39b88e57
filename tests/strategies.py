"""Hypothesis strategies for statekit tests: the one place to find or add them.

- JSON data: :data:`json_data`, :data:`json_objects`, :data:`texts`, :data:`json_ints`, ...
- Agent messages: :data:`messages` (records) and :data:`message_data` (plain data),
  whose ``content`` is ``str | list[dict[str, Any]]``.
- Module trees: :data:`state_modules` draws any module class of
  :mod:`agent_models`, nested up to a few levels (an agent in a team, plans in
  plans, an imperative scratchpad holding a memory, ``ClassB`` holding ``ClassA``).
- Corruptions of a valid state: :func:`corruptions`, built on :func:`typed_nodes`,
  which pairs every position of ``module.state_dict()`` with its declared type.

Integers stay within 64 bits so that every state can go through orjson.

:func:`examples` scales a property's ``max_examples`` to the Hypothesis profile
(``tests/conftest.py``).
"""

from __future__ import annotations

import copy
import datetime as dt
import enum
import functools
import itertools
import types
import typing
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from typing import Any

import attrs
from hypothesis import settings, strategies as st

from agent_models import (
    Agent,
    ClassB,
    Memory,
    Message,
    Param,
    Plan,
    Priority,
    Record,
    Role,
    Scratchpad,
    Team,
    Toolkit,
    ToolSpec,
)
from statekit import StateModule

StatePath = tuple[str | int, ...]


FULL_EXAMPLES = 100
"""The ``max_examples`` of the ``ci`` profile, in which :func:`examples` gives each count in full."""


def examples(full: int) -> int:
    """A property's ``max_examples``: ``full`` under the ``ci`` profile, a tenth (at least 10) under ``dev``."""
    scaled = full * settings().max_examples // FULL_EXAMPLES
    return max(scaled, min(full, 10))


# --------------------------------------------------------------------------- JSON

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

json_ints = st.one_of(
    st.integers(-100, 100),
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([0, -1, INT64_MIN, INT64_MAX, 2**53 + 1, -(2**53) - 1]),
)
"""Small, large and edge integers, all within what orjson writes (64 bits)."""

big_ints = st.integers().filter(lambda n: not INT64_MIN <= n <= INT64_MAX) | st.sampled_from([2**64, -(2**100)])
"""Integers beyond 64 bits: fine as state, refused by the JSON codec."""

json_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 5e-324, 1.7976931348623157e308, 0.1, -2.5e-10]),
)
"""Finite floats, with signed zero, subnormals and the extremes."""

_SPECIAL_TEXTS = [
    "",
    "😀",
    "👩\u200d👩\u200d👧\u200d👦",
    "naïve café",
    "日本語のテキスト",
    "\u0000",
    "\t\n\r\"\\",
    "a.b[3].c",
    "<root>",
    "\U0010ffff",
    "\u202eevil",
    "0",
    "null",
]

texts = st.one_of(st.text(st.characters(codec="utf-8"), max_size=12), st.sampled_from(_SPECIAL_TEXTS))
"""Unicode text (no lone surrogates: they are not UTF-8), with emoji and tricky cases."""

json_scalars = st.one_of(st.none(), st.booleans(), json_ints, json_floats, texts)

json_data: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value: scalars, nested lists and objects with ``str`` keys."""

json_objects = st.dictionaries(texts, json_data, max_size=4)
"""A JSON object (``dict[str, Any]``)."""

# ----------------------------------------------------------------------- messages

text_blocks = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
tool_use_blocks = st.fixed_dictionaries(
    {"type": st.just("tool_use"), "id": texts, "name": texts, "input": json_objects}
)
tool_result_blocks = st.fixed_dictionaries(
    {"type": st.just("tool_result"), "id": texts, "output": texts | st.lists(text_blocks, max_size=2)}
)
content_blocks = st.one_of(text_blocks, tool_use_blocks, tool_result_blocks, json_objects)
contents = st.one_of(texts, st.lists(content_blocks, max_size=3))
"""A message's ``content``: ``str | list[dict[str, Any]]``."""

messages = st.builds(Message, role=st.sampled_from(Role), content=contents, name=st.none() | texts)
"""``Message`` records (see :mod:`agent_models`)."""

message_data = st.fixed_dictionaries(
    {"role": st.sampled_from([r.value for r in Role]), "content": contents},
    optional={"name": st.none() | texts},
)
"""Messages as plain JSON data, the shape agents pass around."""

# ------------------------------------------------------------------------ records

timezones = st.one_of(
    st.none(),
    st.just(dt.timezone.utc),
    st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m))),
)
datetimes = st.datetimes(timezones=timezones)
paths = st.lists(st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=6), max_size=3).map(
    lambda parts: Path(*parts)
)

params = st.builds(Param, name=texts, required=st.booleans(), priority=st.sampled_from(Priority))
tool_specs = st.builds(ToolSpec, description=texts, params=st.lists(params, max_size=2), timeout=json_floats)
records = st.builds(
    Record,
    priority=st.sampled_from(Priority),
    when=datetimes,
    ident=st.uuids(),
    where=paths,
    span=st.tuples(json_ints, json_ints),
    labels=st.sets(texts, max_size=3),
    ids=st.frozensets(json_ints, max_size=3),
    counts=st.dictionaries(texts, json_ints, max_size=3),
    note=st.none() | texts,
)
"""``Record`` values: Enum, datetime, UUID, Path, tuple, set, frozenset, dict[str, int]."""

# ------------------------------------------------------------------------ modules

memories = st.builds(Memory, content=st.lists(messages, max_size=4), summary=texts)
toolkits = st.builds(
    Toolkit,
    groups=st.dictionaries(texts, st.lists(texts, max_size=3), max_size=3),
    active=st.sets(texts, max_size=3),
    tools=st.dictionaries(texts, tool_specs, max_size=2),
    records=st.lists(records, max_size=2),
    flags=st.lists(st.booleans(), max_size=3).map(tuple),
)


def plans(depth: int = 3) -> st.SearchStrategy[Plan]:
    """Plans nesting sub-plans up to ``depth`` levels."""
    sub = st.none() if depth <= 0 else st.none() | st.deferred(lambda: plans(depth - 1))
    return st.builds(Plan, goal=texts, steps=st.lists(texts, max_size=3), progress=json_floats, subplan=sub)


@st.composite
def scratchpads(draw: st.DrawFn) -> Scratchpad:
    pad = Scratchpad()
    pad.notes = draw(st.lists(json_data, max_size=3))
    pad.tags = draw(st.sets(texts, max_size=3))
    pad.memory = draw(memories)
    return pad


@st.composite
def class_bs(draw: st.DrawFn) -> ClassB:
    b = ClassB()
    b.c = draw(json_data)
    b.a.cnt = draw(json_data)
    return b


agents = st.builds(
    Agent,
    name=texts,
    sys_prompt=texts,
    memory=memories,
    toolkit=toolkits,
    plan=st.none() | plans(),
    turns=json_ints,
    temperature=json_floats,
    started=st.none() | datetimes,
    extra=json_objects,
    scratch=scratchpads(),
)
teams = st.builds(Team, lead=agents, pad=class_bs(), budget=json_ints)

state_modules: st.SearchStrategy[StateModule] = st.one_of(
    memories, toolkits, plans(), scratchpads(), class_bs(), agents, teams
)
"""A module of any class of :mod:`agent_models`, with its nested modules."""


def iter_modules(module: StateModule) -> Iterator[StateModule]:
    """``module`` and every module nested in its state, depth first."""
    yield module
    for key in module.state_dict():
        value = getattr(module, key)
        if isinstance(value, StateModule):
            yield from iter_modules(value)


# ------------------------------------------------------------------- typed nodes


@attrs.frozen
class Node:
    """One position of a state, with the type its owner declares for it.

    Attributes:
        path: Segments from the root of the state.
        tp: The declared type (a module class for modules).
        module: The position holds a module's state.
        closed: An object whose keys are fixed (a module or a value record).
        required: Keys whose absence fails a load (every key of a module when
            strict; the fields without default of a record, in both modes).
    """

    path: StatePath
    tp: Any
    module: bool = False
    closed: bool = False
    required: tuple[str, ...] = ()


def typed_nodes(module: StateModule, data: dict[str, Any] | None = None) -> list[Node]:
    """Every typed position of ``module``'s state (``data``, by default its dump).

    Positions that take any JSON data (``Any``, ``dict[str, Any]`` values,
    imperative state without a type) are left out: nothing there is "wrong".
    """
    out: list[Node] = []
    _walk_module(module, module.state_dict() if data is None else data, (), out, type(module))
    return out


def _walk_module(module: StateModule, data: dict[str, Any], path: StatePath, out: list[Node], tp: Any) -> None:
    out.append(Node(path, tp, module=True, closed=True, required=tuple(data)))
    cls = type(module)
    hints = typing.get_type_hints(cls) if attrs.has(cls) else {}
    for key, sub in data.items():
        value = getattr(module, key)
        if isinstance(value, StateModule):  # declared type (``Plan | None``), else its class
            _walk_module(value, sub, (*path, key), out, hints.get(key, type(value)))
        elif key in hints:
            _walk_value(hints[key], sub, (*path, key), out)
        # else: imperative state with no type, any JSON data fits


def _arm(tp: Any, data: Any) -> Any:
    """The member of a union that ``data`` was dumped from."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return tp
    members = [a for a in typing.get_args(tp) if a is not type(None)]
    if data is None:
        return None
    if len(members) == 1:
        return members[0]
    if type(data) is list:
        return next(a for a in members if typing.get_origin(a) in (list, set, frozenset, tuple))
    return next(a for a in members if a is str)


def _walk_value(tp: Any, data: Any, path: StatePath, out: list[Node]) -> None:
    arm = _arm(tp, data)
    if arm is Any:
        return
    if arm is None:
        out.append(Node(path, tp))
        return
    if attrs.has(arm):
        fields = attrs.fields(arm)
        required = tuple(f.name for f in fields if f.default is attrs.NOTHING)
        out.append(Node(path, tp, closed=True, required=required))
        hints = typing.get_type_hints(arm)
        for key, sub in data.items():
            _walk_value(hints[key], sub, (*path, key), out)
        return
    out.append(Node(path, tp))
    origin, args = typing.get_origin(arm), typing.get_args(arm)
    if origin is dict:
        for key, sub in data.items():
            _walk_value(args[1], sub, (*path, key), out)
    elif origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        for index, (item_tp, sub) in enumerate(zip(args, data, strict=True)):
            _walk_value(item_tp, sub, (*path, index), out)
    elif origin in (list, set, frozenset, tuple):
        for index, sub in enumerate(data):
            _walk_value(args[0], sub, (*path, index), out)


def _members(tp: Any) -> list[Any]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) for m in _members(a)]
    return [tp]


def _is_enum_of(tp: Any, kind: type) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum) and any(isinstance(m.value, kind) for m in tp)


def wrong_values(tp: Any) -> list[Any]:
    """JSON values that a position of declared type ``tp`` must refuse."""
    members = _members(tp)
    numeric = any(m in (int, float) or _is_enum_of(m, int) for m in members)
    textual = any(m in (str, Path, PurePath) for m in members)
    out: list[Any] = []
    if not numeric:
        out.append(12345)
    if not textual:
        out.append("web")  # never silently ["w", "e", "b"]
    if bool not in members and not _is_enum_of_any_int(members):
        out.append(True)  # a boolean is not an int
    if float not in members:
        out.append(1.5)
    if type(None) not in members:
        out.append(None)
    return out


def _is_enum_of_any_int(members: list[Any]) -> bool:
    return any(_is_enum_of(m, int) for m in members)


# -------------------------------------------------------------------- corruptions

UNKNOWN_KEY = "zz_not_declared"


@attrs.frozen
class Corruption:
    """A damaged copy of a valid state.

    Attributes:
        state: The damaged state (the original is left alone).
        changes: ``(kind, path)`` for each change: ``"wrong"`` (a value of the
            wrong type at ``path``), ``"unknown"`` (an undeclared key added, at
            ``path``), ``"missing"`` (a required key removed, at ``path``),
            ``"missing-field"`` (a required field of a value record removed).
    """

    state: dict[str, Any]
    changes: tuple[tuple[str, StatePath], ...]

    @property
    def paths(self) -> set[StatePath]:
        return {path for _, path in self.changes}


def _overlap(a: StatePath, b: StatePath) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def _container(state: Any, path: StatePath) -> Any:
    for segment in path:
        state = state[segment]
    return state


@st.composite
def corruptions(
    draw: st.DrawFn,
    module: StateModule,
    *,
    kinds: tuple[str, ...] = ("wrong", "unknown", "missing", "missing-field"),
    min_count: int = 1,
    max_count: int = 1,
    keep: Callable[[str, StatePath], bool] | None = None,
) -> Corruption:
    """Damage ``module.state_dict()`` at ``min_count..max_count`` unrelated places.

    ``keep``, when given, picks which ``(kind, path)`` changes may be made.
    """
    state = module.state_dict()
    candidates: list[tuple[str, StatePath, Node]] = []
    for node in typed_nodes(module, state):
        if "wrong" in kinds and node.path and wrong_values(node.tp):
            candidates.append(("wrong", node.path, node))
        if "unknown" in kinds and node.closed:
            candidates.append(("unknown", (*node.path, UNKNOWN_KEY), node))
        kind = "missing" if node.module else "missing-field"
        if kind in kinds and node.closed:
            candidates.extend((kind, (*node.path, key), node) for key in node.required)
    if keep is not None:
        candidates = [c for c in candidates if keep(c[0], c[1])]
    if not candidates:
        raise ValueError("nothing to corrupt")  # every module here has state: never happens
    deep = [c for c in candidates if len(c[1]) >= 3]
    if deep and draw(st.booleans()):  # type: ignore[arg-type]
        candidates = deep  # small trees have many shallow places: reach the deep ones too
    wanted = draw(st.integers(min_count, max_count))
    chosen: list[tuple[str, StatePath, Node]] = []
    for _ in range(wanted * 4):
        if len(chosen) == wanted:
            break
        pick = draw(st.sampled_from(candidates))
        if not any(_overlap(pick[1], c[1]) for c in chosen):
            chosen.append(pick)
    damaged = copy.deepcopy(state)
    for kind, path, node in chosen:
        parent = _container(damaged, path[:-1])
        if kind == "wrong":
            parent[path[-1]] = draw(st.sampled_from(wrong_values(node.tp)))
        elif kind == "unknown":
            parent[path[-1]] = draw(json_data)
        else:
            del parent[path[-1]]
    return Corruption(damaged, tuple((kind, path) for kind, path, _ in chosen))


# ------------------------------------------------------------------ object walks

_MUTABLE = (list, dict, set)


def mutable_containers(root: Any) -> dict[int, Any]:
    """Every list, dict and set reachable from ``root`` (through modules,
    records, tuples and frozensets), by ``id``; the objects are kept alive."""
    found: dict[int, Any] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, _MUTABLE):
            found[id(obj)] = obj
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif attrs.has(type(obj)) or isinstance(obj, StateModule):
            if attrs.has(type(obj)):
                stack.extend(getattr(obj, f.name) for f in attrs.fields(type(obj)))
            # __dict__ holds undeclared modules and registered attributes; the
            # names statekit keeps there for itself are not data.
            extra = vars(obj) if hasattr(obj, "__dict__") else {}
            stack.extend(v for k, v in extra.items() if not k.startswith("__statekit"))
    return found


def mutate_everything(root: Any) -> None:
    """Append to every list, add a key to every dict and an item to every set
    reachable from ``root`` (see :func:`mutable_containers`)."""
    for obj in mutable_containers(root).values():
        if isinstance(obj, list):
            obj.append("MUTATED")
        elif isinstance(obj, dict):
            obj["MUTATED"] = ["MUTATED"]
        else:
            obj.add("MUTATED")


def live_equal(a: Any, b: Any) -> bool:
    """Deep equality of two live trees, by state (imperative modules have no ``__eq__``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, StateModule):
        keys = list(a.state_dict())
        if keys != list(b.state_dict()):
            return False
        fields = [f.name for f in attrs.fields(type(a)) if f.eq] if attrs.has(type(a)) else []  # type: ignore[arg-type]
        return all(live_equal(getattr(a, k), getattr(b, k)) for k in dict.fromkeys([*fields, *keys]))
    if attrs.has(type(a)):
        return all(live_equal(getattr(a, f.name), getattr(b, f.name)) for f in attrs.fields(type(a)) if f.eq)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(live_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(live_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, float):
        return a == b and str(a) == str(b)  # -0.0 is not 0.0
    return bool(a == b)


def is_plain_json(value: Any) -> bool:
    """Only dict (with str keys), list, str, int, float, bool and None, exactly."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and is_plain_json(v) for k, v in value.items())
    if kind is list:
        return all(is_plain_json(v) for v in value)
    return kind in (str, int, float, bool, type(None))

# --------------------------------------------------------------------------- versions (issue 7)

from version_models import AgentV1, MemoryV1, NoteV1  # noqa: E402 - grouped with their strategies

agents_v1 = st.builds(
    AgentV1,
    name=texts,
    turns=json_ints,
    user=texts,
    tool_group=texts,
    memory=st.builds(MemoryV1, notes=st.lists(st.builds(NoteV1, text=texts), max_size=4)),
)
"""Agents of version 1 of :mod:`version_models` (saved before versions existed)."""


# ------------------------------------------------- value types and data for them


class Shade(enum.Enum):
    """An enum whose values are strings, for :data:`value_types`."""

    LIGHT = "light"
    DARK = "dark"


_LEAF_TYPES: list[Any] = [
    str, int, float, bool, type(None), Any, dt.date, dt.datetime, uuid.UUID, PurePath,
    Shade, typing.Literal["a", "b", 1],
]
_record_names = iter(f"Rec{n}" for n in itertools.count())


_REFUSED = object()

_Made = typing.TypeVar("_Made")
_made_caches: list[Any] = []


def made_once(make: Callable[[Any], _Made]) -> Callable[[Any], _Made]:
    """``make(tp)``, made once per annotation until :func:`forget_made`: for properties that
    build a class or a strategy from a drawn type and test what that one does, where a class
    made afresh for each example would test nothing more.

    About half the types Hypothesis draws were drawn before (small ones most of all); making
    each class again costs attrs' and statekit's code generation, and a strategy made again
    Hypothesis's checks of it. Types are keyed as Python compares them: ``int | str`` and
    ``str | int`` share the first one made, as statekit's converter shares their hooks. That
    keeps the draws a function of Hypothesis's choices alone, although ``typing`` hands out
    either order of an equal union depending on what it made before. Nothing is dropped
    until :func:`forget_made` (after each test module, tests/conftest.py): an entry dropped
    and made again from the other order would draw differently on a replay. ``make``
    raising is not kept.
    """
    kept = functools.cache(make)
    _made_caches.append(kept)
    return kept


def forget_made() -> None:
    """Drop every class and strategy :func:`made_once` kept."""
    for kept in _made_caches:
        kept.cache_clear()


def record_type(field_types: list[Any]) -> Any:
    """A ``@stateful`` value record with one field per type (``f0``, ``f1``...): made once per
    list of types (:func:`made_once`); a type statekit refuses gives ``_REFUSED``."""
    return _record_type(tuple(field_types))


@made_once
def _record_type(field_types: tuple[Any, ...]) -> Any:
    from statekit import StateDefinitionError, stateful

    namespace = {"__annotations__": {f"f{i}": tp for i, tp in enumerate(field_types)}}
    try:
        return stateful(type(next(_record_names), (), namespace))
    except StateDefinitionError:
        return _REFUSED  # a field type statekit refuses: filtered out


def _records_of(fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(fields, min_size=1, max_size=3).map(record_type).filter(lambda tp: tp is not _REFUSED)


value_types: st.SearchStrategy[Any] = st.recursive(
    st.sampled_from(_LEAF_TYPES),
    lambda inner: st.one_of(
        inner.map(lambda tp: list[tp]),  # type: ignore[valid-type]
        inner.map(lambda tp: dict[str, tp]),  # type: ignore[valid-type]
        inner.map(lambda tp: typing.Optional[tp]),
        inner.map(lambda tp: tuple[tp, ...]),  # type: ignore[valid-type]
        st.tuples(inner, inner).map(lambda pair: tuple[pair[0], pair[1]]),  # type: ignore[valid-type]
        st.tuples(inner, inner).map(lambda pair: typing.Union[pair[0], pair[1]]),
        _records_of(inner),
        _records_of(inner),
    ),
    max_leaves=5,
)
"""Annotations statekit may hold: scalars, dates, enums, literals, containers,
unions and freshly made records (some refused at definition: callers reject those)."""

record_types = _records_of(st.one_of(st.sampled_from(_LEAF_TYPES), value_types))
"""Freshly made ``@stateful`` records whose fields are :data:`value_types`."""

_JSON_MEMBERS: list[Any] = [
    str, int, bool, type(None), float, list[float], dict[str, float], list[Any], dict[str, Any],
    list[dict[str, Any]], dict[str, list[float]], list[str],
]
json_union_records = _records_of(
    st.tuples(st.sampled_from(_JSON_MEMBERS), st.sampled_from(_JSON_MEMBERS)).map(lambda pair: typing.Union[pair[0], pair[1]])
)
"""Records whose fields are unions of JSON types (``str | list[dict[str, Any]]``,
``list[float] | None``...): the fields that generated code dispatches inline."""


def data_for(tp: Any, noisy: bool = False) -> st.SearchStrategy[Any]:
    """JSON data shaped like ``tp``: valid for it, but for near misses that enums,
    literals and records draw; ``noisy``: any scalar may be of another JSON kind.

    One strategy per type (:func:`made_once`), so that Hypothesis checks it once."""
    return (_noisy_data_for if noisy else _data_for)(tp)


@made_once
def _data_for(tp: Any) -> st.SearchStrategy[Any]:
    return _make_data_for(tp, noisy=False)


@made_once
def _noisy_data_for(tp: Any) -> st.SearchStrategy[Any]:
    return _make_data_for(tp, noisy=True)


def _make_data_for(tp: Any, noisy: bool) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _LEAF_DATA:
        leaf = _LEAF_DATA[tp]
        return st.one_of(leaf, _NEAR_MISSES.get(tp, json_scalars)) if noisy else leaf
    if tp is Shade:
        return st.sampled_from(["light", "dark", "dim"])
    if origin is typing.Literal:
        return st.sampled_from([*args, "c", True])
    if origin is list or origin is tuple:
        items = [data_for(a, noisy) for a in args if a is not Ellipsis]
        if origin is tuple and Ellipsis not in args:
            return st.tuples(*items).map(list)
        return st.lists(items[0], max_size=3)
    if origin is dict:
        return st.dictionaries(texts, data_for(args[1], noisy), max_size=3)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([data_for(a, noisy) for a in args])
    if attrs.has(tp):
        fields = {f.name: data_for(f.type, noisy) for f in attrs.fields(tp)}
        return st.fixed_dictionaries(fields, optional={"zz_extra": json_scalars})
    return json_data


_NEAR_MISSES: dict[Any, st.SearchStrategy[Any]] = {
    bool: st.sampled_from([0, 1, 1.0]),
    int: st.sampled_from([True, False, 1.0, 2.5]),
    float: st.sampled_from([True, "1.5"]),
    str: st.sampled_from([1, None, True]),
    type(None): st.sampled_from([0, "", False]),
}
"""Values of a neighbouring kind that a careless check would let through."""

_LEAF_DATA: dict[Any, st.SearchStrategy[Any]] = {
    str: texts,
    int: json_ints,
    float: json_floats | json_ints,
    bool: st.booleans(),
    type(None): st.none(),
    Any: json_data,
    dt.date: st.dates().map(dt.date.isoformat),
    dt.datetime: st.datetimes().map(dt.datetime.isoformat),
    uuid.UUID: st.uuids().map(str),
    PurePath: texts,
}
