"""The history's index a head document carries (``__statekit__.history``): its retention, its own record and the kept revisions.

A session that keeps history (docs/history.md) writes, in its head document's
metadata::

    "history": {
        "keep": 20,                          # how many past revisions the session keeps (null: all)
        "saved_at": "2026-11-27T12:00:00.000001Z",
        "parent": "3f2a...",                 # the revision this head was saved over (null: first)
        "forked_from": ["user", "session", "9c1e..."],   # only in a fork's first revision
        "modules": ["agent", "notes"],
        "kept": [{"revision": "3f2a...", "saved_at": ..., "size": 1234,
                  "parent": ..., "modules": [...], "forked_from": ...}, ...]    # newest first
    }

A revision of a session with append-only lists that a delta saved (see
:mod:`._lineage`) is the first ``"lines"`` delta lines of a stored head: its
record says so, and names the blob holding that head in ``"in"``.

A record leaves out ``"parent"`` when it is the next (older) record's revision,
and ``"modules"`` when they are the newer record's (the head's, for the
newest): a history is mostly a chain of saves of the same modules, and the
index rides in every save. The oldest record always says its parent.

The index rides inside the head, so the compare-and-set that writes the head
writes the index too: what is kept and what is pruned changes atomically with
the save. Each kept revision's bytes are a blob named by its revision (:mod:`._archive`).

A backend that keeps the records beside the head (``history_beside``, Redis:
see :mod:`._history_beside`) writes ``"beside"`` instead of ``"kept"``: the
revision of the newest record it keeps there (``""``: none yet), which a reader
checks the records it reads against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final

import msgspec
import orjson

from statekit.errors import DocumentError
from statekit.session._history_records import (
    RECORD_NAME,
    RecordName,
    Entry,
    Located,
    Revision,
    checked_mapping,
    fork_of,
    module_names,
    optional_revision,
    name_of,
    record_json,
    record_of,
    time_checked,
    time_of,
)
from statekit.session.document import FORMAT_KEY, HISTORY_FORMAT, HISTORY_KEY

_WHERE: Final = f"__statekit__.{HISTORY_KEY}"

class HeadHistory(msgspec.Struct, frozen=True):
    """A head document's history index, decoded (its kept revisions' records only when asked for).

    Attributes:
        keep: How many past revisions the session keeps (``None``: all).
        saved_at: When the head was saved, as the index holds it (ISO 8601 in UTC, written ``Z``: checked when
            read, a ``datetime`` when a record is made of it).
        parent: The revision the head was saved over.
        forked_from: Where a fork's first revision came from.
        modules: The head's module names.
        entries: The kept past revisions, newest first: each a :class:`Revision`, a :class:`Located`
            one, or the JSON of its record as stored (decoded and checked by :meth:`kept`; a save
            carries it on as is).
        source: Says where the head is stored, for the error a malformed record raises (called only then).
        beside: On a backend that keeps the records beside the head: the revision of the newest one kept
            there (``""``: none); ``None``: the head holds its records.
        unread: The records kept beside the head are not in ``entries`` (only those its delta lines make).

    A :class:`msgspec.Struct`, not an attrs class: every save that keeps history makes one, and its
    ``__init__`` is C (0.1 us, against 1 us for a frozen attrs class of nine fields). Tracked by the cyclic
    collector: ``source`` may reach the session's revision memory, which holds the index.
    """

    keep: int | None
    saved_at: str | None
    parent: str | None
    forked_from: tuple[str, str, str] | None
    modules: tuple[str, ...]
    entries: tuple[Entry, ...] = ()
    source: Callable[[], str] = str
    beside: str | None = None
    unread: bool = False

    def head(self, revision: str, size: int) -> Revision:
        """The head's own record, given its revision and size (which the head cannot hold)."""
        return Revision(revision, self.parent, time_of(self.saved_at), size, self.modules, self.forked_from)

    def kept(self) -> tuple[Revision, ...]:
        """The kept past revisions, newest first (a record's implied parent and modules filled in).

        Raises:
            DocumentError: A record is malformed (naming it).
        """
        assert not self.unread, "the records kept beside the head are read first (_history_beside.complete)"
        out: list[Revision] = []
        newer = self.modules
        for index, entry in enumerate(self.entries):
            if isinstance(entry, Revision):
                record = entry
            elif isinstance(entry, Located):
                record = entry.revision
            else:
                try:
                    data = msgspec.json.decode(entry)
                except msgspec.DecodeError as err:
                    raise DocumentError(f"{_WHERE}.kept[{index}] is not JSON: {err}", source=self.source()) from None
                older = self.name(index + 1) if index + 1 < len(self.entries) else None
                record = record_of(data, f"{_WHERE}.kept[{index}]", self.source(), (older, newer))
            out.append(record)
            newer = record.modules
        return tuple(out)

    def record(self, index: int) -> Revision:
        """The kept revision at ``index`` (0: the newest).

        Raises:
            DocumentError: A record is malformed.
        """
        return self.kept()[index]

    def name(self, index: int) -> str:
        """The revision of the kept record at ``index``, read without checking the rest of it.

        Raises:
            DocumentError: The record holds no revision string.
        """
        found = name_of(self.entries[index])
        return self.record(index).revision if found is None else found  # (None: says what is wrong, where)

    def place(self, index: int) -> tuple[str | None, int | None]:
        """Where the kept revision at ``index`` is stored: the blob holding it (``None``: the session's head),
        and how many of that head's delta lines it holds (``None``: all of it).

        Raises:
            DocumentError: The record is malformed.
        """
        entry = self.entries[index]
        if isinstance(entry, Revision):
            return entry.revision, None
        if isinstance(entry, Located):
            return entry.blob, entry.lines
        try:
            found = RECORD_NAME.decode(entry)
        except msgspec.DecodeError:
            return self.record(index).revision, None  # says what is wrong, where
        if found.lines is None:
            return found.revision, None
        if found.lines < 0 or not found.blob:
            where = f"{_WHERE}.kept[{index}]"
            raise DocumentError(f"{where} should name the blob holding it (in) and its lines (>= 0)", source=self.source())
        return found.blob, found.lines

    def blobs(self, start: int, stop: int | None = None) -> set[str]:
        """The blobs holding the kept revisions ``start`` to ``stop`` (0: the newest).

        Raises:
            DocumentError: A record is malformed.
        """
        start = max(start, 0)
        end = len(self.entries) if stop is None else min(stop, len(self.entries))
        try:  # every save asks: records still JSON are read in one decode
            found = _PLACES.decode(b"[%s]" % b",".join(self.entries[start:end]))  # type: ignore[arg-type]
        except (TypeError, msgspec.DecodeError):
            found = None  # decoded records among them (not bytes), or a malformed one
        if found is not None:
            blobs = {name.revision if name.lines is None else name.blob for name in found}
            if None not in blobs and "" not in blobs:
                return blobs  # type: ignore[return-value]
        return {blob for blob, _ in map(self.place, range(start, end)) if blob is not None}  # says what is wrong

    def locate(self, revision: str) -> tuple[str | None, int | None] | None:
        """Where the kept revision of that name is stored (see :meth:`place`; ``None``: not kept)."""
        index = next((index for index, kept in enumerate(self.kept()) if kept.revision == revision), None)
        return None if index is None else self.place(index)

    def as_meta(self, *, json: bool) -> dict[str, Any]:
        """The index as the head document's metadata holds it (``json``: for an orjson codec, which
        writes the records carried on as they are stored, without decoding them)."""
        meta: dict[str, Any] = {"keep": self.keep, "saved_at": self.saved_at, "parent": self.parent}
        if self.forked_from is not None:
            meta["forked_from"] = list(self.forked_from)
        meta["modules"] = list(self.modules)
        if self.beside is not None:  # the records are kept beside the head: only the newest one's name
            meta["beside"] = self.beside
        elif json:  # one fragment: the records carried on are joined as they are stored
            meta["kept"] = orjson.Fragment(b"[%s]" % self._joined())
        else:
            meta["kept"] = [
                self._entry(index) if isinstance(entry, (Revision, Located)) else msgspec.json.decode(entry)
                for index, entry in enumerate(self.entries)
            ]
        return meta

    def _joined(self) -> bytes:
        """The records as stored, joined by commas: those carried on as they are, the decoded ones encoded."""
        entries = self.entries
        first = 1 if entries and isinstance(entries[0], (Revision, Located)) else 0  # a save's new record
        try:  # the rest carried on as stored, the usual case: joined at C speed
            rest = b",".join(entries[first:])  # type: ignore[arg-type]
        except TypeError:  # decoded records among them
            chunks = [
                orjson.dumps(self._entry(index)) if isinstance(entry, (Revision, Located)) else entry
                for index, entry in enumerate(entries)
            ]
            return b",".join(chunks)
        if not first:
            return rest
        return b"%s,%s" % (orjson.dumps(self._entry(0)), rest) if rest else orjson.dumps(self._entry(0))

    def _entry(self, index: int) -> dict[str, Any]:
        """The record of the :class:`Revision` at ``index``, as stored (see :func:`record_json`)."""
        newer = self.modules if index == 0 else self.entries[index - 1]
        if isinstance(newer, Located):
            newer = newer.revision
        older = self.entries[index + 1] if index + 1 < len(self.entries) else None
        return record_json(self.entries[index], older, newer.modules if isinstance(newer, Revision) else None)

    def within_keep(self) -> HeadHistory:
        """This index, its records past the retention left out (it may list more: a head's delta lines
        each make a revision, and records kept beside the head are cut by the next full write)."""
        if self.keep is None or len(self.entries) <= self.keep:
            return self
        return msgspec.structs.replace(self, entries=self.truncated(self.keep))

    def truncated(self, count: int) -> tuple[Entry, ...]:
        """The first ``count`` records, the last one saying its parent (the record it left out is gone)."""
        kept = self.entries[:count]
        if count < len(self.entries) and kept and not isinstance(kept[-1], (Revision, Located)):
            last = kept[-1]
            if _PARENT.decode(last).parent is msgspec.UNSET:
                kept = (*kept[:-1], b'{"parent":%s,%s' % (orjson.dumps(self.name(count)), bytes(last)[1:]))
        return kept


