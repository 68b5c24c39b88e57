"""The history's records kept beside the head (``history_beside``: Redis): what a write puts first, how the index is cut, reading it back.

A backend with ``history_beside`` keeps a session's kept records in its own
store, not in the head document: one record per line of JSON, newest first,
each one whole (its parent and modules always said, so that any cut of the
index reads alone). The head's metadata names the newest record kept there
(``"beside"``, see :mod:`._history_index`), so a reader that reads the head,
then the records, tells whether a write came in between.

A save then plans no index: it sends the records of the head it replaces
(:func:`first_records`) and the retention, and the backend's own atomic step
puts them first, cuts the index to the retention and removes the blobs that
only the records cut off are in (:func:`advance` is that step in Python: the
``WATCH`` twin runs it, and the Lua script does the same). The head's
document, hashed, sent and read at every turn, stays as small as without
history.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

import attrs
import msgspec
import orjson

from statekit.session._archive import IndexChange
from statekit.session._backend import Backend
from statekit.session._history_index import HeadHistory
from statekit.session._history_records import Entry, Located, Revision, name_of, record_json
from statekit.session._ids import SessionKey

_IN: Final = re.compile(rb'"in":"([^"]*)"')
_REVISION: Final = re.compile(rb'"revision":"([^"]*)"')


def whole_record(entry: Revision | Located) -> bytes:
    """A decoded record as a line of the index: its parent and modules always said."""
    return orjson.dumps(record_json(entry, None, None), option=orjson.OPT_APPEND_NEWLINE)


def head_line(head: HeadHistory, revision: str, size: int) -> bytes:
    """``whole_record(head.head(revision, size))``: the record of the head whose index is ``head`` (its
    revision and size given) as a line of the index, written without making the :class:`Revision` first
    (each save writes one)."""
    record: dict[str, Any] = {"revision": revision, "saved_at": head.saved_at, "size": size, "parent": head.parent}
    record["modules"] = list(head.modules)
    if head.forked_from is not None:
        record["forked_from"] = list(head.forked_from)
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def first_records(head: HeadHistory | None, old: Revision | tuple[str, int]) -> bytes:
    """The lines a write over the replaced head puts first (``old``: its record, or its revision and size
    when ``head`` is its index): its record, then those of the revisions its delta lines made (in the blob
    its revision names), then, when ``head`` still holds its records (written before the index went beside
    it), all of those, so that the index replaces them.

    Raises:
        DocumentError: A record the head holds is malformed.
    """
    if isinstance(old, tuple):
        assert head is not None, "a revision and a size stand for the head of an index"
        old = head.head(*old)
    lines = [whole_record(old)]
    if head is not None:
        kept = head.kept() if head.beside is None else ()
        for index, entry in enumerate(head.entries):
            if isinstance(entry, Located):  # (one of the replaced head's delta lines: in the blob it becomes)
                lines.append(whole_record(entry if entry.blob is not None else attrs.evolve(entry, blob=old.revision)))
            elif head.beside is None:  # a record the head holds, as stored: whole
                blob, count = head.place(index)
                whole = kept[index] if count is None or blob is None else Located(kept[index], count, blob)
                lines.append(whole_record(whole))
    return b"".join(lines)


def advance(stored: bytes | None, index: IndexChange) -> tuple[bytes, tuple[str, ...]]:
    """The index once a write does ``index`` to the ``stored`` one, and the blobs it removes: those that only
    records no longer listed are in (the step the backend takes atomically; the Lua script does the same).

    The records that share a blob (a head's and those of the revisions its delta lines made) are written
    together, by the save that replaces that head, so they are next to each other: what a write adds to the
    index leaves the records cut off sharing a blob with the oldest record left, if with any; what replaces
    the index is looked through whole."""
    stored, stale = _cut(stored or b"", index.listed)
    lines, gone = (index.records, stored + stale) if index.replace else (index.records + stored, stale)
    lines, cut_off = _cut(lines, index.keep)
    gone = cut_off + gone
    if not gone:
        return lines, ()
    left = _lines(lines)
    used = {_blob(line) for line in (left if index.replace else left[-1:])}
    drop: list[str] = []
    for line in _lines(gone):
        blob = _blob(line)
        if blob and blob not in used:
            used.add(blob)
            drop.append(blob)
    return lines, tuple(drop)


def _cut(lines: bytes, count: int | None) -> tuple[bytes, bytes]:
    """The first ``count`` records of ``lines`` (``None``: all), and the rest."""
    if count is None:
        return lines, b""
    at = 0
    for _ in range(count):
        at = lines.find(b"\n", at) + 1
        if at == 0:
            return lines, b""
    return lines[:at], lines[at:]


def _blob(line: bytes) -> str:
    """The blob a record line is in: its ``"in"``, else its revision (``""``: it names none)."""
    found = _IN.search(line) or _REVISION.search(line)
    return found.group(1).decode("utf-8", "replace") if found is not None else ""


def _lines(index: bytes) -> list[bytes]:
    """The records of an index: its lines (each ends with a newline; JSON holds none)."""
    return [line for line in index.split(b"\n") if line]


def records_of(stored: bytes | None) -> tuple[bytes, ...]:
    """The records of an index as stored (its lines)."""
    return tuple(_lines(stored)) if stored else ()


class Moved(Exception):
    """The records kept beside a head belong to another head: a write came in between their reads."""

    def __init__(self, source: str) -> None:
        super().__init__(source)
        self.source = source


async def complete(backend: Backend, key: SessionKey, index: HeadHistory | None) -> HeadHistory | None:
    """``index`` with the records kept beside its head read into it (as is when it holds them).

    Raises:
        Moved: The records read belong to another head (a write came in between: read again).
    """
    if index is None or not index.unread:
        return index
    records = records_of(await backend.blobs.index(backend.faults, key))
    if records and name_of(records[0]) != index.beside:
        raise Moved(backend.source(key))
    entries: Iterable[Entry] = (*index.entries, *records)
    read = msgspec.structs.replace(index, entries=tuple(entries), unread=False)
    return read.within_keep()
