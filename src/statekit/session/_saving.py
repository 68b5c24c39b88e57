"""How a session saves: over what is expected, keeping the stored modules it does not name, as a delta when it can.

:class:`~statekit.session.SessionBase`'s save path (and ``remove_modules()``'s and ``write_document()``'s),
on the session's :class:`~._backend.Backend`: a save finds what it writes over
(:mod:`._kept`), encodes the document (or a delta, :mod:`._delta_save`) and
stores it with a compare-and-set; a blind save that lost a race reads again.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from statekit.values.checks import refuse_non_json
from statekit.state.dump import dump_many
from statekit.state.foreign import SupportsState
from statekit.state.gc import paused_gc, without_gc
from statekit.values.secrets import secrets_with
from statekit.errors import ConflictError, LeaseError, SessionNotFoundError
from statekit.session._backend import Backend
from statekit.session._delta_save import save_with_appends
from statekit.session._ids import SessionKey
from statekit.session._keyless import refuse_secret_fields
from statekit.session._kept import BLIND_ATTEMPTS, Others, json_names, others, refuse_removal, save_basis
from statekit.session._loading import decode_stored
from statekit.session._log import log_timed
from statekit.session._revisions import Expected, backoff
from statekit.session.document import META_KEY, plain_document, with_meta


async def save_modules(
    backend: Backend,
    key: SessionKey,
    modules: Mapping[str, SupportsState],
    *,
    overwrite: bool = False,
    expected: Expected | None = None,
) -> None:
    """Save ``modules`` over what is ``expected`` (else remembered; else, blind, what is stored now),
    keeping the stored modules they do not name (see :mod:`._kept`)."""
    started = time.perf_counter()
    if backend.secret_box is None and not backend.omit_secrets:
        refuse_secret_fields(modules)
    names = frozenset(modules)
    fetch = partial(backend.fetch, key)
    source = partial(backend.source, key)
    for attempt in itertools.count(1):
        remembered = expected if expected is not None or overwrite else backend.revisions.get(key)
        basis = await save_basis(remembered, overwrite, fetch)
        scan = json_names if backend.codec.fast else None
        kept = partial(others, names, basis, fetch, partial(decode_stored, backend, key=key), source, scan=scan)
        try:
            if backend.saves_deltas():
                size = await save_with_appends(backend, key, modules, basis.expected, kept)
            else:
                found = await kept()
                raw = await _encode(backend, modules, found)
                await backend.store(key, raw, found.expected, overwrite=False, names=found.names(modules))
                size = len(raw)
            break
        except ConflictError as err:
            if not _tries_again(err, basis.blind, attempt):
                raise
        await asyncio.sleep(backoff(attempt))
    log_timed("saved", list(modules), source, size, started)


def _tries_again(error: ConflictError, blind: bool, attempt: int) -> bool:
    """Whether a save or a removal writes again after ``error``: only a blind one that lost a race (a lease
    decides who writes, so no retry wins against it), at most ``BLIND_ATTEMPTS`` times."""
    return blind and attempt < BLIND_ATTEMPTS and not isinstance(error, LeaseError)


async def _encode(backend: Backend, modules: Mapping[str, SupportsState], found: Others) -> bytes:
    """The document of ``modules`` with the ``found`` stored modules kept, encoded
    (a ``StateDumpError`` names any bad value)."""
    codec = backend.codec
    if codec.fast:  # straight from the live objects, before anything can change them
        with paused_gc(), secrets_with(backend.secret_box):
            return codec.dumps(plain_document(found.merged(dump_many(modules, live=True))))
    with paused_gc(), secrets_with(backend.secret_box):
        document = plain_document(found.merged(dump_many(modules)))  # a snapshot: encoded in another thread
    return await backend.run_codec(without_gc(codec.dumps), document)


async def remove_modules(backend: Backend, key: SessionKey, gone: frozenset[str]) -> None:
    """Remove the modules ``gone`` from the stored session, keeping the others as stored.

    Raises:
        SessionNotFoundError: No such session.
        SessionError: A name the session does not hold, or every module of it.
        ConflictError: The session changed since the object last loaded or saved it.
    """
    started = time.perf_counter()
    fetch = partial(backend.fetch, key)
    source = partial(backend.source, key)
    for attempt in itertools.count(1):
        basis = await save_basis(backend.revisions.get(key), False, fetch)
        if basis.expected.matches(None):
            raise SessionNotFoundError(f"no {source()}")
        decode = partial(decode_stored, backend, key=key)
        found = await others(gone, basis, fetch, decode, source, read=True)
        refuse_removal(gone, found.order, source())
        raw = await backend.run_codec(backend.codec.dumps, plain_document(found.states))
        try:
            await backend.store(key, raw, found.expected, overwrite=False, names=frozenset(found.states))
            break
        except ConflictError as err:
            if not _tries_again(err, basis.blind, attempt):
                raise
        await asyncio.sleep(backoff(attempt))
    log_timed("removed", sorted(gone), source, len(raw), started)


async def write_document(
    backend: Backend, key: SessionKey, data: Mapping[str, Any], expected_revision: str | None, *, overwrite: bool
) -> str:
    """Store a plain session document (``write_document()``, options checked); the revision written.

    Raises:
        ConflictError: The stored revision is not the expected one (else remembered); nothing was written.
        DocumentError: ``data`` is not a session document.
        StateDumpError: ``data`` is not plain JSON data; nothing was written.
    """
    started = time.perf_counter()
    source = partial(backend.source, key)
    document = with_meta(data, source())
    refuse_non_json(document)  # orjson would write NaN as null and tuples as lists, without a word
    raw = await backend.run_codec(backend.codec.dumps, document)
    expected = None if expected_revision is None else Expected(revision=expected_revision)
    revision = (await backend.store(key, raw, expected, overwrite=overwrite)).revision
    log_timed("saved", [name for name in document if name != META_KEY], source, len(raw), started)
    return revision