# -- reading an index: every field checked, so a hand-edited head fails with its path -------------------


class _Index(msgspec.Struct):
    """The index as the fast path decodes it: its own fields checked, the records left as JSON."""

    keep: int | None = None
    saved_at: str | None = None
    parent: str | None = None
    forked_from: tuple[str, str, str] | None = None
    modules: list[str] = msgspec.field(default_factory=list)
    kept: list[msgspec.Raw] = msgspec.field(default_factory=list)
    beside: str | None = None


_INDEX = msgspec.json.Decoder(_Index)


class _Parent(msgspec.Struct):
    parent: str | None | msgspec.UnsetType = msgspec.UNSET


_PARENT = msgspec.json.Decoder(_Parent)


class _Place(RecordName):
    """A record's :class:`RecordName` as :meth:`HeadHistory.blobs` reads many at once: its lines checked by the
    decoder (a negative count fails the decode, and :meth:`HeadHistory.place` then says what is wrong)."""

    lines: Annotated[int, msgspec.Meta(ge=0)] | None = None


_PLACES = msgspec.json.Decoder(list[_Place])


def parse_index_json(raw: bytes, source: Callable[[], str]) -> HeadHistory:
    """The history index from the JSON of ``"history"``, its records left as JSON until asked for.

    Raises:
        DocumentError: It is not a well-formed index (saying which part, where).
    """
    try:
        index = _INDEX.decode(raw)  # the records hold ``raw`` alive: the index's bytes alone (its callers copy them)
    except msgspec.DecodeError:  # a malformed index: the full check names what and where
        try:
            data = msgspec.json.decode(raw)
        except msgspec.DecodeError as err:
            raise DocumentError(f"{_WHERE} is not JSON: {err}", source=source()) from None
        return parse_index(data, source())
    if index.keep is not None and index.keep < 0:
        raise DocumentError(f"{_WHERE}.keep should be an integer >= 0 or null, got {index.keep!r}", source=source())
    saved_at = None if index.saved_at is None else time_checked(index.saved_at, f"{_WHERE}.saved_at", source())
    if index.beside is not None and index.kept:
        raise DocumentError(f"{_WHERE} holds both kept and beside: one or the other", source=source())
    return HeadHistory(
        keep=index.keep,
        saved_at=saved_at,
        parent=index.parent,
        forked_from=index.forked_from,
        modules=tuple(index.modules),
        entries=tuple(index.kept),
        source=source,
        beside=index.beside,
        unread=index.beside is not None,
    )


