"""History's storage contract: what a save that keeps history asks its store to do atomically, and what ``keep_history=`` accepts.

A session that keeps history (docs/history.md) stores its past revisions as
blobs beside the head, each named by its revision and holding exactly the bytes
the head held then (what ``Storage._read`` returned, deltas included). Blobs
never change once written, so a blob of a given name is always right.
"""

from __future__ import annotations

from typing import Any

import msgspec

from statekit.errors import SessionError
from statekit.session._history_index import HeadHistory


class IndexChange(msgspec.Struct, frozen=True, gc=False):
    """What a write does to the index a backend keeps beside the head (``history_beside``, see
    :mod:`._history_beside`): the records it puts first, and how many records the index keeps then.

    Attributes:
        records: Records to put first, each a line of JSON, newest first (``b""``: none).
        replace: Whether they replace the index (else they go before the records it holds).
        keep: How many records the index keeps (``None``: all). The blobs that only records no
            longer listed (cut off, or replaced) are in are removed in the same step.
        listed: How many of the stored records the replaced head still lists (``None``: all): those
            its delta lines pushed past its retention go first, as if cut off.

    As :class:`Archive`: made at every save that keeps history (C, not tracked by the cyclic collector).
    """

    records: bytes
    replace: bool
    keep: int | None
    listed: int | None = None


class Archive(msgspec.Struct, frozen=True, gc=False):
    """The history part of one compare-and-set (:meth:`~._storage.Storage._write_keeping`).

    Attributes:
        keep_as: Store the bytes stored now (the old head) as the blob of this name
            before replacing them (``None``: the old head is not kept, e.g. nothing is stored).
        drop: Blobs to remove once the new head is written (revisions pruned by it).
        index: On a backend that keeps the index beside the head, what the write does to it
            (then ``drop`` is empty: the backend finds what the index no longer names).

    A frozen :class:`msgspec.Struct` (made at every save that keeps history: its ``__init__`` is C), not
    tracked by the cyclic collector: it holds only strings, bytes and an :class:`IndexChange`, so no cycle.
    """

    keep_as: str | None
    drop: tuple[str, ...] = ()
    index: IndexChange | None = None


def checked_keep(keep_history: Any, backend: type, *, supports: bool) -> int | None:
    """``keep_history=`` as given to a session's constructor (or ``open()``), checked.

    ``0`` (the default) keeps no past revision, ``N`` the N most recent, ``None`` all of them.

    Raises:
        SessionError: Not ``None`` or an integer >= 0, or the backend keeps no history.
    """
    if keep_history is not None and (
        not isinstance(keep_history, int) or isinstance(keep_history, bool) or keep_history < 0
    ):
        raise SessionError(
            f"keep_history should be an integer >= 0 (how many past revisions to keep) or None (keep all), "
            f"got {keep_history!r}"
        )
    if keep_history != 0 and not supports:
        raise SessionError(f"{backend.__name__} does not keep history (supports_history is false): use keep_history=0")
    return keep_history


class Step:
    """What one write does to a session's history (planned by :func:`~._history.plan`), for that write only.

    Attributes:
        head: The new head's history index (``None``: the head keeps no history any more).
    """

    __slots__ = ("_archive", "head")

    def __init__(self, archive: Archive, head: HeadHistory | None) -> None:
        self._archive: Archive | None = archive
        self.head = head

    def archive(self) -> Archive:
        """What the backend's ``_write_keeping`` keeps and drops, handed over once: the step keeps the head's
        index alone, so that nothing of the archive is held while the write waits (beyond what the backend
        holds itself: a Redis write packs it in its arguments at once)."""
        archive, self._archive = self._archive, None
        assert archive is not None, "a step is written once"
        return archive

    def meta(self, *, json: bool) -> dict[str, Any] | None:
        """The history index the new head document's metadata holds (``None``: none); ``json``: for an
        orjson codec (see :meth:`~._history_index.HeadHistory.as_meta`)."""
        return None if self.head is None else self.head.as_meta(json=json)
