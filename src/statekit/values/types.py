"""The Shape of an annotation under a converter, decided once: what every generator, check and mirror reads.

Which engine may stand in for a converter's hook used to be decided by each
engine, from marks set on the hook functions. Here statekit's hook factories
declare each hook they make (:func:`made`), and :func:`shape_of` reads the
converter's hook for one annotation once: its kind, whether statekit owns the
hook, whether a ``from_json`` (or a pydantic model's validation) runs below
it, how a generated load handles it (:class:`Load`), and for an attrs record
its fields, version and frozenness. How a generated dump handles it
(:class:`Dump`) is decided at the first dump (:func:`dump_of`): a load never
makes the dump hooks. A Shape is cached per converter state: on the class the
annotation names (as :mod:`.class_cache` does), or, for annotations of
Python's own types, with the converter.
"""

from __future__ import annotations

import contextlib
import enum
import typing
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.fns import identity

from statekit.values.annotations import (
    hints_or_empty,
    is_frozen_record,
    is_module_class,
    is_record,
    iter_types,
    type_hints,
)
from statekit.values.checks import checks_in_place
from statekit.values.class_cache import MISSING, TypeCache, owner_of
from statekit.values.fields import field_codec
from statekit.values.plain import is_json_type, plain_union
from statekit.values.pydantic import is_model
from statekit.values.versions import tag

H = TypeVar("H", bound=Callable[..., Any])


class Role(enum.Enum):
    """What a hook statekit made does, as its factory declared it (:func:`made`)."""

    LOADS = "statekit's own structure hook: the generated load may stand in for it"
    COPIES = "copies values of a JSON type (the type it was made for)"
    CHECKS = "checks values of a JSON union in place (the union it was made for)"
    PASSES = "passes values of exactly one scalar class (the class), refusing others"
    DUMPS = "statekit's generated dump of a record class (a weak reference to it: the hook lives as long as the class)"


_made: weakref.WeakKeyDictionary[Callable[..., Any], tuple[Role, Any]] = weakref.WeakKeyDictionary()


def made(hook: H, role: Role, tp: Any = None) -> H:
    """Declare ``hook`` statekit's, doing ``role`` for ``tp``; return it."""
    _made[hook] = (role, tp)
    return hook


def _role(hook: Any) -> tuple[Role | None, Any]:
    try:
        return _made.get(hook, (None, None))
    except TypeError:  # a hook no weak reference can name (a builtin): not one statekit made
        return None, None


class Kind(enum.Enum):
    """What an annotation is, for the generators."""

    SCALAR = "str, int or bool"
    JSON = "a JSON type (Any, float, None, lists, dicts and unions of JSON kinds)"
    LIST = "a list of another type"
    DICT = "a dict of string keys to another type"
    RECORD = "an attrs class or a dataclass"
    MODULE = "a StateModule class"
    MODEL = "a pydantic model"
    OTHER = "anything else (dates, enums, literals, tuples, sets, unions of records)"


class Load(enum.Enum):
    """How generated load code handles a value of an annotation."""

    CATTRS = "through the converter's hook, once (a user's hook, a from_json below, or a type left to cattrs)"
    JSON = "statekit's copier (a checker for data fresh from the decoder)"
    LIST = "a list comprehension over the items' load"
    DICT = "a dict comprehension over the values' load"
    RECORD = "the record's generated load"


class Dump(enum.Enum):
    """How generated dump code handles a value of an annotation."""

    IDENTITY = "as it is"
    SCALAR = "its class checked inline (Shape.dump_kind)"
    UNION_COPY = "a JSON union dispatched inline to its members' copiers"
    UNION_CHECK = "a JSON union dispatched inline to its members' in-place checkers"
    RECORD = "statekit's generated record dump (a list of records repeats its lines in one loop)"
    HOOK = "the converter's hook"


