"""History's operations on a session's Backend: list the revisions, read one, roll back to one, fork, prune.

Each reads the head once; a kept revision's bytes come from its blob and are
checked against its name (a blob holds exactly the bytes whose revision it is
named by). Writes (rollback, fork, prune) are compare-and-sets planned by
:func:`~._history.plan`, like every save.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from statekit.errors import ConflictError, DocumentError, LeaseError, SessionError, SessionNotFoundError
from statekit.session._backend import Backend
from statekit.session._history import head_of, plan, store_states, stored_modules, stored_size
from statekit.session._history_beside import Moved, complete
from statekit.session._history_index import HeadHistory
from statekit.session._history_records import Revision, widest
from statekit.session._ids import SessionKey
from statekit.session._lineage import check_root, prefix_of
from statekit.session._loading import decode_stored
from statekit.session._log import log_timed
from statekit.session._delta_load import is_joined
from statekit.session._revisions import MISSING, UNKNOWN, Expected, StoredDocument, Unknown, revision_of
from statekit.session.document import META_KEY, without_token

T = TypeVar("T")


async def list_history(backend: Backend, key: SessionKey, limit: int | None) -> list[Revision]:
    """The session's revisions, newest first, the head first (``[]``: no such session)."""
    return await _again(lambda: _listed(backend, key, limit))


async def _again(read: Callable[[], Awaitable[T]]) -> T:
    """``read()``, read again while a write comes in between the head's read and its records'
    (a backend that keeps them beside the head, see :mod:`._history_beside`).

    Raises:
        SessionError: Writers kept replacing the head while it was read.
    """
    for attempt in range(_READS):
        try:
            return await read()
        except Moved as err:
            if attempt == _READS - 1:
                raise SessionError(f"{err.source} kept being written while its history was read; try again") from None
    raise AssertionError("unreachable")


_READS = 5
"""How many times a history read reads the head and its records before it gives up."""


async def _listed(backend: Backend, key: SessionKey, limit: int | None) -> list[Revision]:
    raw = await backend.fetch(key)
    if raw is None:
        return []
    expected = Expected(raw=raw)
    index, _ = await head_of(backend, key, expected)
    index = await complete(backend, key, index)
    if index is None:
        revisions = [Revision(expected.revision, None, None, stored_size(raw), await stored_modules(backend, key, raw))]
    else:
        revisions = [index.head(expected.revision, stored_size(raw)), *index.kept()]
    return revisions if limit is None else revisions[:limit]


async def read_at(backend: Backend, key: SessionKey, revision: str) -> tuple[bytes, Expected, HeadHistory | None]:
    """The bytes of a revision the session holds (its head, or a kept one), the head as read, and its index.

    Raises:
        SessionNotFoundError: No such session, or it holds no such revision (never kept, or pruned).
        DocumentError: The kept bytes are not the revision they are named by.
    """
    return await _again(lambda: _read_at(backend, key, revision))


async def _read_at(backend: Backend, key: SessionKey, revision: str) -> tuple[bytes, Expected, HeadHistory | None]:
    raw = await backend.fetch(key)
    source = backend.source(key)
    if raw is None:
        raise SessionNotFoundError(f"no {source}")
    head = Expected(raw=raw)
    index, head = await head_of(backend, key, head)
    if head.revision == revision:
        return raw, head, index
    index = await complete(backend, key, index)
    place = None if index is None else index.locate(revision)
    if place is None:
        raise SessionNotFoundError(_not_kept(source, revision, index))
    name, lines = place
    blob = raw if name is None else await backend.blobs.get(backend.faults, key, name)
    if blob is None:
        raise SessionNotFoundError(
            f"{source} lists revision {revision} but its stored bytes are gone (pruned by a writer just now?)"
        )
    if lines is not None:  # the first lines of a head's deltas (see _lineage)
        check_root(blob, source)
        blob = prefix_of(blob, lines, source)
    if revision_of(blob) != revision:
        raise DocumentError(f"the kept bytes of revision {revision} are not that revision (damaged)", source=source)
    return blob, head, index


def _not_kept(source: str, revision: str, index: HeadHistory | None) -> str:
    if index is None:
        return f"{source} holds no revision {revision}: it keeps no history (see keep_history, docs/history.md)"
    return (
        f"{source} holds no revision {revision}: it keeps the head and {len(index.entries)} past revision(s) "
        f"(keep_history={index.keep}); history() lists them"
    )


