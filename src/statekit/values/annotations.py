"""Walking annotations, in one place: type hints, nested types, the fields of records and what kind of class one is."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from typing import Any

import attrs


def type_hints(cls: type) -> dict[str, Any]:
    """Resolve annotations, also against the namespace the class was defined in.

    Raises:
        NameError: An annotation names a class that does not exist yet.
    """
    localns = getattr(cls, "__statekit_localns__", None)
    return typing.get_type_hints(cls, localns=localns)


def hints_or_empty(cls: type) -> dict[str, Any]:
    """:func:`type_hints`, or nothing while an annotation names a class that does not exist yet."""
    try:
        return type_hints(cls)
    except NameError:
        return {}


def is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Literal


def iter_types(tp: Any) -> Iterable[Any]:
    """``tp`` and every type nested in its arguments (for definition checks), depth first.

    A loop rather than nested generators: the walk runs for every hook looked
    up, and a ``yield from`` chain passes each type up through every level.
    """
    found: list[Any] = []
    stack = [tp]
    while stack:
        current = stack.pop()
        found.append(current)
        args = typing.get_args(current)
        if args and not is_literal(current):
            stack.extend([arg for arg in reversed(args) if arg is not Ellipsis])
    return found


def is_record(tp: Any) -> bool:
    """An attrs class or a dataclass."""
    return isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp))


def is_module_class(tp: Any) -> bool:
    """A ``StateModule`` class (or one ``@stateful`` made a module): it carries its plan."""
    return hasattr(tp, "__statekit_plan__")


def fields_of(record: type) -> tuple[Any, ...]:
    """The fields of an attrs class or a dataclass."""
    return tuple(attrs.fields(record)) if attrs.has(record) else dataclasses.fields(record)


def field_types(record: type) -> list[Any]:
    """The annotations of a record's fields (none while one names a class not defined yet)."""
    try:
        hints = type_hints(record)
    except NameError:
        return []
    return [hints.get(f.name, Any) for f in fields_of(record)]


def is_frozen_record(tp: Any) -> bool:
    """Whether ``tp`` is an attrs class whose instances cannot be changed (``frozen=True``)."""
    # attrs has no public test; a frozen class's __setattr__ is its _frozen_setattrs
    setter = getattr(tp, "__setattr__", None)
    return isinstance(tp, type) and attrs.has(tp) and getattr(setter, "__name__", "") == "_frozen_setattrs"


__all__ = [
    "field_types",
    "fields_of",
    "hints_or_empty",
    "is_frozen_record",
    "is_literal",
    "is_module_class",
    "is_record",
    "iter_types",
    "type_hints",
]
