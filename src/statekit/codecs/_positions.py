"""Shared helpers of the codecs: positions of paths and the first bad value.

Nothing here runs on the hot path: a codec calls these only after a dump or a
load has already failed, to say *where*.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from statekit._limits import depth_message, path_too_deep
from statekit.errors import PathSegment, Problem

Path = tuple[PathSegment, ...]
"""A path from the root of a document: keys as ``str``, indices as ``int``."""

Position = tuple[int, int]
"""A 1-based ``(line, column)``."""

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1


def nearest(found: Mapping[Path, Position], targets: Iterable[Path]) -> dict[Path, Position]:
    """Give every target the position of its longest prefix that was found.

    A missing key is reported at the mapping that lacks it, so even a
    "missing required field" names a line.

    Args:
        found: Positions of the paths that exist in the document.
        targets: The paths asked for.

    Returns:
        ``target -> position`` for every target with a located prefix.
    """
    out: dict[Path, Position] = {}
    for target in targets:
        for depth in range(len(target), -1, -1):
            position = found.get(target[:depth])
            if position is not None:
                out[target] = position
                break
    return out


def prefixes(targets: Iterable[Path]) -> set[Path]:
    """Every prefix of every target (the root ``()`` included)."""
    return {target[:depth] for target in targets for depth in range(len(target) + 1)}


def line_columns(text: str, offsets: Iterable[int]) -> dict[int, Position]:
    """Map character offsets in ``text`` to 1-based ``(line, column)``.

    Args:
        text: The decoded document.
        offsets: Character offsets, in any order.

    Returns:
        ``offset -> (line, column)``; one pass over the text in total.
    """
    out: dict[int, Position] = {}
    line, start, previous = 1, 0, 0
    for offset in sorted(set(offsets)):
        line += text.count("\n", previous, offset)
        if line > 1:
            start = text.rfind("\n", 0, offset) + 1
        out[offset] = (line, offset - start + 1)
        previous = offset
    return out


def first_bad_value(data: Any, *, int64: bool) -> Problem:
    """Find the first value in ``data`` that is not plain JSON data.

    Called after a codec refused ``data``, to name the offending path.

    Args:
        data: The document the codec refused.
        int64: Whether integers must fit in 64 bits (orjson's limit).

    Returns:
        A problem naming the path and what is wrong there; a problem at the
        root when nothing specific is found.
    """
    deep = path_too_deep(data)
    if deep is not None:
        return Problem(deep, depth_message())
    stack: list[tuple[Path, Any]] = [((), data)]
    seen: set[int] = set()
    while stack:
        path, value = stack.pop()
        message = value_problem(value, int64)
        if message is None and isinstance(value, dict | list | tuple):
            message = "the same container appears twice (or holds itself)" if id(value) in seen else None
            seen.add(id(value))
            stack.extend(reversed(_children(path, value)))
        if message is not None:
            return Problem(path, message)
    return Problem((), "the document could not be encoded")


def _children(path: Path, value: dict[str, Any] | list[Any] | tuple[Any, ...]) -> list[tuple[Path, Any]]:
    if isinstance(value, dict):
        return [((*path, key), item) for key, item in value.items()]
    return [((*path, index), item) for index, item in enumerate(value)]


def value_problem(value: Any, int64: bool) -> str | None:
    """What is wrong with one value as JSON data, or ``None`` (its items are not looked at)."""
    kind = type(value)
    if kind is str:
        return _text_problem(value)
    if kind is int:
        return _int_problem(value, int64)
    if kind is dict:
        return _key_problem(value)
    if value is None or kind in (bool, int, float, list, tuple):
        return None
    return f"{kind.__name__} is not JSON data (use str, int, float, bool, None, list or dict)"


def _int_problem(value: int, int64: bool) -> str | None:
    if int64 and not _INT64_MIN <= value <= _UINT64_MAX:
        return (
            f"an integer of {value.bit_length()} bits; orjson, statekit's JSON writer, holds integers "
            "from -2**63 to 2**64-1 (JSON itself sets no limit): write it as a string"
        )
    try:
        str(value)
    except ValueError:
        limit = sys.get_int_max_str_digits()
        return f"an integer of more than {limit:,} digits (Python's limit); write it as a string"
    return None


def _key_problem(mapping: dict[Any, Any]) -> str | None:
    for key in mapping:
        if type(key) is not str:
            return f"mapping keys must be strings, not {type(key).__name__} ({key!r})"
        problem = _text_problem(key)
        if problem is not None:
            return f"key {key!r}: {problem}"
    return None


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"the text has a lone surrogate {text[err.start]!r} at index {err.start}, which UTF-8 cannot hold"
    return None