async def states_at(backend: Backend, key: SessionKey, raw: bytes) -> dict[str, Any]:
    """The module states of stored bytes (deltas merged in, metadata left out), as stored (secrets sealed)."""
    document = await decode_stored(backend, raw, key)
    return {name: state for name, state in document.items() if name != META_KEY}


async def stored_at(backend: Backend, key: SessionKey, revision: str) -> StoredDocument:
    """A revision the session holds, as ``read_document(at=...)`` gives it: without the token
    and the history's index (deltas folded in).

    Raises:
        SessionNotFoundError: No such session or revision.
    """
    raw, _, _ = await read_at(backend, key, revision)
    data = without_token(await decode_stored(backend, raw, key))
    shown = raw if not is_joined(raw) else await backend.run_codec(backend.codec.dumps, data)
    return StoredDocument(data, shown, f"{backend.source(key)} at revision {revision}", revision)


async def rollback(backend: Backend, key: SessionKey, revision: str) -> str:
    """Make a new head whose modules equal ``revision``'s, over the head read; the new revision.

    The object does not remember the new head: a save from objects still holding the state
    they loaded before conflicts (load again after a rollback).

    Raises:
        SessionNotFoundError: No such session or revision.
        ConflictError: The head changed since it was read; nothing was written.
    """
    started = time.perf_counter()
    raw, head, _ = await read_at(backend, key, revision)
    states = await states_at(backend, key, raw)
    written = await _write(backend, key, states, head, remember=False)
    log_timed("rolled back", list(states), lambda: backend.source(key), len(written.raw or b""), started)
    return written.revision


async def fork(
    backend: Backend, source: SessionKey, target: SessionKey, at: str | None
) -> str:
    """Write a new session ``target`` whose first revision holds ``source``'s head (or revision ``at``).

    Raises:
        SessionNotFoundError: No such source session or revision.
        ConflictError: ``target`` exists; nothing was written.
    """
    started = time.perf_counter()
    if at is None:
        raw = await backend.fetch(source)
        if raw is None:
            raise SessionNotFoundError(f"no {backend.source(source)}")
        at = revision_of(raw)
        index, _ = await head_of(backend, source, Expected(raw=raw))
    else:
        raw, _, index = await read_at(backend, source, at)
    states = await states_at(backend, source, raw)
    forked_from = (source.user_id, source.session_id, at)
    keep = widest(0 if index is None else index.keep, backend.keep_history)  # the fork keeps what its source keeps
    try:
        written = await _write(backend, target, states, MISSING, remember=False, forked_from=forked_from, keep=keep)
    except LeaseError:
        raise
    except ConflictError:
        where = backend.source(target)
        raise ConflictError(f"{where} exists: a fork makes a new session; delete it first or fork to another id", source=where) from None
    log_timed("forked", list(states), lambda: backend.source(target), len(written.raw or b""), started)
    return written.revision


async def prune(backend: Backend, key: SessionKey, keep: int | None) -> str | None:
    """Set the session's retention to ``keep`` (lowering it too), dropping what it no longer keeps.

    Writes the head again with the new retention (a new revision with the same modules); the
    new revision, or ``None`` when the session does not exist.

    Raises:
        ConflictError: The head changed since it was read; nothing was written.
    """
    raw = await backend.fetch(key)
    if raw is None:
        return None
    head = Expected(raw=raw)
    index, head = await head_of(backend, key, head)
    if index is None and not keep:
        return revision_of(raw)  # keeps none, and is to keep none
    states = await states_at(backend, key, raw)
    return (await _write(backend, key, states, head, remember=True, keep=keep)).revision


async def _write(
    backend: Backend,
    key: SessionKey,
    states: Mapping[str, Any],
    expected: Expected,
    *,
    remember: bool,
    forked_from: tuple[str, str, str] | None = None,
    keep: int | None | Unknown = UNKNOWN,
) -> Expected:
    step, expected = await plan(backend, key, expected, tuple(states), forked_from=forked_from, keep=keep)
    return await store_states(backend, key, states, expected, step, remember=remember)


async def sweep(backend: Backend, key: SessionKey) -> None:
    """Drop every blob of a session that is gone (after a delete: erasure includes its history)."""
    names = await backend.blobs.listed(backend.faults, key)
    if names:
        await backend.blobs.drop(backend.faults, key, tuple(names))
