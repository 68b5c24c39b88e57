"""How a write keeps history: read the stored head's index, plan the new one (what is kept, what is pruned), store it with the states.

Every write of a session (a save, ``update()``, ``remove_modules()``,
``write_document()``, a rollback, a fork) asks :func:`plan` before it encodes
its document: for a session that keeps no history and an object with
``keep_history=0`` the answer is ``None`` and the write is exactly what it was
without history. Otherwise the plan holds the new head's index (written into
the document's metadata) and the :class:`~._archive.Archive` the backend's
``_write_keeping`` carries out in the compare-and-set's own step.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, Final

import attrs
import msgspec
import orjson

from statekit.errors import ConflictError, DocumentError
from statekit.session._archive import Archive, IndexChange, Step
from statekit.session._backend import Backend
from statekit.session._companion import split
from statekit.session._history_beside import first_records, head_line
from statekit.session._history_index import HeadHistory, index_of, parse_index_json
from statekit.session._history_records import Entry, Located, Revision, now_text, record_json, widest
from statekit.session._lineage import over_deltas
from statekit.session._ids import SessionKey
from statekit.session._loading import decode_stored
from statekit.session._revisions import MISSING_REVISION, UNKNOWN, Expected, Unknown, conflict_message
from statekit.session.document import BOM, HISTORY_FORMAT, META_KEY, doc_token, meta_format, plain_document

_TOP: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])


_META: Final[msgspec.json.Decoder[Any]] = msgspec.json.Decoder(
    # a Raw | None field would read null only: Raw, None when absent
    msgspec.defstruct("_HistoryMeta", [("format", Any, None), ("history", msgspec.Raw, None)])
)
_ABSENT: Final = msgspec.Raw(b"")


async def plan(
    backend: Backend,
    key: SessionKey,
    expected: Expected,
    modules: tuple[str, ...],
    *,
    keep: int | None | Unknown = UNKNOWN,
    forked_from: tuple[str, str, str] | None = None,
) -> tuple[Step | None, Expected]:
    """What a write over ``expected`` does to the session's history.

    Args:
        backend: The session's storage.
        key: The session.
        expected: What the write must find stored.
        modules: The module names of the document it writes, in order.
        keep: The retention to record (``prune_history()``); by default the session's,
            raised to the object's ``keep_history``.
        forked_from: The revision a fork starts from.

    Returns:
        ``None`` when the write keeps no history (the document is written as without it), else the
        new head's index and the archive; and ``expected``, with its bytes if they had to be read.

    Raises:
        ConflictError: Only a revision was expected and the stored one is another.
        DocumentError: The stored head's history index is malformed.
    """
    head = expected.history
    if isinstance(head, Unknown):
        head, expected = await head_of(backend, key, expected)
    # (else a save over what the object remembers: no coroutine to await)
    blobs = backend.blobs
    if not blobs.supported:
        return None, expected
    if keep is not UNKNOWN:
        retention = keep
    elif head is None:
        retention = blobs.keep
    else:
        retention = widest(head.keep, blobs.keep)
        if blobs.beside and head.beside is not None and not head.entries and expected.raw is not None and retention != 0:
            # a save's usual case on a backend that keeps the records beside the head: over the head the object
            # holds, whose index lists none of its records (no delta line made one), so it is replaced whole
            return _over_index(head, expected.revision, stored_size(expected.raw), retention, modules, forked_from), expected
    if retention == 0 and forked_from is None and head is None:
        return None, expected  # keeps no history, and is to keep none: the write is as without history
    stored = expected.only_base or expected.revision != MISSING_REVISION
    if stored and expected.raw is None and (head is None or not expected.only_base):
        expected = await _with_bytes(backend, key, expected)  # its size (and modules) are needed
    old: Revision | tuple[str, int] | None = None
    if stored:
        raw, base = expected.raw, expected.base
        size = stored_size(raw) if raw is not None else base.doc_len + base.log_len  # type: ignore[union-attr]
        if head is None:
            assert raw is not None
            try:
                held = await stored_modules(backend, key, raw)
            except DocumentError:
                held = ()  # a damaged head (only overwrite=True writes over one): kept as it was
            old = Revision(expected.revision, None, None, size, held)
        elif blobs.beside:  # the replaced head's record is written straight from its index
            old = (expected.revision, size)
        else:
            old = head.head(expected.revision, size)
            if _in_head(head):
                head = msgspec.structs.replace(head, entries=tuple(map(partial(_in_blob, expected.revision), head.entries)))
    if blobs.beside:  # the backend keeps the records beside the head: it cuts them, in its own step
        return _beside(backend, key, head, old, (retention, modules, forked_from)), expected
    assert not isinstance(old, tuple)
    kept: tuple[Entry, ...] = () if old is None else (old, *(head.entries if head is not None else ()))
    if retention == 0 and forked_from is None:  # history turned off: a plain head again, the kept ones dropped
        assert head is not None
        return Step(Archive(None, tuple(sorted(head.blobs(0)))), None), expected
    drop: tuple[str, ...] = ()
    if retention is not None and len(kept) > retention:
        drop = _dropped(head, retention - 1) if head is not None else ()
        kept = (kept[0], *head.truncated(retention - 1)) if head is not None and retention else kept[:retention]
    keep_as = expected.revision if stored and retention != 0 else None
    if keep_as in drop:  # the replaced head's blob also holds the revisions its delta lines made: kept with it
        drop = tuple(name for name in drop if name != keep_as)
    if kept and isinstance(kept[0], Revision):  # the record of the head replaced, as stored: as a load of the new
        # head reads it, so that the object's next save carries it on like any other
        kept = (orjson.dumps(record_json(kept[0], kept[1] if len(kept) > 1 else None, modules)), *kept[1:])
    new = HeadHistory(
        keep=retention,
        saved_at=now_text(),
        parent=expected.revision if stored else None,
        forked_from=forked_from,
        modules=modules,
        entries=kept,
        source=lambda: backend.source(key),
    )
    return Step(Archive(keep_as, drop), new), expected


def _over_index(
    head: HeadHistory, revision: str, size: int, retention: int | None, modules: tuple[str, ...], fork: tuple[str, str, str] | None
) -> Step:
    """:func:`_beside`'s step when the replaced head (``revision``, ``size`` bytes) lists none of the records
    kept beside it: its own record put first, the index cut to ``retention``."""
    modules = head.modules if head.modules == modules else modules  # (when equal, one object less held per save)
    index = HeadHistory(
        keep=retention, saved_at=now_text(), parent=revision, forked_from=fork, modules=modules, source=head.source,
        beside=revision, unread=True,
    )
    return Step(Archive(revision, (), IndexChange(head_line(head, revision, size), False, retention)), index)


def _beside(
    backend: Backend,
    key: SessionKey,
    head: HeadHistory | None,
    old: Revision | tuple[str, int] | None,
    new: tuple[int | None, tuple[str, ...], tuple[str, str, str] | None],
) -> Step:
    """:func:`plan`'s step on a backend that keeps the records beside the head (see :mod:`._history_beside`):
    the replaced head's records to put first, and the retention. ``old``: the replaced head's record, or
    its revision and size when ``head`` is its index (``None``: nothing is stored); ``new``: the retention,
    the modules and the fork the new head records."""
    retention, modules, forked_from = new
    if retention == 0 and forked_from is None:  # history turned off: a plain head again, the kept ones dropped
        assert head is not None
        drop = () if head.beside is not None else tuple(sorted(head.blobs(0)))  # (a head that held its records)
        return Step(Archive(None, drop, IndexChange(b"", replace=False, keep=0)), None)
    if isinstance(old, tuple) and head is not None and head.beside is not None and not head.entries:
        return _over_index(head, *old, retention, modules, forked_from)
    if old is None:
        keep_as, records = None, b""
    else:
        keep_as, records = old[0] if isinstance(old, tuple) else old.revision, first_records(head, old)
    if head is None:
        source = lambda: backend.source(key)  # noqa: E731
    else:  # the same session's, and, when they are the same, its module names: one object less held per save
        source, modules = head.source, head.modules if head.modules == modules else modules
    index = HeadHistory(
        keep=retention,
        saved_at=now_text(),
        parent=keep_as,
        forked_from=forked_from,
        modules=modules,
        source=source,
        beside=keep_as or "",
        unread=True,
    )
    if head is None or head.beside is None:  # the index holds none of this head's records yet: replaced
        change = IndexChange(records, replace=True, keep=retention)
    elif head.keep is None:  # it lists every record stored (a head listing none went to _over_index)
        change = IndexChange(records, replace=False, keep=retention)
    else:  # the stored records past what the head lists (its delta lines pushed them out) go too
        in_head = sum(isinstance(entry, Located) for entry in head.entries)  # (the rest is not read)
        change = IndexChange(records, replace=False, keep=retention, listed=max(head.keep - in_head, 0))
    return Step(Archive(keep_as, (), change), index)


async def store_states(
    backend: Backend,
    key: SessionKey,
    states: Mapping[str, Any],
    expected: Expected,
    step: Step | None,
    *,
    remember: bool = True,
) -> Expected:
    """Store a document of plain module states (with the index ``step`` carries, if any) over ``expected``,
    doing what ``step`` says to the history; what is stored now.

    Raises:
        ConflictError: The stored head is not ``expected``; nothing was written.
    """
    document = plain_document(states, None if step is None else step.meta(json=backend.codec.fast))
    raw = await backend.run_codec(backend.codec.dumps, document)
    return await backend.store(key, raw, expected, overwrite=False, names=frozenset(states), step=step, remember=remember)


def stored_size(raw: bytes) -> int:
    """The size of stored bytes, the deltas they carry included (a :class:`Revision`'s ``size``)."""
    return len(raw) + len(split(raw)[1])


async def stored_modules(backend: Backend, key: SessionKey, raw: bytes) -> tuple[str, ...]:
    """The module names of stored bytes, in the stored order (a head that keeps no history does not say them).

    Raises:
        DocumentError: The bytes are not a session document.
    """
    document = await decode_stored(backend, raw, key)
    return tuple(name for name in document if name != META_KEY)


def _dropped(head: HeadHistory, start: int) -> tuple[str, ...]:
    """The blobs of the revisions the head keeps from ``start`` on (0: the newest) that no newer one is in:
    what a write that keeps only the newer ones drops. The newer records, carried on as stored, are read only
    when their JSON may name one of those blobs (a save's usual case reads the dropped record alone).

    Raises:
        DocumentError: The dropped records are malformed (or a newer one that had to be read).
    """
    gone = head.blobs(start)
    if not gone:
        return ()
    try:  # the newer records as stored: one that names none of these blobs is stored in none of them
        newer = b",".join(head.entries[: max(start, 0)])  # type: ignore[arg-type]
    except TypeError:
        newer = b"\\"  # decoded records among them: read each one
    if b"\\" not in newer:  # no escape hides a name
        if len(gone) == 1:  # a save's usual case (no generator)
            if next(iter(gone)).encode() not in newer:
                return tuple(gone)
        elif not any(name.encode() in newer for name in gone):
            return tuple(sorted(gone))
    return tuple(sorted(gone - head.blobs(0, start)))


def _in_head(head: HeadHistory) -> bool:
    """Whether a kept record is a prefix of the head (:class:`Located` in no blob), which :func:`_in_blob` moves.
    Such records are the newest ones (:mod:`._lineage` puts them first), so the first one says (were one further
    down, writing its record would fail its assertion, not write it wrong)."""
    first = head.entries[0] if head.entries else None
    return isinstance(first, Located) and first.blob is None


def _in_blob(name: str, entry: Entry) -> Entry:
    """A kept record, the prefixes of the head (:class:`Located` in no blob) now in the blob ``name``."""
    return attrs.evolve(entry, blob=name) if isinstance(entry, Located) and entry.blob is None else entry


async def head_of(backend: Backend, key: SessionKey, expected: Expected) -> tuple[HeadHistory | None, Expected]:
    """The history index of the head ``expected`` stands for (``None``: it keeps none), reading it if need be.

    Raises:
        ConflictError: Only a revision is known and the stored head is another.
    """
    known = expected.history
    if known is not UNKNOWN:
        return known, expected
    if expected.only_base:  # a delta save's, which knew the history: none
        expected.history = None
        return None, expected
    raw = expected.raw
    if raw is None:
        if expected.revision == MISSING_REVISION:
            expected.history = None
            return None, expected
        expected = await _with_bytes(backend, key, expected)
        raw = expected.raw
        assert raw is not None
    expected.history = await read_index(backend, key, raw)
    return expected.history, expected


async def _with_bytes(backend: Backend, key: SessionKey, expected: Expected) -> Expected:
    """``expected`` with the stored bytes it stands for, read now.

    Raises:
        ConflictError: The stored head is another.
    """
    raw = await backend.fetch(key)
    base = expected.base
    if expected.only_base and base is not None and raw is not None:  # after delta saves: the token and the size say
        doc = split(raw)[0]
        if doc_token(doc) == base.token and stored_size(raw) == base.doc_len + base.log_len:
            return Expected(raw=raw, base=base, names=expected.names, history=expected.history)
    if raw is None or not expected.matches(raw):
        source = backend.source(key)
        raise ConflictError(conflict_message(source, created=False), source=source)
    return Expected(raw=raw, revision=expected.revision, base=expected.base, names=expected.names, history=expected.history)


async def read_index(backend: Backend, key: SessionKey, raw: bytes) -> HeadHistory | None:
    """The history index in stored bytes (``None``: the document keeps no history).

    A JSON document whose first bytes name a format without history costs a pattern match;
    one with history has only its metadata decoded.

    Raises:
        DocumentError: The index is malformed.
    """
    doc = split(raw)[0]
    body = doc[len(BOM) :] if doc.startswith(BOM) else doc
    found = meta_format(body)
    if found is not None and found != HISTORY_FORMAT:
        return None
    try:  # JSON: the top level's values left undecoded (as the module-name scan of a blind save does)
        meta_raw = _TOP.decode(body).get(META_KEY, _ABSENT)
        if meta_raw is _ABSENT:
            return None  # no metadata at all (AgentScope's layout): no history
        meta: Any = _META.decode(meta_raw)
    except msgspec.DecodeError:
        pass  # not JSON, or metadata of another shape: the full decode says what it is
    else:
        if meta.format != HISTORY_FORMAT or meta.history is None:
            return None
        return over_deltas(parse_index_json(bytes(meta.history), lambda: backend.source(key)), raw, backend.source(key))
    try:
        decoded = (await decode_stored(backend, raw, key)).get(META_KEY)
    except DocumentError:
        return None  # a damaged document: the write says what is wrong (or overwrite=True replaces it)
    return over_deltas(index_of(decoded, backend.source(key)), raw, backend.source(key))
