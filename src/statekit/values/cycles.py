"""Explaining state that nests too deep: a cycle, or plain depth past ``MAX_DEPTH``.

Only failures come here: the dump and load paths count module depth (one
``len`` per module) and let the fast copiers overflow on a cyclic value; these
iterative walkers then say where the state closes on itself, or where it
crosses the limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import attrs

from statekit._limits import MAX_DEPTH, depth_message, path_too_deep
from statekit.errors import PathSegment, Problem, format_path

Path = tuple[PathSegment, ...]


class TooDeep(Exception):
    """Raised by the dump walk when a module sits ``MAX_DEPTH`` levels down.

    Attributes:
        path: Where, from the root of the walk.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(format_path(path))
        self.path = path


def module_problem(root: object, start: Path, path: Path) -> Problem:
    """Why the module at ``path`` is too deep: the owner chain loops, or is just long.

    Args:
        root: The module at ``start``.
        start: Path of ``root`` (``()`` for ``state_dict()``, ``(name,)`` in a session).
        path: The path :class:`TooDeep` carried.
    """
    seen = {id(root): start}
    current = root
    for index in range(len(start), len(path)):
        current = getattr(current, str(path[index]))
        where = path[: index + 1]
        if id(current) in seen:
            return Problem(where, _cycle_message(seen[id(current)]))
        seen[id(current)] = where
    return Problem(path, depth_message())


def value_problem(value: Any, path: Path) -> Problem:
    """Why a value could not be copied for lack of stack: a cycle, or its depth.

    Args:
        value: The value of the field at ``path``.
        path: The field's path.
    """
    closing = _value_cycle(value)
    if closing is not None:
        where, first = closing
        return Problem((*path, *where), _cycle_message((*path, *first)))
    deep = path_too_deep(value)
    return Problem((*path, *(deep or ())), depth_message())


def _cycle_message(first: Path) -> str:
    return f"the state contains itself: this is the same object as {format_path(first)}, a cycle that cannot be saved"


def _value_cycle(value: Any) -> tuple[Path, Path] | None:
    """The path where a container first holds one of its ancestors, and that ancestor's path."""
    ancestors: dict[int, Path] = {}
    stack: list[tuple[Path, Any, bool]] = [((), value, False)]
    while stack:
        path, item, leaving = stack.pop()
        if leaving:
            del ancestors[id(item)]
            continue
        if not _is_container(item) or len(path) > 4 * MAX_DEPTH:
            continue
        if id(item) in ancestors:
            return path, ancestors[id(item)]
        ancestors[id(item)] = path
        stack.append((path, item, True))
        stack.extend(reversed([((*path, key), child, False) for key, child in _children(item)]))
    return None


def _is_container(item: Any) -> bool:
    kind = type(item)
    return isinstance(item, dict | list | tuple | set | frozenset) or attrs.has(kind) or dataclasses.is_dataclass(kind)


def _children(item: Any) -> Iterator[tuple[PathSegment, Any]]:
    if isinstance(item, dict):
        return ((str(key), child) for key, child in item.items())
    if isinstance(item, list | tuple | set | frozenset):
        return enumerate(item)
    names = [f.name for f in (attrs.fields(type(item)) if attrs.has(type(item)) else dataclasses.fields(item))]
    return ((name, getattr(item, name, None)) for name in names)
