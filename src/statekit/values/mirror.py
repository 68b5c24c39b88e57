"""msgspec mirrors of value types: what well-formed data looks like, said so that msgspec checks it in C.

A mirror of a value type is a msgspec type plus, where the value holds
records, a Python expression that makes the real value from what msgspec
decoded, through each record class's own constructor (so attrs validators, converters and
``__attrs_post_init__`` run, as in cattrs' path). A record's mirror is a
``msgspec.Struct`` with exactly the record's keys, all required and no other
allowed: a missing defaulted key, an extra key or an old version makes the
decode fail, and the caller takes the full path, which handles and reports it.

The expressions of nested records are inlined into one another (a list of
messages becomes one list comprehension calling ``Msg(...)``), and into the one
planner compiled per module (``statekit.state.typed_plan``): no Python call per
record but the constructor's own.

Only what statekit's own hooks would do is mirrored: a user's cattrs hook, a
``from_json`` codec, a recursive record or a type msgspec cannot express has
no mirror (``None``), and the caller leaves that data to the full path.
"""

from __future__ import annotations

import itertools
import types
import typing
from typing import Any, Literal

import attrs
import cattrs
import msgspec

from statekit.values.class_cache import MISSING, TypeCache
from statekit.values.types import Load, RecordShape, generation, shape_of
from statekit.values.versions import VERSION_KEY

HOLE = "@"


@attrs.frozen
class Mirror:
    """How values of one type are decoded and built.

    Attributes:
        tp: The msgspec type to decode.
        code: A Python expression making the value from the decoded one, which
            it names :data:`HOLE`; ``None`` when the decoded value is the value.
        names: The globals ``code`` needs (record classes, by generated names).
        direct: The record class's generated name when ``code`` only calls it with the
            decoded Struct's fields, in order and by position: a list of such records is
            then built in C (``starmap`` over ``astuple``), the constructor the only Python run.
    """

    tp: Any
    code: str | None = None
    names: dict[str, Any] = attrs.field(factory=dict)
    direct: str | None = None


def value_mirror(tp: Any, conv: cattrs.Converter) -> Mirror | None:
    """The mirror of ``tp`` under ``conv``, or ``None`` when it has none: what the generated
    load does (its Shape's :class:`~statekit.values.types.Load`), said in msgspec's types."""
    shape = shape_of(tp, conv)
    if shape.load is Load.JSON:
        return Mirror(tp) if _msgspec_takes(tp) else None
    if shape.load is Load.RECORD:
        return record_mirror(tp, conv)
    args = typing.get_args(tp)
    if shape.load is Load.LIST:
        return _container(list, args[0], conv)
    if shape.load is Load.DICT:
        return _container(dict, args[1], conv)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return _optional(args[0] if args[1] is type(None) else args[1], conv)
    return None


def _msgspec_takes(tp: Any) -> bool:
    try:
        msgspec.json.Decoder(tp)
    except TypeError:  # a union msgspec cannot tell apart
        return False
    return True


_counter = itertools.count()


def _container(kind: type, item_tp: Any, conv: cattrs.Converter) -> Mirror | None:
    item = value_mirror(item_tp, conv)
    if item is None or item.code is None:
        return None  # JSON items make a JSON type, mirrored above; others have none
    var = f"_x{next(_counter)}"
    each = item.code.replace(HOLE, var)
    generic: Any = kind  # subscripted at run time with the items' mirror type
    if kind is list and item.direct is not None:
        names = {**item.names, "_starmap": itertools.starmap, "_astuple": msgspec.structs.astuple}
        return Mirror(generic[item.tp], f"list(_starmap({item.direct}, map(_astuple, {HOLE})))", names)
    if kind is list:
        return Mirror(generic[item.tp], f"[{each} for {var} in {HOLE}]", item.names)
    return Mirror(generic[str, item.tp], f"{{_k: {each} for _k, {var} in {HOLE}.items()}}", item.names)


def _optional(inner_tp: Any, conv: cattrs.Converter) -> Mirror | None:
    inner = value_mirror(inner_tp, conv)
    if inner is None or inner.code is None:
        return None
    return Mirror(inner.tp | None, f"(None if {HOLE} is None else {inner.code})", inner.names)


_records = TypeCache("record mirrors")
_building: set[type] = set()


def record_mirror(cls: type, conv: cattrs.Converter) -> Mirror | None:
    """The mirror of an attrs record (cached on the class, per converter state)."""
    key = (cls, conv, generation(conv))
    cached: Mirror | None = _records.get(key, cls)
    if cached is not MISSING:
        return cached
    if cls in _building:
        return None  # a recursive record: its depth is unbounded, left to the full path
    _building.add(cls)
    try:
        mirror = _make_record_mirror(cls, conv)
    finally:
        _building.discard(cls)
    _records.put(key, cls, mirror)
    return mirror


def _make_record_mirror(cls: type, conv: cattrs.Converter) -> Mirror | None:
    shape = shape_of(cls, conv)
    record = shape.record
    if shape.load is not Load.RECORD or record is None or record.hints is None:
        return None  # a user's hook, a from_json below, a field cattrs builds, a name not defined yet
    mirrors = [value_mirror(record.hint(f), conv) for f in record.fields]
    if any(m is None for m in mirrors):
        return None
    return _record(cls, record, typing.cast(list[Mirror], mirrors))


def _record(cls: type, record: RecordShape, mirrors: list[Mirror]) -> Mirror:
    """A Struct with the record's keys, and a call of the record's class on its fields."""
    fields = record.fields
    spec: list[tuple[str, Any, Any]] = [
        (f"f{i}", m.tp, msgspec.field(name=f.name)) for i, (f, m) in enumerate(zip(fields, mirrors, strict=True))
    ]
    version = record.version
    if version is not None:
        spec.append(("v", Literal[version], msgspec.field(name=VERSION_KEY)))
    struct = msgspec.defstruct(f"{cls.__name__}Mirror", spec, forbid_unknown_fields=True, gc=False)
    name = f"_{cls.__name__}_{next(_counter)}"
    names: dict[str, Any] = {name: cls}
    values = []
    for i, mirror in enumerate(mirrors):
        values.append(f"{HOLE}.f{i}" if mirror.code is None else mirror.code.replace(HOLE, f"{HOLE}.f{i}"))
        names.update(mirror.names)
    call = record.call(name, values)
    direct = version is None and call == f"{name}({', '.join(f'{HOLE}.f{i}' for i in range(len(mirrors)))})"
    return Mirror(struct, call, names, name if direct else None)


__all__ = ["HOLE", "Mirror", "record_mirror", "value_mirror"]
