"""The strict hooks of statekit's cattrs converter for scalars, literals, enums and JSON types; `prepare`, run before hooks are made.

The converter is strict where cattrs is lenient by default: ``None`` is not a
``str``, ``"web"`` is not a ``list[str]``, ``True`` is not an ``int``. JSON-typed
fields get the generated copiers of :mod:`statekit.values.plain`, containers the hooks of
:mod:`statekit.values.containers`; unsupported types fail
when the hook is made (that is, when a ``@stateful`` class is defined), not when
state is saved.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import typing
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path, PurePath
from typing import Any

import cattrs
from cattrs.errors import StructureHandlerNotFoundError

from statekit.values.plain import JSONValueError, describe, expected_name, is_json_type, make_copier, type_name
from statekit.values.annotations import field_types, is_literal, is_record, iter_types
from statekit.codecs._positions import value_problem
from statekit.values.containers import Hook, SHook, is_mapping
from statekit.values.types import Role, made



def _from_string(build: Callable[[str], Any], what: str) -> SHook:
    """A structure hook for values written as JSON strings (dates, UUIDs, paths)."""

    def structure(value: Any, _: Any) -> Any:
        if type(value) is not str:
            raise TypeError(f"expected {what}, got {describe(value)}")
        return build(value)

    return structure


def register_scalars(conv: cattrs.Converter) -> None:
    simple: list[tuple[type, Callable[[Any], str], str, Callable[[str], Any], str]] = [
        (dt.datetime, dt.datetime.isoformat, "a datetime", dt.datetime.fromisoformat, "an ISO 8601 date-time string"),
        (dt.date, dt.date.isoformat, "a date", dt.date.fromisoformat, "an ISO 8601 date string"),
        (dt.time, dt.time.isoformat, "a time", dt.time.fromisoformat, "an ISO 8601 time string"),
        (uuid.UUID, str, "a UUID", uuid.UUID, "a UUID string"),
        (Path, str, "a path", Path, "a path string"),
        (PurePath, str, "a path", PurePath, "a path string"),
    ]
    for scalar in (str, int, bool, type(None)):
        # A save must not write what a load refuses (an int in a str field); generated
        # record code tests the type inline and calls this only to say what is wrong.
        conv.register_unstructure_hook(scalar, scalar_check(scalar))
    conv.register_unstructure_hook(float, make_copier(float))  # refuses NaN and infinities
    for tp, write, name, parse, text in simple:
        conv.register_unstructure_hook(tp, _as_string(tp, write, name))
        conv.register_structure_hook(tp, _from_string(parse, text))
    conv.register_structure_hook_factory(
        lambda t: isinstance(t, type) and issubclass(t, enum.Enum), _enum_structure
    )
    conv.register_unstructure_hook_factory(is_literal, _literal_unstructure)
    conv.register_structure_hook_factory(is_literal, _literal_structure)
    conv.register_unstructure_hook_factory(lambda t: isinstance(t, type) and issubclass(t, enum.Enum), _enum_dump)


def _as_string(kind: type, write: Callable[[Any], str], name: str) -> Hook:
    """Write a ``kind`` with ``write``; refuse anything else, and a ``datetime``
    where a ``date`` is wanted (its time would be lost)."""

    def dump(value: Any) -> Any:
        if not isinstance(value, kind) or (kind is dt.date and isinstance(value, dt.datetime)):
            raise JSONValueError([((), f"expected {name}, got {describe(value)}")])
        return write(value)

    return dump


def scalar_check(kind: type) -> Hook:
    """Pass values of exactly ``kind`` (``True`` is not an int, a str subclass not a str); refuse others."""

    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise JSONValueError([((), f"expected {expected_name(kind)}, got {describe(value)}")])
        return value

    return made(check, Role.PASSES, kind)


def _literal_unstructure(tp: Any) -> Hook:
    """Pass one of the literal's values (matched by type and value, as a load matches
    them) as its JSON value; refuse anything else, which the next load would refuse."""
    _refuse_values_without_json(tp, typing.get_args(tp))
    allowed = {_literal_key(v): _json_value(v) for v in typing.get_args(tp)}
    names = ", ".join(repr(v) for v in typing.get_args(tp))

    def dump(value: Any) -> Any:
        try:
            return allowed[_literal_key(value)]
        except (KeyError, TypeError):
            raise JSONValueError([((), f"expected one of {names}, got {describe(value)}")]) from None

    return dump


def _literal_structure(tp: Any) -> SHook:
    """Match JSON data to a literal by type and value (``True`` is not ``1``)."""
    by_key = {_literal_key(_json_value(v)): v for v in typing.get_args(tp)}
    names = ", ".join(repr(_json_value(v)) for v in by_key.values())

    def structure(value: Any, _: Any) -> Any:
        try:
            return by_key[_literal_key(value)]
        except (KeyError, TypeError):
            raise ValueError(f"expected one of {names}, got {value!r}") from None

    return structure


def _json_value(literal: Any) -> Any:
    return literal.value if isinstance(literal, enum.Enum) else literal


def _literal_key(value: Any) -> tuple[type, Any]:
    return (type(value), value)


def _enum_dump(tp: type[enum.Enum]) -> Hook:
    """A member of ``tp`` as its value; anything else (a member of another enum) is refused."""
    _refuse_values_without_json(tp, tp)

    def dump(member: Any) -> Any:
        if type(member) is not tp:
            raise JSONValueError([((), f"expected a member of {tp.__qualname__}, got {describe(member)}")])
        return member.value

    return dump


def _same_kind(member_value: Any, value: Any) -> bool:
    """Exact types, except that an int stands for a float (as in a ``float`` field)."""
    return type(member_value) is type(value) or (type(member_value) is float and type(value) is int)


def _enum_structure(tp: type[enum.Enum]) -> SHook:
    values = ", ".join(repr(m.value) for m in tp)

    def structure(value: Any, _: Any) -> Any:
        try:
            member = tp(value)
        except ValueError:
            member = None
        if member is None or not _same_kind(member.value, value):  # Python matches True and 1.0 to 1
            raise ValueError(f"expected one of {values}, got {value!r}")
        return member

    return structure


def register_json(conv: cattrs.Converter) -> None:
    """JSON-typed values (scalars, Any, lists and dicts of them) use copiers."""

    def structure(tp: Any) -> SHook:
        copier = make_copier(tp)
        return made(lambda value, _: copier(value), Role.LOADS)

    def unstructure(tp: Any) -> Hook:
        return made(make_copier(tp), Role.COPIES, tp)  # generated record code may dispatch its unions inline

    for scalar in (str, int, float, bool, type(None)):
        conv.register_structure_hook(scalar, structure(scalar))
    conv.register_structure_hook_factory(is_json_type, structure)
    conv.register_unstructure_hook_factory(
        lambda t: is_json_type(t) and t not in (str, int, bool, type(None), None), unstructure
    )


_NOT_JSON = (bytes, bytearray, memoryview, complex)


def prepare(conv: cattrs.Converter, tp: Any, seen: set[Any] | None = None) -> None:
    """Check ``tp`` (and the records it holds) before hooks are made for it.

    Refuses what has no JSON form (``bytes``, non-string mapping keys), and gives
    enums that subclass ``str``/``int`` exact hooks: cattrs dispatches classes by
    MRO, so they would otherwise take the ``str``/``int`` hooks.

    Raises:
        StructureHandlerNotFoundError: ``tp`` cannot be JSON data.
    """
    seen = set() if seen is None else seen
    for inner in iter_types(tp):
        if inner in seen or not _hashable(inner):
            continue
        seen.add(inner)
        _refuse_non_json(inner)
        if isinstance(inner, type) and issubclass(inner, enum.Enum) and issubclass(inner, (str, int, float)):
            conv.register_structure_hook(inner, _enum_structure(inner))
            conv.register_unstructure_hook(inner, _enum_dump(inner))
        elif is_record(inner):
            for field_type in field_types(inner):
                prepare(conv, field_type, seen)


def _hashable(tp: Any) -> bool:
    try:
        hash(tp)
    except TypeError:
        return False
    return True


def _refuse_non_json(tp: Any) -> None:
    if isinstance(tp, type) and issubclass(tp, _NOT_JSON):
        raise StructureHandlerNotFoundError(f"{tp.__name__} has no JSON form; give the field a codec", tp)
    if is_mapping(tp) and typing.get_args(tp) and not _is_str_key(typing.get_args(tp)[0]):
        raise StructureHandlerNotFoundError(f"JSON object keys are strings, not {type_name(typing.get_args(tp)[0])}", tp)


def _refuse_values_without_json(tp: Any, values: Iterable[Any]) -> None:
    """Refuse an enum or literal whose values statekit would write changed (a tuple as a
    list, NaN as ``null``) or not at all (what the JSON codec refuses: an integer beyond
    64 bits, a lone surrogate), when its own hooks are to write them (a user's hooks for
    the type are never asked)."""
    for value in values:
        plain = _json_value(value)
        scalar = type(plain) in (str, int, bool, type(None)) or (type(plain) is float and math.isfinite(plain))
        reason = value_problem(plain, int64=True) if scalar else "has no JSON form (strings, numbers, booleans and None have)"
        if reason is not None:
            where = f"{type(value).__qualname__}.{value.name}" if isinstance(value, enum.Enum) else "the literal"
            raise StructureHandlerNotFoundError(f"{where} = {plain!r}: {reason}", tp)


def _is_str_key(tp: Any) -> bool:
    if is_literal(tp):
        return all(isinstance(v, str) for v in typing.get_args(tp))
    return tp is str or (isinstance(tp, type) and issubclass(tp, str))