@attrs.frozen
class RecordShape:
    """What the generators read of an attrs record class.

    Attributes:
        fields: Its attrs fields, in order.
        hints: Their resolved annotations (``None``: one names a class not defined yet).
        init: Every field is an ``__init__`` argument (else cattrs builds it).
        keyword: Per field, whether generated code passes it by keyword (``kw_only``, or
            every field of a class with its own ``__init__``, whose parameters need not
            follow the fields: cattrs passes them all by keyword too).
        version: Its ``@stateful(version=)``, or ``None``.
        frozen: Its instances cannot be changed.
    """

    fields: tuple[attrs.Attribute[Any], ...]
    hints: dict[str, Any] | None
    init: bool
    keyword: tuple[bool, ...]
    version: int | None
    frozen: bool

    def hint(self, field: attrs.Attribute[Any]) -> Any:
        """The annotation of ``field`` (``Any`` for an untyped ``attr.ib()``)."""
        return (self.hints or {}).get(field.name, Any)

    def call(self, callee: str, values: list[str]) -> str:
        """Code calling ``callee`` (the class, by a generated name) with ``values[i]`` for field ``i``:
        the positional arguments, then the keyword ones."""
        positional = [value for value, keyword in zip(values, self.keyword, strict=True) if not keyword]
        keyword = [f"{f.alias}={value}" for f, value, kw in zip(self.fields, values, self.keyword, strict=True) if kw]
        return f"{callee}({', '.join(positional + keyword)})"


_records = TypeCache("record shapes")


def record_shape(cls: type) -> RecordShape:
    """The :class:`RecordShape` of an attrs class (the same under every converter), kept on the
    class once its annotations resolve."""
    found: RecordShape = _records.get(cls, cls)
    if found is MISSING:
        found = _record_shape(cls)
        if found.hints is not None:
            _records.put(cls, cls, found)
    return found


def _record_shape(cls: type) -> RecordShape:
    fields = tuple(attrs.fields(cls))
    try:
        hints: dict[str, Any] | None = type_hints(cls)
    except NameError:
        hints = None
    own_init = hasattr(cls, "__attrs_init__")
    keyword = tuple(field.kw_only or own_init for field in fields)
    init = all(field.init for field in fields)
    return RecordShape(fields, hints, init, keyword, tag(cls), is_frozen_record(cls))


class Shape:
    """What statekit decided about one annotation under one converter state.

    The load half is decided by :func:`shape_of`, the dump half by :func:`dump_of`,
    each at its first use: a dump never makes load hooks, nor a load dump hooks.

    Attributes:
        tp: The annotation.
        kind: What it is.
        record: An attrs record's fields and options (``None`` for other annotations).
        owned: The converter's structure hook for it is statekit's own.
        from_json: Loading it runs a field's ``from_json`` or a pydantic model's
            validation, at any depth: code of the user's, run once, by cattrs only.
        load: How generated load code handles it.
        scalar: ``str``, ``int`` or ``bool`` when statekit loads it: generated code checks the class inline.
        union: A JSON union statekit loads, that generated code dispatches inline by kind.
        in_place: Such a union with no ``float`` at any depth: checkable in place.
        dump: How generated dump code handles it, and the class a :data:`Dump.SCALAR` checks.
    """

    __slots__ = ("dump", "from_json", "in_place", "kind", "load", "owned", "record", "scalar", "tp", "union")

    def __init__(self, tp: Any) -> None:
        self.tp = tp
        self.kind = _kind(tp)
        self.record = record_shape(tp) if self.kind is Kind.RECORD and attrs.has(tp) else None
        self.load: Load | None = None
        self.owned = self.from_json = self.union = self.in_place = False
        self.scalar: type | None = None
        self.dump: tuple[Dump, Any] | None = None

    def decide_load(self, conv: cattrs.Converter) -> None:
        """Fill the load half from ``conv``'s structure hook."""
        tp = self.tp
        self.owned = _role(conv.get_structure_hook(tp))[0] is Role.LOADS
        self.from_json = runs_from_json(tp)
        self.scalar = tp if self.kind is Kind.SCALAR and self.owned else None
        self.union = self.owned and plain_union(tp)
        self.in_place = self.union and checks_in_place(tp)
        self.load = _load(self)  # last: another thread reads the half as filled once it is set


def _kind(tp: Any) -> Kind:
    if tp in (str, int, bool):
        return Kind.SCALAR
    if is_json_type(tp):
        return Kind.JSON
    if is_module_class(tp):
        return Kind.MODULE
    if is_record(tp):
        return Kind.RECORD
    if is_model(tp):
        return Kind.MODEL
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args:
        return Kind.LIST
    if origin is dict and args and args[0] is str:
        return Kind.DICT
    return Kind.OTHER


def _load(shape: Shape) -> Load:
    if not shape.owned or shape.from_json:
        return Load.CATTRS  # a user's hook or from_json runs once, in cattrs' path only
    if shape.kind in (Kind.SCALAR, Kind.JSON):
        return Load.JSON
    if shape.kind is Kind.LIST:
        return Load.LIST
    if shape.kind is Kind.DICT:
        return Load.DICT
    if shape.record is not None and shape.record.init:
        return Load.RECORD
    return Load.CATTRS


