"""The strict hooks for containers (lists, tuples, sets, mappings)."""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from typing import Any

import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory, mapping_structure_factory
from cattrs.errors import IterableValidationError, IterableValidationNote

from statekit.values.plain import copy_any, describe, expected_name, is_json_type, type_name
from statekit.values.types import Role, made
from statekit.values.refusals import exactly

Hook = Callable[[Any], Any]
SHook = Callable[[Any, Any], Any]


def is_collection(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return origin in (list, tuple, set, frozenset, dict) or (
        isinstance(origin, type)
        and origin.__module__ == "collections.abc"
        and origin.__name__ in ("Sequence", "MutableSequence", "Set", "MutableSet", "Mapping", "MutableMapping")
    )


def register_collections(conv: cattrs.Converter) -> None:
    """Collections must arrive as JSON lists/objects; sets dump sorted."""

    def structure(tp: Any, conv: cattrs.Converter) -> SHook:
        if is_mapping(tp):
            return guarded(mapping_structure_factory(tp, conv), dict, "an object")
        return guarded(_sequence_structure(conv, tp), list, "a list")

    conv.register_structure_hook_factory(lambda t: is_collection(t) and not is_json_type(t), structure)
    conv.register_unstructure_hook_factory(lambda t: _is_set(t) and not is_json_type(t), _set_unstructure)
    conv.register_unstructure_hook_factory(is_tuple, _tuple_unstructure)


def _sequence_structure(conv: cattrs.Converter, tp: Any) -> SHook:
    if _is_set(tp):
        return _items_structure(conv, tp, frozenset if _origin(tp) is frozenset else set)
    if not is_tuple(tp):
        return list_structure_factory(tp, conv)
    args = typing.get_args(tp)
    if (not args and tp in (tuple, typing.Tuple)) or (len(args) == 2 and args[1] is Ellipsis):  # noqa: UP006
        return homogenous_tuple_structure_factory(tp, conv)
    return _fixed_tuple_structure(conv, tp, args)  # tuple[()] too: no items


def _origin(tp: Any) -> Any:
    return typing.get_origin(tp) or tp


def _items_structure(conv: cattrs.Converter, tp: Any, build: Callable[[list[Any]], Any]) -> SHook:
    args = typing.get_args(tp)
    item = conv.get_structure_hook(args[0]) if args else (lambda v, _: copy_any(v))
    item_type = args[0] if args else Any

    def structure(value: Any, _: Any) -> Any:
        return build(_each(tp, ((item, element, item_type) for element in value)))

    return structure


def _fixed_tuple_structure(conv: cattrs.Converter, tp: Any, args: tuple[Any, ...]) -> SHook:
    hooks = [conv.get_structure_hook(a) for a in args]

    def structure(value: Any, _: Any) -> Any:
        if len(value) != len(args):
            raise ValueError(f"expected a list of {len(args)} items, got {len(value)}")
        return tuple(_each(tp, zip(hooks, value, args, strict=True)))

    return structure


def _each(tp: Any, jobs: Iterable[tuple[SHook, Any, Any]]) -> list[Any]:
    """Structure every ``(hook, item, item type)``; raise one error naming every bad index."""
    out, errors = [], []
    for index, (hook, item, item_type) in enumerate(jobs):
        try:
            out.append(hook(item, item_type))
        except Exception as exc:  # noqa: BLE001 - collected with its index
            errors.append(_noted(exc, index, item_type))
    if errors:
        raise IterableValidationError(f"While structuring {type_name(tp)}", errors, tp)
    return out


def _noted(exc: Exception, index: int, item_type: Any) -> Exception:
    exc.__notes__ = [*getattr(exc, "__notes__", []), IterableValidationNote(f"@ index {index}", index, item_type)]
    return exc


def guarded(inner: SHook, expected: type, what: str) -> SHook:
    def structure(value: Any, tp: Any) -> Any:
        if type(value) is not expected:
            raise TypeError(f"expected {what}, got {describe(value)}")
        return inner(value, tp)

    return made(structure, Role.LOADS)


def is_mapping(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return origin is dict or getattr(origin, "__name__", "") in ("Mapping", "MutableMapping")


def _is_set(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return origin in (set, frozenset) or getattr(origin, "__name__", "") in ("Set", "MutableSet")


def is_tuple(tp: Any) -> bool:
    return (typing.get_origin(tp) or tp) is tuple


def exact_container(tp: Any, dump: Hook) -> Hook:
    """``dump``, refusing a value whose class is not exactly ``tp``'s container: a tuple or a
    set written as a list would load back as another value (an iterator would be used up)."""
    return exactly(typing.get_origin(tp) or tp, dump, expected_name(tp))


def _set_unstructure(tp: Any, conv: cattrs.Converter) -> Hook:
    args = typing.get_args(tp)
    item = conv.get_unstructure_hook(args[0]) if args else copy_any

    def unstructure(value: Any) -> list[Any]:
        items = [item(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items  # unorderable items keep iteration order

    return exact_container(tp, unstructure)


def _tuple_unstructure(tp: Any, conv: cattrs.Converter) -> Hook:
    args = typing.get_args(tp)
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        item = conv.get_unstructure_hook(args[0]) if args else copy_any
        return exact_container(tp, lambda value: [item(v) for v in value])
    hooks = [conv.get_unstructure_hook(a) for a in args]
    return exact_container(tp, lambda value: [h(v) for h, v in zip(hooks, value, strict=True)])
