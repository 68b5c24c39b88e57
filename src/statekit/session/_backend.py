"""What the session pipelines (load, save, update) use of one session object: its storage, its faults told, its memory.

A :class:`~statekit.session.SessionBase` hands its pipelines a :class:`Backend`
made for the call (held by no one after it, so no reference cycle keeps a
session alive): the backend's storage primitives (its class's functions, called
with the session object: no bound method is made per call), each call of
one wrapped so that a backend's own fault becomes a ``SessionError``, the
codec, the secret key and what the object remembers of each session. The
pipelines never reach into the session object itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from statekit.values.secrets import SecretBox
from statekit.codecs import Codec
from statekit.errors import ConflictError
from statekit.session._appends import DeltaBase
from statekit.session._archive import Step
from statekit.session._cancel import finished_despite_cancel
from statekit.session._faults import BackendFaults
from statekit.session._ids import SessionKey
from statekit.session._revisions import Expected, RevisionMemory, conflict_message, revision_of

T = TypeVar("T")

INLINE_DECODE_BYTES = 1 << 20
"""Documents up to this size are decoded on the event loop even by backends that
offload their codec: a thread hop on a busy machine costs more than decoding them (a few ms)."""

Faults = Callable[[str, SessionKey | Callable[[], str]], BackendFaults]
"""Around a call of a storage primitive: a fault that is not a ``StatekitError`` becomes a ``SessionError``."""

PRIMITIVES = (
    "_fetch", "_faults", "_write", "_write_if", "_append", "_saves_deltas", "_source", "_companion_source",
    "_write_keeping", "_get_blob", "_drop_blobs", "_list_blobs", "_get_index",
)
"""The names of the storage primitives the pipelines call (see :class:`Primitives`)."""


class Primitives:
    """A backend class's storage primitives (:data:`PRIMITIVES`, in that order), as plain functions taking the
    session object first: read from its class at each call by :mod:`._storage` (one C call), so that a pipeline
    makes no bound method of its own."""

    __slots__ = (
        "append",
        "companion_source",
        "drop_blobs",
        "faults",
        "fetch",
        "get_blob",
        "get_index",
        "list_blobs",
        "saves_deltas",
        "source",
        "write",
        "write_if",
        "write_keeping",
    )

    def __init__(self, calls: tuple[Callable[..., Any], ...]) -> None:
        (
            self.fetch, self.faults, self.write, self.write_if, self.append, self.saves_deltas, self.source,
            self.companion_source, self.write_keeping, self.get_blob, self.drop_blobs, self.list_blobs,
            self.get_index,
        ) = calls


class Blobs:
    """A backend's history primitives (see :class:`~._storage.Storage`), as the pipelines use them.

    Attributes:
        keep: The object's ``keep_history``.
        supported: The backend's ``supports_history``.
        beside: The backend's ``history_beside`` (it keeps the records beside the head).
    """

    __slots__ = ("_calls", "_storage", "beside", "keep", "supported")

    def __init__(self, keep: int | None, supported: bool, beside: bool, storage: object, calls: Primitives) -> None:
        self.keep, self.supported, self.beside = keep, supported, beside
        self._storage, self._calls = storage, calls

    async def get(self, faults: Faults, key: SessionKey, name: str) -> bytes | None:
        """``_get_blob``, with the backend's faults told as ``SessionError``."""
        with faults("_get_blob", key):
            return await self._calls.get_blob(self._storage, key, name)  # type: ignore[no-any-return]

    async def drop(self, faults: Faults, key: SessionKey, names: tuple[str, ...]) -> None:
        """``_drop_blobs``, with the backend's faults told as ``SessionError``."""
        with faults("_drop_blobs", key):
            await self._calls.drop_blobs(self._storage, key, names)

    async def index(self, faults: Faults, key: SessionKey) -> bytes | None:
        """``_get_index``, with the backend's faults told as ``SessionError``."""
        with faults("_get_index", key):
            return await self._calls.get_index(self._storage, key)  # type: ignore[no-any-return]

    async def listed(self, faults: Faults, key: SessionKey) -> list[str]:
        """``_list_blobs``, with the backend's faults told as ``SessionError``."""
        with faults("_list_blobs", key):
            return await self._calls.list_blobs(self._storage, key)  # type: ignore[no-any-return]


