"""Typed decoding whose types prove the depth limit, so that no depth pass is needed.

msgspec decodes a value typed ``Any`` to any depth, so a typed load used to walk
what it decoded to enforce :data:`~statekit._limits.MAX_DEPTH`: an orjson pass
over the whole document, a third of a 10,000-message load by a session object
that had not seen the bytes before. Here every ``Any`` of a document's mirror
becomes :data:`ANY_LEVELS` levels of a JSON union, which msgspec checks while it
decodes, and the document type's own depth, counted once when it is made,
proves the limit. A value nested deeper than that, but perhaps within the
limit, is refused by this decoder only: the typed load then decodes as before,
with the depth pass.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union

import msgspec

ANY_LEVELS = 8
"""How many levels of lists and dicts a value typed ``Any`` may nest for the bounded decoder.

msgspec expands each nested union into its own type tree, so each level doubles
the decoder it builds: about 5 ms per ``Any`` of a document at 8 levels, once.
"""

UNBOUNDED = 1 << 30
"""The depth :func:`levels` gives a type that does not bound it."""


def _json_levels(levels: int) -> Any:
    tp: Any = Union[None, bool, int, float, str]  # noqa: UP007 - built at run time
    for _ in range(levels):
        tp = Union[None, bool, int, float, str, list[tp], dict[str, tp]]  # noqa: UP007 - built at run time
    return tp


BOUNDED_ANY = _json_levels(ANY_LEVELS)
"""Any JSON value nested at most :data:`ANY_LEVELS` levels, as a msgspec type."""


def bounded(tp: Any, memo: dict[type, type]) -> Any:
    """``tp`` with every ``Any`` (and the items of a bare ``list`` or ``dict``) made :data:`BOUNDED_ANY`.

    Args:
        tp: A msgspec type: Structs, lists, dicts, unions, literals, scalars.
        memo: The Structs made so far (each Struct is rebuilt once; one
            without ``Any`` below it is kept as it is).
    """
    if tp is Any:
        return BOUNDED_ANY
    if tp is list or tp is dict:
        return tp[(str, BOUNDED_ANY) if tp is dict else BOUNDED_ANY]
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return _bounded_struct(tp, memo)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal or not args:
        return tp
    new = tuple(bounded(arg, memo) for arg in args)
    if all(a is b for a, b in zip(new, args, strict=True)):
        return tp
    if origin in (Union, types.UnionType):
        return Union[new]  # noqa: UP007 - built at run time
    return origin[new]


def _bounded_struct(cls: type[msgspec.Struct], memo: dict[type, type]) -> type:
    if cls in memo:
        return memo[cls]
    fields = msgspec.structs.fields(cls)
    new = [bounded(field.type, memo) for field in fields]
    if all(a is field.type for a, field in zip(new, fields, strict=True)):
        memo[cls] = cls
        return cls
    spec = [(f.name, tp, _field(f)) for f, tp in zip(fields, new, strict=True)]
    config = cls.__struct_config__
    made = msgspec.defstruct(cls.__name__, spec, forbid_unknown_fields=config.forbid_unknown_fields, gc=config.gc)
    memo[cls] = made
    return made


def _field(info: msgspec.structs.FieldInfo) -> Any:
    if info.required:
        return msgspec.field(name=info.encode_name)
    if info.default_factory is not msgspec.NODEFAULT:
        return msgspec.field(name=info.encode_name, default_factory=info.default_factory)
    return msgspec.field(name=info.encode_name, default=info.default)


def levels(tp: Any) -> int:
    """How many levels of containers a value of ``tp`` can nest (a Struct is one level: its object).

    Returns:
        The depth, or :data:`UNBOUNDED` when ``tp`` holds an unbounded ``Any``.
    """
    if tp is BOUNDED_ANY:  # first: walking its members would take 2 ** ANY_LEVELS steps
        return ANY_LEVELS
    if tp is Any or tp is list or tp is dict:
        return UNBOUNDED
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return 1 + max((levels(f.type) for f in msgspec.structs.fields(tp)), default=0)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return max(levels(arg) for arg in args)
    if origin is list or origin is dict:
        return 1 + levels(args[-1])
    return 0


__all__ = ["ANY_LEVELS", "BOUNDED_ANY", "UNBOUNDED", "bounded", "levels"]
