"""The saved items of an append-only list, and whether a live list still starts with exactly them.

A :class:`Prefix` is the first ``length`` items of a snapshot list that only
ever grows at its end: a save that appends ``k`` items extends the snapshot by
those ``k`` (O(new items)) instead of copying the whole list, and the prefixes
taken from one snapshot share it. A prefix whose snapshot another one already
extended is copied before it grows (two saves from one base: rare).

Whether a live list still starts with the saved items is a question of
identity (items are immutable, so the same object is the same data; an equal
one may not encode the same: ``1`` and ``1.0``). On CPython it is answered by
comparing item pointers: the live list's first ``length`` items are sliced
into a list of statekit's own (one C step, so no other thread can change it
while it is read), whose array of item pointers is copied as bytes and
compared with the saved ones by a ``memcmp`` that does not touch the items
(a few ns per item, where a Python-level identity scan costs 15-30 ns). The
snapshot keeps every saved item alive, so an address that matches is the saved
object. Only lists statekit made are read this way, never the live one. The
list layout this reads is checked once, at import, against ``id()``; elsewhere,
or when the check fails, the identity scan runs.
"""

from __future__ import annotations

import ctypes
import itertools
import operator
import sys
import threading
from collections.abc import Callable
from typing import Any

import attrs

from statekit.values.seam import SEAM

_GROW = threading.Lock()
"""Extending a shared snapshot is check-then-extend: one at a time (loops in several threads)."""


_WORD = ctypes.sizeof(ctypes.c_void_p)


def _pointer_reader() -> Callable[[list[Any], int], bytes] | None:
    """Reads the first ``n`` item pointers of a list, if this interpreter lays lists out as CPython does."""
    if sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    offset = list.__basicsize__ - 2 * _WORD  # PyListObject ends with ob_item, then allocated

    def read(items: list[Any], n: int) -> bytes:
        return ctypes.string_at(ctypes.c_void_p.from_address(id(items) + offset), n * _WORD)

    probe = [object() for _ in range(5)]
    expected = b"".join(id(item).to_bytes(_WORD, sys.byteorder) for item in probe)
    return read if read(probe, 5) == expected and read(probe[:2], 2) == expected[: 2 * _WORD] else None


_POINTERS = _pointer_reader()


@attrs.frozen(eq=False)  # compared by identity: equality would compare every item
class Prefix:
    """The items a list held when it was last saved (or loaded).

    Attributes:
        snapshot: The items, and possibly more that a later prefix of it added.
        length: How many of them are this prefix.
        pointers: The snapshot's item pointers, grown and shared with it (``None``: not CPython's layout).
    """

    snapshot: list[Any] = attrs.field(repr=False)
    length: int
    pointers: bytearray | None = attrs.field(default=None, repr=False)

    @classmethod
    def of(cls, items: list[Any]) -> Prefix:
        """All of ``items``, copied (after a full write or a load)."""
        snapshot = list(items)
        return cls(snapshot, len(snapshot), None if _POINTERS is None else bytearray(_POINTERS(snapshot, len(snapshot))))

    def grown(self, new: list[Any]) -> Prefix:
        """This prefix followed by ``new`` (the items a delta just stored: a list of the caller's own)."""
        if not new:
            return self
        with _GROW:
            snapshot, pointers = self.snapshot, self.pointers
            if len(snapshot) != self.length:  # another prefix grew it past this one: branch off
                snapshot = snapshot[: self.length]
                pointers = None if pointers is None else pointers[: self.length * _WORD]
            snapshot.extend(new)
            if pointers is not None and _POINTERS is not None:
                pointers += _POINTERS(new, len(new))
        return Prefix(snapshot, self.length + len(new), pointers)

    def starts(self, items: list[Any]) -> bool:
        """Whether ``items`` starts with exactly these items (the same objects, not equal ones)."""
        if len(items) < self.length:
            return False
        if self.pointers is not None and _POINTERS is not None and SEAM.pointer_prefixes:
            head = items[: self.length]  # a list of our own, made in one C step: no other thread can change it
            if len(head) != self.length:  # shrunk by another thread since the length was read
                return False
            with _GROW:  # not while another prefix extends the shared pointers
                return self.pointers.startswith(_POINTERS(head, self.length))
        return all(map(operator.is_, items, itertools.islice(self.snapshot, self.length)))
