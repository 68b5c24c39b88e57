"""The generator: per (record class, converter) its dump and loads, as modes of one walk over its fields.

One field list (the record's :class:`~statekit.values.types.RecordShape`) and
one set of hook decisions (each field's :class:`~statekit.values.types.Shape`)
make every mode:

- :data:`Mode.DUMP`, ``unstructure(o)`` for ``state_dict()`` and session saves:
  cattrs' job, with scalars checked and JSON unions dispatched inline (copied,
  or checked in place under the converter a session save encodes with).
  Every other field keeps the converter's own hook.
- :data:`Mode.DUMP_LIST`, ``unstructure_list(value)`` for a list of records: the
  same lines in one loop, and the values under ``Any`` that a save defers to its
  census given to the deferral looked up once for the list, not one call each.
- :data:`Mode.LOAD`, ``structure(o)`` for well-formed data: builds the record
  without tracking paths and raises at the first surprise; the caller then
  runs cattrs' detailed hook (:func:`load_hook`), which either succeeds (a
  missing defaulted key, an extra key) or reports every problem with its path.
  Correct data never pays for reporting.
- :data:`Mode.FRESH`, the same for data fresh from the JSON decoder that nobody
  else holds: JSON values are checked in place, not copied, and what sits
  under ``Any`` is not walked.

Where the converter's hook is not statekit's own (the user registered one), or
loading runs a ``from_json`` below, that hook is used as it is, once.
Generated code gets a linecache name of its own (:mod:`statekit.values.codegen`).
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable
from typing import Any

import cattrs

from statekit.values.annotations import type_hints
from statekit.values.census import defer, deferral
from statekit.values.checks import fast_checker, union_check_lines
from statekit.values.class_cache import MISSING, TypeCache
from statekit.values.codegen import compile_function
from statekit.values.plain import copy_any, dict_copier, fast_copier, list_copier, union_copy_lines
from statekit.values.refusals import wrong_record
from statekit.values.types import Dump, Load, RecordShape, dump_of, generation, record_shape, shape_of
from statekit.values.versions import VERSION_KEY

Fast = Callable[[Any], Any]
Hook = Callable[[Any], Any]

_SCALAR_NAMES = {str: "str", int: "int", bool: "bool"}


class Mode(enum.Enum):
    """What a generated function of a record does."""

    DUMP = "unstructure(o): a live record to plain data"
    DUMP_LIST = "unstructure_list(value): a list of live records to plain data, in one loop"
    LOAD = "structure(o): plain data to a record, JSON values copied"
    FRESH = "structure(o): data fresh from the decoder to a record, JSON values checked in place"


class Bail(Exception):
    """The fast load gives up; the detailed hook takes over."""


def load_hook(tp: Any, conv: cattrs.Converter, *, fresh: bool = False) -> Fast:
    """The load of ``tp``: the generated one, with cattrs' detailed hook when it raises.

    When the Shape leaves ``tp`` to cattrs, its hook runs alone (a user's hook or
    ``from_json`` would see the data twice).

    Args:
        tp: The type to build.
        conv: The converter whose hooks stand behind it.
        fresh: The data comes straight from the JSON codec's decoder and nobody else
            holds it (see :data:`Mode.FRESH`).
    """
    slow = conv.get_structure_hook(tp)
    if shape_of(tp, conv).load is Load.CATTRS:
        return lambda value: slow(value, tp)
    fast = fast_structure(tp, conv, fresh=fresh)

    def structure(value: Any) -> Any:
        try:
            return fast(value)
        except Exception:  # noqa: BLE001 - the detailed hook says what is wrong
            return slow(value, tp)

    return structure


def fast_structure(tp: Any, conv: cattrs.Converter, *, fresh: bool = False) -> Fast:
    """A one-argument structuring function for ``tp`` that raises at the first surprise."""
    shape = shape_of(tp, conv)
    if shape.load is Load.JSON:
        return fast_checker(tp, fresh=True) if fresh else fast_copier(tp)
    if shape.load is Load.LIST:
        return list_copier(fast_structure(typing.get_args(tp)[0], conv, fresh=fresh))
    if shape.load is Load.DICT:
        return dict_copier(fast_structure(typing.get_args(tp)[1], conv, fresh=fresh))
    if shape.load is Load.RECORD:
        return _cached_load(tp, conv, Mode.FRESH if fresh else Mode.LOAD)
    hook = conv.get_structure_hook(tp)
    return lambda value: hook(value, tp)


_loads = TypeCache("fast structure")


def _cached_load(cls: type, conv: cattrs.Converter, mode: Mode) -> Fast:
    """One generated load per (class, converter state, mode), held on the class;
    recursion is late-bound."""
    key = (cls, conv, generation(conv), mode)  # a hook registered later makes new code
    built: Fast | None = _loads.get(key, cls)
    if built is not MISSING:
        return built if built is not None else (lambda value: _loads.get(key, cls)(value))
    _loads.put(key, cls, None)  # being generated: a recursive field looks it up when called
    try:
        built = generate(cls, conv, mode)
    except BaseException:
        _loads.pop(key, cls)
        raise
    _loads.put(key, cls, built)
    return built


def generate(cls: type, conv: cattrs.Converter, mode: Mode) -> Fast:
    """Generate the ``mode`` function of an attrs record under ``conv``.

    Args:
        cls: The record class (every field an ``__init__`` argument, for the loads).
        conv: The converter whose hooks the fields use.
        mode: Which function.
    """
    record = record_shape(cls)
    hints = record.hints if record.hints is not None else type_hints(cls)  # raises: a name not defined yet
    names: dict[str, Any] = {"__cl": cls}
    body = _head(record, mode, names)
    values: list[str] = []  # a dump's items; a load's arguments, one per field
    dumping, add = mode in (Mode.DUMP, Mode.DUMP_LIST), "__add" if mode is Mode.DUMP_LIST else None
    for index, field in enumerate(record.fields):
        if not field.init:
            continue  # cattrs leaves init=False out of a dump too (a load never gets here)
        var, tp = f"a{index}", hints.get(field.name, Any)
        if dumping:
            body.append(f"    {var} = o.{field.name}")
            body.extend(_dump_lines(tp, var, names, conv, add))
            values.append(f"{field.name!r}: {var}")
        else:
            body.append(f"    {var} = o[{field.name!r}]")
            body.extend(_load_lines(tp, var, names, conv, mode is Mode.FRESH))
            values.append(var)
    where = f"{cls.__module__}.{cls.__qualname__}"
    if mode is Mode.DUMP:
        body.append(f"    return {{{', '.join(values)}}}")
        return compile_function("unstructure(o)", body, names, f"unstructure {where}")
    if mode is Mode.DUMP_LIST:
        return compile_function("unstructure_list(value)", _looped(body, values, names), names, f"unstructure list {where}")
    body.append(f"    return {record.call('__cl', values)}")
    return compile_function("structure(o)", body, names, f"fast structure {where}")


def _looped(body: list[str], values: list[str], names: dict[str, Any]) -> list[str]:
    """A record's dump lines (over ``o``) as the loop of :data:`Mode.DUMP_LIST` over ``value``."""
    names["__deferral"] = deferral  # where the values under Any go, for the save running in this thread
    head = ["    __add = __deferral()", "    __out = []", "    __append = __out.append"]
    loop = [f"    {line}" for line in body]
    return [*head, "    for o in value:", *loop, f"        __append({{{', '.join(values)}}})", "    return __out"]


