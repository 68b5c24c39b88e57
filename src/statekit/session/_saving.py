"""How a session saves: over what is expected, keeping the stored modules it does not name, as a delta when it can.

:class:`~statekit.session.SessionBase`'s save path (and ``remove_modules()``'s and ``write_document()``'s),
on the session's :class:`~._backend.Backend`: a save finds what it writes over
(:mod:`._kept`), encodes the document (or a delta, :mod:`._delta_save`) and
stores it with a compare-and-set; a blind save that lost a race reads again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from statekit.values.checks import refuse_non_json
from statekit.state.dump import dump_many
from statekit.state.foreign import SupportsState
from statekit.state.gc import paused_gc, without_gc
from statekit.values.secrets import secrets_with
from statekit.errors import ConflictError, DocumentError, LeaseError, SessionNotFoundError
from statekit.session._backend import Backend
from statekit.session._archive import Step
from statekit.session._delta_save import save_with_appends
from statekit.session._history import head_of, plan, store_states
from statekit.session._ids import SessionKey
from statekit.session._keyless import refuse_secret_fields
from statekit.session._kept import BLIND_ATTEMPTS, Basis, Others, json_names, others, others_known, read_basis
from statekit.session._kept import refuse_removal, save_basis
from statekit.session._loading import decode_stored
from statekit.session._log import log_timed
from statekit.session._revisions import UNKNOWN, Expected, backoff
from statekit.session.document import META_KEY, plain_document, with_meta

T = TypeVar("T")


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
    save = _Save(backend, key, modules, expected, overwrite)
    size = await _written(backend, key, save.remembered, overwrite, save.attempt)
    log_timed("saved", list(modules), save.source, size, started)


class _Save:
    """One ``save_modules()`` call: what its attempts share (one object held across the write's wait,
    instead of closures and their cells: a small save's per-call cost, and its share of the collector's work)."""

    __slots__ = ("backend", "basis", "expected", "key", "modules", "overwrite")

    def __init__(
        self, backend: Backend, key: SessionKey, modules: Mapping[str, SupportsState], expected: Expected | None, overwrite: bool
    ) -> None:
        self.backend, self.key, self.modules, self.expected, self.overwrite = backend, key, modules, expected, overwrite
        self.basis: Basis | None = None  # the attempt's (see kept_now)

    def source(self) -> str:
        """How errors name the session."""
        return self.backend.source(self.key)

    def remembered(self) -> Expected | None:
        """What the save must find stored: as given, else as remembered (``None``: blind)."""
        if self.expected is not None or self.overwrite:
            return self.expected
        return self.backend.revisions.get(self.key)

    def kept_now(self) -> Others | Awaitable[Others]:
        """:meth:`kept` over the basis of the attempt running; at once when nothing needs reading (the usual save)."""
        assert self.basis is not None
        known = others_known(frozenset(self.modules), self.basis)
        return known if known is not None else self.kept(self.basis)

    def kept(self, basis: Basis) -> Awaitable[Others]:
        """The stored modules the save does not name (see :func:`~._kept.others`)."""
        backend, key = self.backend, self.key
        return others(
            frozenset(self.modules), basis, partial(backend.fetch, key), partial(decode_stored, backend, key=key),
            self.source, scan=json_names if backend.codec.fast else None,
        )

    def attempt(self, basis: Basis) -> Awaitable[int]:
        """One attempt over ``basis``; the bytes written. A save that may write a delta over a head whose
        history index is known already (the usual save after a load or save) is :func:`save_with_appends`'s
        coroutine itself (no coroutine of its own while the write waits)."""
        backend = self.backend
        if backend.saves_deltas() and (basis.expected.history is not UNKNOWN or not backend.supports_history):
            self.basis = basis
            return save_with_appends(backend, self.key, self.modules, basis.expected, self.kept_now)
        return self._attempt(basis)

    async def _attempt(self, basis: Basis) -> int:
        backend, key, modules = self.backend, self.key, self.modules
        seen = basis.expected
        if backend.supports_history:  # the stored head's history index, known before anything is dumped
            _, seen = await head_of(backend, key, basis.expected)
        if backend.saves_deltas():  # append-only lists saved as deltas (history or not)
            self.basis = basis
            return await save_with_appends(backend, key, modules, seen, self.kept_now)
        found = await self.kept(basis)
        step, _ = await plan(backend, key, found.expected, found.ordered(modules))
        raw = await _encode(backend, modules, found, step)
        await backend.store(key, raw, found.expected, overwrite=False, names=found.names(modules), step=step)
        return len(raw)


async def _written(
    backend: Backend,
    key: SessionKey,
    remembered: Callable[[], Expected | None],
    overwrite: bool,
    attempt: Callable[[Basis], Awaitable[T]],
) -> T:
    """``attempt(basis)`` over what a write must find stored (``remembered()``; else, blind, what a read finds
    now); a blind write that lost a race reads again after a random backoff (:func:`_tries_again`)."""
    number = 0
    while True:
        number += 1
        basis = save_basis(remembered(), overwrite)
        if basis is None:  # blind: what a read finds now
            basis = await read_basis(overwrite, partial(backend.fetch, key))
        try:
            return await attempt(basis)
        except ConflictError as err:
            if not _tries_again(err, basis.blind, number):
                raise
        await asyncio.sleep(backoff(number))


def _tries_again(error: ConflictError, blind: bool, attempt: int) -> bool:
    """Whether a save or a removal writes again after ``error``: only a blind one that lost a race (a lease
    decides who writes, so no retry wins against it), at most ``BLIND_ATTEMPTS`` times."""
    return blind and attempt < BLIND_ATTEMPTS and not isinstance(error, LeaseError)


async def _encode(backend: Backend, modules: Mapping[str, SupportsState], found: Others, step: Step | None) -> bytes:
    """The document of ``modules`` with the ``found`` stored modules kept (and the history's index),
    encoded (a ``StateDumpError`` names any bad value)."""
    codec = backend.codec
    history = None if step is None else step.meta(json=backend.codec.fast)
    if codec.fast:  # straight from the live objects, before anything can change them
        with paused_gc(), secrets_with(backend.secret_box):
            return codec.dumps(plain_document(found.merged(dump_many(modules, live=True)), history))
    with paused_gc(), secrets_with(backend.secret_box):
        document = plain_document(found.merged(dump_many(modules)), history)  # a snapshot: encoded in another thread
    return await backend.run_codec(without_gc(codec.dumps), document)


async def remove_modules(backend: Backend, key: SessionKey, gone: frozenset[str]) -> None:
    """Remove the modules ``gone`` from the stored session, keeping the others as stored.

    Raises:
        SessionNotFoundError: No such session.
        SessionError: A name the session does not hold, or every module of it.
        ConflictError: The session changed since the object last loaded or saved it.
    """
    started = time.perf_counter()
    source = partial(backend.source, key)

    async def attempt(basis: Basis) -> int:
        if basis.expected.matches(None):
            raise SessionNotFoundError(f"no {source()}")
        decode = partial(decode_stored, backend, key=key)
        found = await others(gone, basis, partial(backend.fetch, key), decode, source, read=True)
        refuse_removal(gone, found.order, source())
        step, _ = await plan(backend, key, found.expected, tuple(found.states))
        stored = await store_states(backend, key, found.states, found.expected, step)
        return len(stored.raw or b"")

    size = await _written(backend, key, lambda: backend.revisions.get(key), False, attempt)
    log_timed("removed", sorted(gone), source, size, started)


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
    expected = None if expected_revision is None else Expected(revision=expected_revision)
    if backend.supports_history:
        revision, size = await _write_keeping_history(backend, key, document, expected, overwrite=overwrite)
    else:
        raw = await backend.run_codec(backend.codec.dumps, document)
        revision, size = (await backend.store(key, raw, expected, overwrite=overwrite)).revision, len(raw)
    log_timed("saved", [name for name in document if name != META_KEY], source, size, started)
    return revision


async def _write_keeping_history(
    backend: Backend, key: SessionKey, document: dict[str, Any], expected: Expected | None, *, overwrite: bool
) -> tuple[str, int]:
    """``write_document()`` on a backend that keeps history: over the stored head (read when nothing
    is expected), carrying its history on; a blind write that lost a race reads again. A head that keeps
    no history, written by an object that keeps none, is written as without history (``overwrite=True``
    unconditionally). The revision written and its size. With ``overwrite=True`` a stored head whose
    index cannot be read is replaced whole."""
    states = {name: state for name, state in document.items() if name != META_KEY}

    async def attempt(basis: Basis) -> tuple[str, int]:
        try:
            step, seen = await plan(backend, key, basis.expected, tuple(states))
        except DocumentError:
            if not overwrite:
                raise
            step, seen = None, basis.expected
        if step is None:  # the head keeps no history, nor does this object: written as without history
            raw = await backend.run_codec(backend.codec.dumps, document)
            return (await backend.store(key, raw, expected, overwrite=overwrite)).revision, len(raw)
        stored = await store_states(backend, key, states, seen, step)
        return stored.revision, len(stored.raw or b"")

    return await _written(backend, key, lambda: expected if expected is not None else backend.revisions.get(key), overwrite, attempt)