class Backend:
    """One session object's storage and memory, as the pipelines may use them.

    Attributes:
        codec: How documents become bytes.
        secret_box: Seals and opens secret fields (``None``: no key).
        omit_secrets: Without a key, save secret fields' modules without them.
        revisions: What the object remembers of each session.
        writes_in_threads: Whether writes run in worker threads (a cancel lets them finish).
    """

    __slots__ = (
        "_calls",
        "_offload",
        "_storage",
        "blobs",
        "codec",
        "omit_secrets",
        "revisions",
        "secret_box",
        "writes_in_threads",
    )

    def __init__(
        self,
        storage: object,
        calls: Primitives,
        codec: tuple[Codec, bool],
        secrets: tuple[SecretBox | None, bool],
        revisions: RevisionMemory,
        writes_in_threads: bool,
        blobs: tuple[int | None, bool, bool],
    ) -> None:
        self._storage, self._calls = storage, calls
        self.codec, self._offload = codec
        self.secret_box, self.omit_secrets = secrets
        self.revisions = revisions
        self.writes_in_threads = writes_in_threads
        self.blobs = Blobs(*blobs, storage, calls)

    def fetch(self, key: SessionKey) -> Awaitable[bytes | None]:
        """Read the stored bytes (``_read``, its faults told as ``SessionError``)."""
        return self._calls.fetch(self._storage, key)  # type: ignore[no-any-return]

    def faults(self, primitive: str, where: SessionKey | Callable[[], str]) -> BackendFaults:
        """Around a call of a storage primitive: a fault that is not a ``StatekitError`` becomes a
        ``SessionError`` naming the backend and the session."""
        return self._calls.faults(self._storage, primitive, where)  # type: ignore[no-any-return]

    def source(self, key: SessionKey) -> str:
        """How error messages name a stored session."""
        return self._calls.source(self._storage, key)  # type: ignore[no-any-return]

    def companion_source(self, key: SessionKey) -> str:
        """How error messages name a stored session's deltas."""
        return self._calls.companion_source(self._storage, key)  # type: ignore[no-any-return]

    @property
    def keep_history(self) -> int | None:
        """The object's ``keep_history``."""
        return self.blobs.keep

    @property
    def supports_history(self) -> bool:
        """The backend's ``supports_history``."""
        return self.blobs.supported

    def saves_deltas(self) -> bool:
        """Whether a save after appends writes only the new items (see ``supports_appends``)."""
        return self._calls.saves_deltas(self._storage)  # type: ignore[no-any-return]

    async def write(self, key: SessionKey, raw: bytes) -> None:
        """``_write``, with the backend's faults told as ``SessionError``."""
        with self.faults("_write", key):
            await self._calls.write(self._storage, key, raw)

    async def append(self, key: SessionKey, line: bytes, base: DeltaBase) -> int | None:
        """``_append``, with the backend's faults told as ``SessionError``."""
        with self.faults("_append", key):
            return await self._calls.append(self._storage, key, line, base)  # type: ignore[no-any-return]

    @finished_despite_cancel
    async def store(
        self,
        key: SessionKey,
        raw: bytes,
        expected: Expected | None,
        *,
        overwrite: bool,
        base: DeltaBase | None = None,
        names: frozenset[str] | None = None,
        step: Step | None = None,
        remember: bool = True,
    ) -> Expected:
        """Write ``raw``: unconditionally, or only over what is expected (else remembered).

        ``base`` is what a later delta save appends to (a document with append-only lists);
        ``names`` the modules the document holds (a hint for loads, see :class:`Expected`);
        ``step`` what the write does to the session's history (:func:`~._history.plan`: then
        ``expected`` is required); ``remember``: whether the object remembers what it wrote
        (a rollback does not: a save from objects holding the old state must conflict).

        Returns:
            What is stored now (the next save's expectation).

        Raises:
            ConflictError: The stored revision is not the expected one; nothing was written.
        """
        if expected is None and not overwrite:
            expected = self.revisions.get(key)
        revision = None
        if step is not None:
            assert expected is not None, "a write that keeps history is a compare-and-set"
            # the next save names this head by its revision: hashed in a thread while the write waits for the disk
            hashing = asyncio.ensure_future(asyncio.to_thread(revision_of, raw)) if self._hashes_aside(raw) else None
            try:
                with self.faults("_write_keeping", key):
                    written = await self._calls.write_keeping(self._storage, key, raw, expected, step.archive())
            finally:
                revision = None if hashing is None else await hashing
            if not written:
                source = self.source(key)
                raise ConflictError(conflict_message(source, created=expected.matches(None)), source=source)
        elif expected is None or overwrite:
            await self.write(key, raw)
        else:
            with self.faults("_write_if", key):
                written = await self._calls.write_if(self._storage, key, raw, expected)
            if not written:
                source = self.source(key)
                raise ConflictError(conflict_message(source, created=expected.matches(None)), source=source)
        stored = Expected(raw=raw, revision=revision, base=base, names=names, history=None if step is None else step.head)
        if remember:
            self.revisions.remember(key, stored)
        return stored

    def _hashes_aside(self, raw: bytes) -> bool:
        """Whether a write that keeps history hashes ``raw`` in a worker thread meanwhile: when the write runs
        in one too (it waits for the disk) and the bytes are many (else the thread hop costs more)."""
        return self.writes_in_threads and len(raw) > INLINE_DECODE_BYTES // 4

    async def run_codec(self, work: Callable[..., T], *args: Any, size: int | None = None) -> T:
        """Run ``work`` in a worker thread when the backend asks for it, unless
        ``size`` (bytes to decode) is small enough that the hop would cost more."""
        if self._offload and (size is None or size > INLINE_DECODE_BYTES):
            return await asyncio.to_thread(work, *args)
        return work(*args)