def _head(record: RecordShape, mode: Mode, names: dict[str, Any]) -> list[str]:
    """A dump refuses another class; a load bails on anything but a dict of exactly the fields (and the current version)."""
    if mode in (Mode.DUMP, Mode.DUMP_LIST):
        names["__wrong"] = wrong_record(names["__cl"])
        return ["    if type(o) is not __cl:", "        __wrong(o)"]
    names.update({"__Bail": Bail, "__copy": copy_any, "__version": record.version})
    count = len(record.fields)
    if record.version is None:
        return [f"    if type(o) is not dict or len(o) != {count}:", "        raise __Bail"]
    # ``is``: exactly the int (2.0 and True are not version 2); a big int that is
    # not the cached object only takes the slow path, which accepts it.
    test = f"len(o) != {count + 1} or o[{VERSION_KEY!r}] is not __version"
    return [f"    if type(o) is not dict or {test}:", "        raise __Bail"]


def _dump_lines(tp: Any, var: str, names: dict[str, Any], conv: cattrs.Converter, add: str | None) -> list[str]:
    """The dump of ``var`` (of ``tp``); ``add``: the local holding the census's deferral (:data:`Mode.DUMP_LIST`)."""
    how, kind = dump_of(tp, conv)
    if how is Dump.IDENTITY:
        return []
    if how is Dump.SCALAR:
        names[f"__h_{var}"], names[f"__k_{var}"] = conv.get_unstructure_hook(tp), kind
        return [f"    if type({var}) is not __k_{var}:", f"        __h_{var}({var})"]
    if how is Dump.UNION_COPY:
        return union_copy_lines(tp, var, names)
    if how is Dump.UNION_CHECK:
        return union_check_lines(tp, var, names, fresh=False, add=add)
    hook = conv.get_unstructure_hook(tp)
    if add is not None and hook is defer:  # a value under Any, checked in the save's census: given as it is
        return [f"    {add}({var})"]
    names[f"__h_{var}"] = hook
    return [f"    {var} = __h_{var}({var})"]


def _load_lines(tp: Any, var: str, names: dict[str, Any], conv: cattrs.Converter, fresh: bool) -> list[str]:
    shape = shape_of(tp, conv)
    if shape.scalar is not None:
        return [f"    if type({var}) is not {_SCALAR_NAMES[shape.scalar]}:", "        raise __Bail"]
    if fresh and shape.in_place:
        return union_check_lines(tp, var, names, fresh=True)
    if shape.union:
        return union_copy_lines(tp, var, names)
    names[f"__h_{var}"] = fast_structure(tp, conv, fresh=fresh)
    return [f"    {var} = __h_{var}({var})"]


__all__ = ["Bail", "Mode", "fast_structure", "generate", "load_hook"]
