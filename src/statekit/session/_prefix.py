"""The saved items of an append-only list, and whether a live list still starts with exactly them.

A :class:`Prefix` is the first ``length`` items of a snapshot list that only
ever grows at its end: a save that appends ``k`` items extends the snapshot by
those ``k`` (O(new items)) instead of copying the whole list, and the prefixes
taken from one snapshot share it. A prefix whose snapshot another one already
extended is copied before it grows (two saves from one base: rare).

Whether a live list still starts with the saved items is a question of
identity (items are immutable, so the same object is the same data; an equal
one may not encode the same: ``1`` and ``1.0``). On CPython it is answered by
comparing item pointers: the live list's first ``length`` item pointers are
compared with the saved ones where they lie, by a ``memcmp`` that touches
neither the items nor their reference counts (a fraction of a ns per item,
where a slice, which increments every item's count, costs 2-9 ns and an
identity scan 15-30 ns, each item a cache miss once the list is long). The
compare is one C call that holds the GIL: it reads the array's address and
compares, and the list's length is read just before it with no call or
backward jump between the two, the only places where CPython lets another
thread run, so no other thread can resize the list (and free its array) in
between; the length is read again after it. While a trace or profile function
or a ``sys.monitoring`` tool may run Python code anywhere, the live list is
sliced first instead (one C step, but it increments every item's count), and
the slice, a list of statekit's own, is compared. The snapshot keeps every saved
item alive, so an address that matches is the saved object. The list layout
this reads is checked once, at import, against ``id()``; elsewhere (another
interpreter, a build without the GIL), or when the check fails, the identity
scan runs.
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


Reader = Callable[[list[Any], int], bytes | None]
"""A list's first ``n`` item pointers, copied (``None``: it holds fewer)."""
Matcher = Callable[[list[Any], int, bytearray], bool]
"""Whether a list's first ``n`` item pointers are the first ``n`` of saved ones (compared in place)."""


def _pointer_access() -> tuple[Reader, Matcher] | None:
    """Reading and comparing lists' item pointers, if this interpreter lays lists out as
    CPython does and runs Python code one thread at a time."""
    if sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    try:  # C functions called with the GIL held (PYFUNCTYPE): one step, which no other thread interrupts
        copy = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t)(
            ("PyBytes_FromStringAndSize", ctypes.pythonapi)
        )
    except AttributeError:
        return None
    try:
        compare = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(
            ("memcmp", ctypes.pythonapi)
        )
    except AttributeError:  # not found beside the interpreter (Windows): copy, then compare
        compare = None
    size_at = list.__basicsize__ - 3 * _WORD  # PyListObject: ob_refcnt, ob_type, ob_size, ob_item, allocated
    items_at = list.__basicsize__ - 2 * _WORD
    c_ssize_t, c_void_p, in_place = ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_char * 0

    def read(items: list[Any], n: int) -> bytes | None:
        where = id(items)
        size, array = c_ssize_t.from_address(where + size_at), c_void_p.from_address(where + items_at)
        if size.value < n:
            return None
        # From the length read above to the copy: no call, no backward jump (no thread switch).
        # ``array`` is a view of the list's own field: the call reads the address when it runs.
        pointers: bytes = copy(array, n * _WORD)
        return pointers if size.value >= n else None  # and still as long (nothing in between shrank it)

    def matches(items: list[Any], n: int, saved: bytearray) -> bool:
        if compare is None or len(saved) < n * _WORD:
            head = read(items, n)
            return head is not None and saved.startswith(head)
        where = id(items)
        size, array = c_ssize_t.from_address(where + size_at), c_void_p.from_address(where + items_at)
        view = in_place.from_buffer(saved)  # the saved pointers where they are (not resized while exported)
        try:
            if size.value < n:
                return False
            same: bool = compare(array, view, n * _WORD) == 0  # as in read(): nothing in between
            return same and size.value >= n
        finally:
            del view

    probe = [object() for _ in range(5)]
    expected = b"".join(id(item).to_bytes(_WORD, sys.byteorder) for item in probe)
    saved, other = bytearray(expected), [*probe[:4], object()]
    fits = read(probe, 5) == expected and read(probe[:2], 2) == expected[: 2 * _WORD] and read(probe, 6) is None
    fits = fits and matches(probe, 5, saved) and matches(probe[:3], 3, saved) and not matches(probe[:4], 5, saved)
    fits = fits and not matches(other, 5, saved) and matches(other, 4, saved)
    return (read, matches) if fits else None


_POINTERS, _MATCHES = _pointer_access() or (None, None)


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
        pointers = None if _POINTERS is None else _POINTERS(snapshot, len(snapshot))
        return cls(snapshot, len(snapshot), None if pointers is None else bytearray(pointers))

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
                pointers += _POINTERS(new, len(new)) or b""  # a list of the caller's own: never shorter
        return Prefix(snapshot, self.length + len(new), pointers)

    def starts(self, items: list[Any]) -> bool:
        """Whether ``items`` starts with exactly these items (the same objects, not equal ones)."""
        if len(items) < self.length:
            return False
        if self.pointers is None or _MATCHES is None or _POINTERS is None or not SEAM.pointer_prefixes:
            return all(map(operator.is_, items, itertools.islice(self.snapshot, self.length)))
        if not _watched():  # (a held list is a list, never a subclass: see dump_many)
            with _GROW:  # not while another prefix extends the shared pointers
                return _MATCHES(items, self.length, self.pointers)  # the live list's own array, read in place
        head = items[: self.length]  # a list of our own, made in one C step: no other thread can change it
        if len(head) != self.length:  # shrunk by another thread since the length was read
            return False
        with _GROW:
            return _MATCHES(head, self.length, self.pointers)


_MONITORING = getattr(sys, "monitoring", None)


def _watched() -> bool:
    """Whether Python code may run anywhere in this thread, even between two lines: a trace or
    profile function (a debugger, a profiler written in Python) or a ``sys.monitoring`` tool. A
    live list is then compared through a slice of it, not read in place (see the module's docs)."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return True
    return _MONITORING is not None and any(_MONITORING.get_tool(tool) is not None for tool in range(6))
