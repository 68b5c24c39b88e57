"""The saved items of an append-only list, and whether a live list still starts with exactly them.

A :class:`Prefix` is the first ``length`` items of a snapshot list that only
ever grows at its end: a save that appends ``k`` items extends the snapshot by
those ``k`` (O(new items)) instead of copying the whole list, and the prefixes
taken from one snapshot share it. A prefix whose snapshot another one already
extended is copied before it grows (two saves from one base: rare).
"""

from __future__ import annotations

import itertools
import operator
import threading
from typing import Any

import attrs

_GROW = threading.Lock()
"""Extending a shared snapshot is check-then-extend: one at a time (loops in several threads)."""


@attrs.frozen
class Prefix:
    """The items a list held when it was last saved (or loaded).

    Attributes:
        snapshot: The items, and possibly more that a later prefix of it added.
        length: How many of them are this prefix.
    """

    snapshot: list[Any] = attrs.field(repr=False)
    length: int

    @classmethod
    def of(cls, items: list[Any]) -> Prefix:
        """All of ``items``, copied (after a full write or a load)."""
        return cls(list(items), len(items))

    def grown(self, new: list[Any]) -> Prefix:
        """This prefix followed by ``new`` (the items a delta just stored)."""
        if not new:
            return self
        with _GROW:
            snapshot = self.snapshot
            if len(snapshot) != self.length:  # another prefix grew it past this one: branch off
                snapshot = snapshot[: self.length]
            snapshot.extend(new)
        return Prefix(snapshot, self.length + len(new))

    def starts(self, items: list[Any]) -> bool:
        """Whether ``items`` starts with exactly these items (the same objects, not equal ones)."""
        if len(items) < self.length:
            return False
        return all(map(operator.is_, items, itertools.islice(self.snapshot, self.length)))