def parse_index(meta: object, source: str) -> HeadHistory:
    """The history index of a head's metadata (the value of ``"history"``), decoded: its own fields
    checked, its records when asked for (:meth:`HeadHistory.kept`).

    Raises:
        DocumentError: It is not a well-formed index (saying which part, where).
    """
    where = _WHERE
    data = checked_mapping(meta, where, source)
    keep = data.get("keep")
    if keep is not None and (type(keep) is not int or keep < 0):
        raise DocumentError(f"{where}.keep should be an integer >= 0 or null, got {keep!r}", source=source)
    kept_list = data.get("kept", [])
    if not isinstance(kept_list, list):
        raise DocumentError(f"{where}.kept should be a list, got {type(kept_list).__name__}", source=source)
    kept = tuple(_as_json(item, f"{where}.kept[{index}]", source) for index, item in enumerate(kept_list))
    beside = data.get("beside")
    if beside is not None and (not isinstance(beside, str) or kept):
        raise DocumentError(f"{where}.beside should be a revision string, and kept absent, got {beside!r}", source=source)
    return HeadHistory(
        keep=keep,
        saved_at=time_checked(data.get("saved_at"), f"{where}.saved_at", source),
        parent=optional_revision(data.get("parent"), f"{where}.parent", source),
        forked_from=fork_of(data.get("forked_from"), f"{where}.forked_from", source),
        modules=module_names(data.get("modules", []), f"{where}.modules", source),
        entries=kept,
        source=lambda: source,
        beside=beside,
        unread=beside is not None,
    )


def _as_json(item: object, where: str, source: str) -> bytes:
    """A record as JSON, checked when asked for (as on the fast path)."""
    try:
        return orjson.dumps(item)
    except orjson.JSONEncodeError:
        raise DocumentError(f"{where} should be an object of JSON data, got {type(item).__name__}", source=source) from None


def index_of(meta: object, source: str) -> HeadHistory | None:
    """The history index in a decoded document's metadata (``None``: it keeps none).

    Raises:
        DocumentError: A malformed index.
    """
    if not isinstance(meta, dict) or meta.get(FORMAT_KEY) != HISTORY_FORMAT or HISTORY_KEY not in meta:
        return None
    return parse_index(meta[HISTORY_KEY], source)
