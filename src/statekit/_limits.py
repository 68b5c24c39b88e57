"""Limits that every codec and the state layer share.

A document nested deeper than :data:`MAX_DEPTH` is refused everywhere (every
codec's ``loads`` and ``dumps``, ``state_dict``, loads), with an error that
names the limit and the path or line, before a parser or a recursive function
can overflow the stack.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 200
"""How many dicts/lists a document may nest inside one another.

The outermost container is level 1: ``{"a": [1]}`` has 2 levels. A session
document puts each module's state one level down (under the module's name),
so a state saved in a session may nest ``MAX_DEPTH - 1`` levels. The limit sits
below orjson's own (254 levels when writing) so that every format refuses the
same documents, and far below the depth at which libyaml's recursive composer
crashes the process.
"""

ORJSON_PAD = 254 - MAX_DEPTH
"""Lists to wrap data in so that orjson, which refuses to nest past 254 levels, refuses past ``MAX_DEPTH``."""


def depth_message() -> str:
    """The reason given when a document is too deep."""
    return f"nested deeper than {MAX_DEPTH} levels of mappings and lists (statekit's limit, MAX_DEPTH)"


_COUNTED_BYTES = 1 << 16


def shallow_bytes(raw: bytes) -> bool:
    """Whether a JSON document is certainly within :data:`MAX_DEPTH`, by counting.

    A document with no more than ``MAX_DEPTH`` opening brackets cannot nest
    deeper (brackets inside strings only make the count larger). One C-speed
    pass that keeps only the opening brackets (about 40% less than counting
    each kind), so small sessions skip :func:`too_deep`'s walk.
    """
    if len(raw) > _COUNTED_BYTES:
        return False  # a large document holds more brackets anyway: not worth counting
    return len(raw.translate(None, _NOT_OPENING)) <= MAX_DEPTH


_NOT_OPENING = bytes(byte for byte in range(256) if byte not in b"[{")
"""Every byte but ``[`` and ``{``: what :func:`shallow_bytes` deletes before it counts."""


_DEEP_LINE = b"\n" + b" " * (2 * MAX_DEPTH)


def shallow_indented(raw: bytes) -> bool:
    """Whether JSON that orjson wrote with ``OPT_INDENT_2`` is certainly within :data:`MAX_DEPTH`.

    Every line break in such output is structural (strings escape theirs), and
    a container at level ``L`` opens on a line indented ``2 * (L - 1)`` spaces,
    so one past the limit opens on a line indented ``2 * MAX_DEPTH`` or more.
    No such line: within the limit, found at C speed without a second encoding.
    Such a line (also the items of a container at the limit): ask :func:`too_deep`.
    """
    return _DEEP_LINE not in raw


def too_deep(data: Any) -> bool:
    """Whether plain JSON data nests more than :data:`MAX_DEPTH` containers.

    Fast (orjson does the walk in C, about 1 ms per 3 MB); exact for plain
    JSON data. Data orjson cannot write for another reason (a huge integer, a
    lone surrogate) is walked in Python instead.

    Args:
        data: Plain JSON data, as decoded from a document.

    Returns:
        ``True`` when some container sits below ``MAX_DEPTH`` others.
    """
    padded = data
    for _ in range(ORJSON_PAD):
        padded = [padded]
    try:
        orjson.dumps(padded)
    except orjson.JSONEncodeError as err:
        if "Recursion" in str(err):
            return True
        return path_too_deep(data) is not None
    return False


def too_deep_below(data: Any, level: int) -> tuple[str | int, ...] | None:
    """Where ``data`` nests past :data:`MAX_DEPTH` when it sits ``level`` containers
    down in a document (a value at the path ``p`` sits ``len(p)`` down); ``None`` when it fits.

    For data encoded apart from its document: a delta's items, a secret's value.
    """
    padded = data
    for _ in range(level):
        padded = [padded]
    if not too_deep(padded):
        return None
    return (path_too_deep(padded) or ())[level:]


def path_too_deep(data: Any) -> tuple[str | int, ...] | None:
    """The path of the first container nested past :data:`MAX_DEPTH`, if any.

    Iterative (no recursion), for error messages.

    Args:
        data: Plain JSON data (tuples count as lists).

    Returns:
        The path from the root, or ``None`` when the data is within the limit.
    """
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict | list | tuple):
            if len(path) >= MAX_DEPTH:
                return path
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend(reversed([((*path, key), item) for key, item in items]))
    return None
