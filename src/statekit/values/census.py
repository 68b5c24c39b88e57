"""Checking JSON data under ``Any`` before a save encodes it: at once, or in one census.

orjson refuses objects, sets, bytes, non-string keys, integers beyond 64 bits
and subclasses (with statekit's options), but writes NaN and infinities as
``null``, tuples as arrays and enums as their values without a word. So a save
checks every value under ``Any`` itself. :func:`check_any` walks one value in
Python. A live dump (:func:`checks_deferred`) instead collects the values and
checks them all at the end with :func:`all_json`, level by level in C: on a
large save that is a third of the walk's time. When the census finds
something, the dump runs again checking value by value, which names the first
bad value in dump order as before.
"""

from __future__ import annotations

import gc
import math
import operator
import threading
from collections.abc import Callable
from itertools import compress, repeat
from typing import Any, TypeVar

from statekit.values.plain import NONE_TYPE, PLAIN_SCALARS, BadValue
from statekit.values.seam import SEAM
from statekit._limits import MAX_DEPTH

T = TypeVar("T")


_all_plain = PLAIN_SCALARS.issuperset  # bound once: the method lookup is 14% of the walk


def check_any(value: Any) -> Any:
    """Validate JSON data about to be encoded by orjson, in place; return it.

    orjson itself refuses non-string keys, objects, sets, bytes, integers
    beyond 64 bits and subclasses (with statekit's options); this walk refuses
    what it would write without a word: NaN and infinities (as ``null``),
    tuples (as arrays), enums and UUIDs (as their values). Containers of plain
    scalars only are checked in C (``issuperset`` over their item types).
    """
    kind = type(value)
    if kind is dict:
        items: Any = value.values()
    elif kind is list:
        items = value
    elif kind in PLAIN_SCALARS or (kind is float and value - value == 0.0):
        return value
    else:
        raise BadValue
    if not _all_plain(map(type, items)):
        for item in items:
            if type(item) not in PLAIN_SCALARS:
                check_any(item)
    return value


class _Deferral(threading.local):
    """Where this thread's save checkers send the values under ``Any``: to
    :func:`check_any` at once, or to the list of a :func:`checks_deferred` run."""

    add: Callable[[Any], object] = staticmethod(check_any)


_deferral = _Deferral()


def defer(value: Any) -> Any:
    """The save checkers' check of a value under ``Any``: at once, or deferred to the census."""
    _deferral.add(value)
    return value


def deferral() -> Callable[[Any], object]:
    """What :func:`defer` sends a value to in this thread now (:func:`check_any`, or the census's
    ``append``): a generated dump of a list of records looks it up once for all its values."""
    return _deferral.add


def checks_deferred(build: Callable[[], T]) -> T:
    """Run ``build`` (a live dump) with the checks of values under ``Any`` deferred to one census.

    Walking JSON data value by value in Python is most of a large save's checking;
    :func:`all_json` checks all of it at C speed instead. When the census finds
    something (or ``build`` raises and the census finds something before it),
    ``build`` runs again checking at once, which refuses the first bad value in
    dump order and names it, as it would have without deferring (counted in
    ``SEAM.rechecks``). With ``SEAM.deferring`` off, ``build`` checks at once.
    """
    if not SEAM.deferring:
        return _checking_at_once(build)
    pending: list[Any] = []
    outer, _deferral.add = _deferral.add, pending.append
    try:
        result = build()
        fine = all_json(pending)
    except Exception:
        if all_json(pending):
            raise  # the values before the failure are fine: it is the first problem
        fine = False  # run again outside this block: its error must not chain to this one
    finally:
        _deferral.add = outer
    if fine:
        return result
    SEAM.rechecks += 1
    return _checking_at_once(build)


def _checking_at_once(build: Callable[[], T]) -> T:
    outer, _deferral.add = _deferral.add, check_any
    try:
        return build()
    finally:
        _deferral.add = outer


_JSON_KINDS = frozenset((str, int, bool, NONE_TYPE, dict, list))
_WITH_FLOAT = _JSON_KINDS | {float}
_LEVEL_CAP = 1 << 22
"""Items one level may hold: only shared values (a DAG) get near it; the census then defers to the walk."""


def all_json(values: list[Any]) -> bool:
    """Whether :func:`check_any` accepts every one of ``values``, checked at C speed.

    Level by level: the exact types of the items (dict keys included, which
    only makes it stricter), finite floats, then ``gc.get_referents`` collects
    every item one level down (dicts and lists have referents; scalars none).
    ``False`` may also mean "could not tell" (deeper than any document may nest,
    a cycle, a huge DAG): the caller then checks value by value.
    """
    return all(_all_json(values[start : start + _CHUNK]) for start in range(0, len(values), _CHUNK))


_CHUNK = 1024
"""Values checked together: a large save's values no longer fit the CPU caches level by
level (the census of 100,000 messages takes 48 ms whole, 21 ms in chunks)."""


def _all_json(values: list[Any]) -> bool:
    level = values
    for _ in range(MAX_DEPTH + 2):  # MAX_DEPTH levels of containers, their scalars, then nothing
        if not level:
            return True
        if len(level) > _LEVEL_CAP or not (_JSON_KINDS.issuperset(map(type, level)) or _finite_floats(level)):
            return False
        level = gc.get_referents(*level)
    return False


def _finite_floats(level: list[Any]) -> bool:
    """Whether ``level`` holds only JSON kinds and floats, all of them finite."""
    if not _WITH_FLOAT.issuperset(map(type, level)):
        return False
    return all(map(math.isfinite, compress(level, map(operator.is_, map(type, level), repeat(float)))))


__all__ = ["all_json", "check_any", "checks_deferred", "defer", "deferral"]