def dump_of(tp: Any, conv: cattrs.Converter) -> tuple[Dump, Any]:
    """How generated dump code handles ``tp`` under ``conv``, and the class a :data:`Dump.SCALAR` checks."""
    shape = _shape(tp, conv)
    if shape.dump is None:  # decided at the first dump: a load never makes the dump hooks
        shape.dump = _dump(tp, conv.get_unstructure_hook(tp))
    return shape.dump


def _dump(tp: Any, hook: Any) -> tuple[Dump, Any]:
    if hook is identity:
        return Dump.IDENTITY, None
    role, made_for = _role(hook)
    if role is Role.PASSES:
        return Dump.SCALAR, made_for
    if role is Role.COPIES and made_for == tp and plain_union(tp):
        return Dump.UNION_COPY, None
    if role is Role.CHECKS and made_for == tp:
        return Dump.UNION_CHECK, None
    if role is Role.DUMPS and made_for() is tp:
        return Dump.RECORD, None
    return Dump.HOOK, None


_shapes = TypeCache("shapes")
_held: weakref.WeakKeyDictionary[Any, tuple[int, dict[Any, Shape]]] = weakref.WeakKeyDictionary()


def shape_of(tp: Any, conv: cattrs.Converter) -> Shape:
    """The :class:`Shape` of ``tp`` under ``conv`` as its hooks are now, its load half decided
    (once per converter state).

    A plain cattrs converter cannot say when a hook is registered on it: its Shapes are not kept.
    """
    shape = _shape(tp, conv)
    if shape.load is None:
        shape.decide_load(conv)
    return shape


def _shape(tp: Any, conv: cattrs.Converter) -> Shape:
    gen = generation(conv)
    if gen is None:
        return Shape(tp)
    owner = owner_of(tp)
    try:
        if owner is None:
            return _held_by_converter(tp, conv, gen)
        key = (tp, conv, gen)
        found: Shape = _shapes.get(key, owner)
    except TypeError:  # an unhashable annotation: computed, not kept
        return Shape(tp)
    if found is MISSING:
        found = Shape(tp)
        _shapes.put(key, owner, found)
    return found


def _held_by_converter(tp: Any, conv: cattrs.Converter, gen: int) -> Shape:
    """Shapes of annotations of Python's own types, kept on the converter (dropped with it)."""
    held = _held.get(conv)
    if held is None or held[0] != gen:
        held = (gen, {})
        with contextlib.suppress(TypeError):  # a converter no weak reference can name: not kept
            _held[conv] = held
    found = held[1].get(tp)
    if found is None:
        found = held[1][tp] = Shape(tp)
    return found


def generation(conv: cattrs.Converter) -> int | None:
    """A number that changes whenever a hook is registered on ``conv`` (``None``: it cannot say)."""
    return getattr(conv, "generation", None)


_from_json = TypeCache("runs from_json")


def runs_from_json(tp: Any) -> bool:
    """Whether structuring ``tp`` calls a field's ``from_json`` or a pydantic model's
    ``model_validate`` (in a record it holds, at any depth): code of the user's."""
    owner = owner_of(tp)
    try:
        found = _from_json.get(tp, owner)
    except TypeError:  # an unhashable annotation: computed, not cached
        found = MISSING
    if found is not MISSING:
        return bool(found)
    found = any(_record_runs_from_json(inner, set()) for inner in iter_types(tp))
    with contextlib.suppress(TypeError):
        _from_json.put(tp, owner, found)
    return bool(found)


def _record_runs_from_json(tp: Any, seen: set[type]) -> bool:
    if is_model(tp):
        return True
    if not (isinstance(tp, type) and attrs.has(tp)) or tp in seen or is_module_class(tp):
        return False
    seen.add(tp)
    hints = hints_or_empty(tp)
    for field in attrs.fields(tp):
        codec = field_codec(field)
        if codec is not None and codec.from_json is not None:
            return True
        if any(_record_runs_from_json(inner, seen) for inner in iter_types(hints.get(field.name, Any))):
            return True
    return False


__all__ = [
    "Dump",
    "Kind",
    "Load",
    "RecordShape",
    "Role",
    "Shape",
    "dump_of",
    "generation",
    "made",
    "record_shape",
    "runs_from_json",
    "shape_of",
]
