"""Generated fast structuring for the common case: well-formed data.

Each type gets a one-argument function that builds the value without tracking
paths and raises at the first surprise. Callers run it first and, when it
raises, run cattrs' detailed-validation hook, which either succeeds (the fast
path bails out on anything unusual: a missing defaulted key, an extra key) or
reports every problem with its path. Correct data never pays for reporting.
"""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Callable
from typing import Any

import attrs
import cattrs

from statekit.values.class_cache import MISSING, TypeCache, owner_of
from statekit.values.codegen import compile_function
from statekit.values.fields import field_codec
from statekit.values.containers import is_ours
from statekit.values.hooks import iter_types, type_hints
from statekit.values.converter import generation
from statekit.values.pydantic import is_model
from statekit.values.versions import VERSION_KEY, tag
from statekit.values.checks import checks_in_place, fast_checker, union_check_lines
from statekit.values.plain import copy_any, dict_copier, fast_copier, is_json_type, list_copier, plain_union, union_copy_lines

Fast = Callable[[Any], Any]

_SCALAR_CHECKS = {str: "str", int: "int", bool: "bool"}


class Bail(Exception):
    """The fast path gives up; the detailed hook takes over."""


def fast_structure(tp: Any, conv: cattrs.Converter, *, fresh: bool = False) -> Fast:
    """Return a fast one-argument structuring function for ``tp``.

    Where the converter's hook for ``tp`` is not statekit's own (the user
    registered one), that hook is used as it is.

    Args:
        tp: The type to build.
        conv: The converter whose hooks stand behind it.
        fresh: The data comes straight from the JSON codec's decoder and nobody else
            holds it: JSON-typed values are checked, not copied, and what
            sits under ``Any`` is not walked (it makes only JSON data).
    """
    if not is_ours(conv.get_structure_hook(tp)) or runs_from_json(tp):
        # A user's hook or from_json runs once, in cattrs' path only, so both
        # paths give the same result and a failure never calls it twice.
        return _via_cattrs(tp, conv)
    if is_json_type(tp):
        return fast_checker(tp, fresh=True) if fresh else fast_copier(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args:
        return list_copier(fast_structure(args[0], conv, fresh=fresh))
    if origin is dict and args and args[0] is str:
        return dict_copier(fast_structure(args[1], conv, fresh=fresh))
    if isinstance(tp, type) and attrs.has(tp) and not _is_module(tp):
        return _cached_record(tp, conv, fresh)
    return _via_cattrs(tp, conv)


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
    if not (isinstance(tp, type) and attrs.has(tp)) or tp in seen or _is_module(tp):
        return False
    seen.add(tp)
    hints = _hints_or_empty(tp)
    for field in attrs.fields(tp):
        codec = field_codec(field)
        if codec is not None and codec.from_json is not None:
            return True
        if any(_record_runs_from_json(inner, seen) for inner in iter_types(hints.get(field.name, Any))):
            return True
    return False


def _hints_or_empty(tp: type) -> dict[str, Any]:
    try:
        return type_hints(tp)
    except NameError:
        return {}


def _is_module(tp: type) -> bool:
    return hasattr(tp, "__statekit_plan__")


def by_keyword(cls: type, field: attrs.Attribute[Any]) -> bool:
    """Whether generated code passes ``field`` by keyword: a ``kw_only`` field, or any field
    of a class with its own ``__init__`` (its parameters need not follow the fields; cattrs
    passes them all by keyword too)."""
    return field.kw_only or hasattr(cls, "__attrs_init__")


def _via_cattrs(tp: Any, conv: cattrs.Converter) -> Fast:
    hook = conv.get_structure_hook(tp)

    def structure(value: Any) -> Any:
        return hook(value, tp)

    structure.__statekit_via_cattrs__ = True  # type: ignore[attr-defined]
    return structure


_records = TypeCache("fast structure")


def _cached_record(cls: type, conv: cattrs.Converter, fresh: bool) -> Fast:
    """One generated function per (class, converter, freshness), held on the class;
    recursion is late-bound."""
    key = (cls, conv, generation(conv), fresh)  # a hook registered later makes new code
    built: Fast | None = _records.get(key, cls)
    if built is not MISSING:
        return built if built is not None else (lambda value: _records.get(key, cls)(value))
    _records.put(key, cls, None)  # being generated: a recursive field looks it up when called
    try:
        built = _record(cls, conv, fresh)
    except BaseException:
        _records.pop(key, cls)
        raise
    _records.put(key, cls, built)
    return built


def _record(cls: type, conv: cattrs.Converter, fresh: bool) -> Fast:
    """Generate ``structure(o)`` for an attrs class: inline checks, direct call."""
    hints = type_hints(cls)
    fields = attrs.fields(cls)
    names: dict[str, Any] = {"__cl": cls, "__Bail": Bail, "__copy": copy_any}
    names["__version"] = tag(cls)
    body = _shape_check(len(fields), tag(cls))
    positional: list[str] = []
    keyword: list[str] = []
    for index, field in enumerate(fields):
        if not field.init:
            return _via_cattrs(cls, conv)
        var = f"a{index}"
        body.extend(_field_lines(field, hints.get(field.name, Any), var, names, conv, fresh))
        if by_keyword(cls, field):
            keyword.append(f"{field.alias}={var}")
        else:
            positional.append(var)
    body.append(f"    return __cl({', '.join(positional + keyword)})")
    return _compile(cls, body, names)


def _shape_check(count: int, version: int | None) -> list[str]:
    """Bail on anything but a dict of exactly the fields (and the current version)."""
    if version is None:
        return [f"    if type(o) is not dict or len(o) != {count}:", "        raise __Bail"]
    # ``is``: exactly the int (2.0 and True are not version 2); a big int that is
    # not the cached object only takes the slow path, which accepts it.
    test = f"len(o) != {count + 1} or o[{VERSION_KEY!r}] is not __version"
    return [f"    if type(o) is not dict or {test}:", "        raise __Bail"]


def _field_lines(
    field: attrs.Attribute[Any], tp: Any, var: str, names: dict[str, Any], conv: cattrs.Converter, fresh: bool
) -> list[str]:
    lines = [f"    {var} = o[{field.name!r}]"]
    if tp in _SCALAR_CHECKS and is_ours(conv.get_structure_hook(tp)):
        return [*lines, f"    if type({var}) is not {_SCALAR_CHECKS[tp]}:", "        raise __Bail"]
    if fresh and _inline_union(tp, conv) and checks_in_place(tp):
        return [*lines, *union_check_lines(tp, var, names, fresh=True)]
    if _inline_union(tp, conv):
        return [*lines, *union_copy_lines(tp, var, names)]
    names[f"__h_{var}"] = fast_structure(tp, conv, fresh=fresh)
    return [*lines, f"    {var} = __h_{var}({var})"]


def _inline_union(tp: Any, conv: cattrs.Converter) -> bool:
    """A JSON union (``str | list[dict[str, Any]]``) dispatched inline, when statekit's hook loads it."""
    return plain_union(tp) and is_ours(conv.get_structure_hook(tp))


def _compile(cls: type, body: list[str], names: dict[str, Any]) -> Fast:
    return compile_function("structure(o)", body, names, f"fast structure {cls.__module__}.{cls.__qualname__}")


def with_fallback(fast: Fast, slow: Callable[[Any, Any], Any], tp: Any) -> Fast:
    """Run ``fast``; on any exception run cattrs' detailed hook ``slow``.

    When ``fast`` is cattrs' hook itself, it is not run twice (a user's hook
    or ``from_json`` would see the data twice).
    """
    if getattr(fast, "__statekit_via_cattrs__", False):
        return lambda value: slow(value, tp)

    def structure(value: Any) -> Any:
        try:
            return fast(value)
        except Exception:  # noqa: BLE001 - the detailed hook says what is wrong
            return slow(value, tp)

    return structure
