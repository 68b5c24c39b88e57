"""What differs between two session documents, one line per field path, in document order (``statekit diff``).

Paths are written as statekit's errors write them (:func:`statekit.errors.format_path`):
``agent.memory.content[41]``, ``tags["a.b"]``. The lines are::

    notes: module added                       (or: module removed)
    agent.turns: 3 -> 4                       (a value changed; also a change of type)
    agent.memory.content[41]: added {"role": "user", ...}
    agent.memory.content[3]: removed "..."

Values are compact JSON, cut at :data:`WIDTH` characters; an encrypted secret is
``<secret>`` (never opened: two differ when their stored tokens do). Values
compare strictly (``1``, ``1.0`` and ``true`` differ). Lists are matched item by
item around their common start and end, so an item inserted or removed in the
middle is one line; indices of removed items are their places in the old
document, of added and changed ones their places in the new one.
"""

from __future__ import annotations

import collections
import difflib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from statekit.errors import PathSegment, format_path
from statekit.values.secrets import MASK, is_sealed, mask_secrets

WIDTH: Final = 80
"""The longest value a line shows (longer ones end with ``...``)."""

MATCHING_STEPS: Final = 4_000_000
"""Above this many pairs of equal items between the differing parts of two lists (the matcher's work grows with
them: a list of one item repeated is quadratic), the parts are compared place by place rather than matched."""


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[str]:
    """The lines saying how the modules of ``new`` differ from those of ``old`` (none: equal)."""
    for name in _keys(old, new):
        if name not in new:
            yield f"{format_path((name,))}: module removed"
        elif name not in old:
            yield f"{format_path((name,))}: module added"
        else:
            yield from _changed(old[name], new[name], (name,))


def _keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The keys of both, in ``old``'s order, then those only ``new`` has, in its order."""
    return [*old, *(key for key in new if key not in old)]


def _changed(old: Any, new: Any, path: tuple[PathSegment, ...]) -> Iterator[str]:
    if same(old, new):
        return
    if type(old) is dict and type(new) is dict and not is_sealed(old) and not is_sealed(new):
        for key in _keys(old, new):
            here = (*path, key)
            if key not in new:
                yield f"{format_path(here)}: removed {shown(old[key])}"
            elif key not in old:
                yield f"{format_path(here)}: added {shown(new[key])}"
            else:
                yield from _changed(old[key], new[key], here)
    elif type(old) is list and type(new) is list:
        yield from _items(old, new, path)
    else:
        yield f"{format_path(path)}: {shown(old)} -> {shown(new)}"


def _items(old: list[Any], new: list[Any], path: tuple[PathSegment, ...]) -> Iterator[str]:
    """The changes between two lists: their common start and end left out, the middle matched item by item."""
    start, shortest = 0, min(len(old), len(new))
    while start < shortest and same(old[start], new[start]):
        start += 1
    old_end, new_end = len(old), len(new)
    while old_end > start and new_end > start and same(old[old_end - 1], new[new_end - 1]):
        old_end, new_end = old_end - 1, new_end - 1
    middle_old, middle_new = old[start:old_end], new[start:new_end]
    for tag, old_from, old_to, new_from, new_to in _blocks(middle_old, middle_new):
        if tag == "equal":
            continue
        paired = min(old_to - old_from, new_to - new_from)
        for offset in range(paired):
            yield from _changed(middle_old[old_from + offset], middle_new[new_from + offset], (*path, start + new_from + offset))
        for index in range(old_from + paired, old_to):
            yield f"{format_path((*path, start + index))}: removed {shown(middle_old[index])}"
        for index in range(new_from + paired, new_to):
            yield f"{format_path((*path, start + index))}: added {shown(middle_new[index])}"


def _blocks(old: list[Any], new: list[Any]) -> Sequence[tuple[str, int, int, int, int]]:
    """How the items of two lists match, as :meth:`difflib.SequenceMatcher.get_opcodes` says it (or place by place)."""
    if not old or not new:
        return [("replace", 0, len(old), 0, len(new))]
    old_keys, new_keys = [_key(item) for item in old], [_key(item) for item in new]
    counts = collections.Counter(new_keys)
    if sum(counts[key] for key in old_keys) > MATCHING_STEPS:
        return [("replace", 0, len(old), 0, len(new))]
    return difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False).get_opcodes()


def same(old: Any, new: Any) -> bool:
    """Whether two plain values are equal, types included (``1``, ``1.0`` and ``True`` differ; NaN equals NaN)."""
    if old is new:
        return True
    if type(old) is not type(new):
        return False
    if type(old) is dict:
        return old.keys() == new.keys() and all(same(value, new[key]) for key, value in old.items())
    if type(old) is list:
        return len(old) == len(new) and all(map(same, old, new))
    return bool(old == new) or (old != old and new != new)


def _key(item: Any) -> str:
    """A list item as a string that two items share only if they are :func:`same` (for matching lists)."""
    try:
        return json.dumps(item, sort_keys=True, default=repr)
    except TypeError:  # keys of several types (not JSON data) cannot be sorted
        return repr(item)


def shown(value: Any) -> str:
    """A value as a line shows it: compact JSON on one line, secrets masked, cut at :data:`WIDTH` characters."""
    if is_sealed(value):
        return MASK
    text = json.dumps(mask_secrets(value), ensure_ascii=False, separators=(", ", ": "), default=repr)
    text = "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in text)
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."
