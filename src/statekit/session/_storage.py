"""``Storage``: the primitives a session backend implements (with their defaults), and the :class:`Backend` its pipelines get.

A backend stores opaque bytes under a :class:`SessionKey` and implements a few
async primitives (``_read``, ``_write``, ``_delete``, ``_list`` and, optionally,
``_exists``, the compare-and-set ``_write_if`` and ``_append``).
:class:`~statekit.session.SessionBase` builds the public API on them; its
pipelines (load, save, update) reach them only through :meth:`Storage._backend`.
"""

from __future__ import annotations

import abc
import operator
from collections.abc import Callable
from functools import partial
from typing import ClassVar

from statekit.values.secrets import SecretBox
from statekit.codecs import JSON, Codec
from statekit.errors import SessionError
from statekit.session._appends import DeltaBase
from statekit.session._archive import Archive
from statekit.session._backend import PRIMITIVES, Backend, Primitives
from statekit.session._faults import BackendFaults, read_bytes
from statekit.session._fence import LeaseBusy, LeaseGrant
from statekit.session._ids import SessionKey
from statekit.session._revisions import Expected, RevisionMemory


class Storage(abc.ABC):
    """The storage primitives of a session backend, and what the object remembers of each session."""

    codec: ClassVar[Codec] = JSON
    offload_codec: ClassVar[bool] = False
    default_user_id: ClassVar[str] = ""
    _secret_box: SecretBox | None = None
    omit_secrets: bool = False
    """Without a ``secret_key``: save modules holding ``state_field(secret=True)``
    without those fields (``False``: refuse such a save with ``SecretError``). See docs/secrets.md."""

    writes_in_threads: ClassVar[bool] = False
    """Whether the backend writes in worker threads, which a cancel does not stop: saves and
    deletes then finish (and are remembered) before ``CancelledError`` is raised."""

    supports_appends: ClassVar[bool] = False
    """Whether the backend stores deltas of append-only lists (``_append``); else every save rewrites."""

    def _saves_deltas(self) -> bool:
        """Whether a save after appends writes only the new items (see ``supports_appends``)."""
        return self.supports_appends and self.codec.fast

    @abc.abstractmethod
    async def _read(self, key: SessionKey) -> bytes | None:
        """The stored bytes, or ``None`` when there is no such session."""

    @abc.abstractmethod
    async def _write(self, key: SessionKey, data: bytes) -> None:
        """Replace the stored bytes, atomically: a reader sees old or new, whole."""

    @abc.abstractmethod
    async def _delete(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` when there was one.

        A backend with ``supports_history`` removes the session's blobs too, in the same step where its
        store allows (the caller also drops what :meth:`_list_blobs` still lists afterwards)."""

    @abc.abstractmethod
    async def _list(self, user_id: str) -> list[str]:
        """The session ids stored for ``user_id``, in any order."""

    async def _list_users(self) -> list[str]:
        """The user ids that have sessions, in any order (a backend that can tell overrides this)."""
        raise SessionError(f"{type(self).__name__} cannot list its users")

    async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
        """Replace the stored bytes only if their revision is still ``expected``.

        The compare-and-set every conditional save goes through. This default
        reads, compares and writes, which is atomic only when nothing else writes
        the storage in between (one process, a storage without awaits inside);
        a backend overrides it with its storage's own compare-and-set.

        Args:
            key: The session.
            data: The whole new document.
            expected: What must be stored: ``expected.matches(stored_bytes)``
                says (``None`` for nothing stored), and ``expected.revision``
                is its revision (:data:`~statekit.session.MISSING_REVISION` for nothing stored),
                for storages that compare revisions themselves. After a delta save
                only ``expected.base`` is known (``expected.only_base``); a
                backend with ``supports_appends`` checks it.

        Returns:
            ``True`` when written; ``False`` when the stored revision differs
            (then nothing was written).
        """
        if not expected.matches(await self._fetch(key)):
            return False
        with self._faults("_write", key):
            await self._write(key, data)
        return True

    async def _append(self, key: SessionKey, line: bytes, base: DeltaBase) -> int | None:
        """Store one delta (new items of append-only lists) if the session is still ``base``.

        Only called on backends whose ``supports_appends`` is true.

        Returns:
            How many bytes the stored deltas grew by; ``None`` when the stored
            session is not ``base`` any more (then nothing was written).
        """
        raise NotImplementedError(f"{type(self).__name__} does not store deltas")

    keep_history: int | None = 0
    """How many past revisions of each session this object keeps at least (``None``: all; see docs/history.md).
    Set by the constructor's ``keep_history=`` (:func:`~._archive.checked_keep`)."""

    supports_history: ClassVar[bool] = False
    """Whether the backend keeps past revisions (``keep_history``, docs/history.md): it stores blobs
    (``_put_blob``...) and its ``_write_keeping`` keeps the old head in the compare-and-set's own step."""

    async def _write_keeping(self, key: SessionKey, data: bytes, expected: Expected, archive: Archive) -> bool:
        """:meth:`_write_if`, keeping the old head as a blob and dropping pruned ones, all in one atomic step.

        Only called on backends whose ``supports_history`` is true, and only for sessions that keep
        history. When the stored bytes are still ``expected``: store exactly those bytes (what
        :meth:`_read` returns, deltas included) as the blob ``archive.keep_as`` (unless ``None``),
        replace them with ``data``, and remove the blobs ``archive.drop``. A reader never sees the new
        head without its kept blob. This default reads, compares and writes, which is atomic only
        when nothing else writes the storage in between; a backend overrides it with its storage's
        own transaction (and may keep the old head without copying it, e.g. a hard link).

        Returns:
            ``True`` when written; ``False`` when the stored revision differs (nothing written).
        """
        stored = await self._fetch(key)
        if not expected.matches(stored):
            return False
        if archive.keep_as is not None and stored is not None:
            await self._put_blob(key, archive.keep_as, stored)
        with self._faults("_write", key):
            await self._write(key, data)
        if archive.drop:
            await self._drop_blobs(key, archive.drop)
        return True

    history_beside: ClassVar[bool] = False
    """Whether the backend keeps a session's kept records beside its head (see :mod:`._history_beside`):
    its ``_write_keeping`` does ``archive.index`` to them in the same step, and ``_get_index`` reads them."""

    async def _get_index(self, key: SessionKey) -> bytes | None:
        """The session's kept records, as a backend with ``history_beside`` keeps them (``None``: none)."""
        raise SessionError(f"{type(self).__name__} keeps no history index beside its sessions (history_beside is false)")

    async def _put_blob(self, key: SessionKey, name: str, data: bytes) -> None:
        """Store ``data`` as the session's blob ``name`` (durably, before returning; idempotent:
        a blob of that name always holds the same bytes). ``data`` may carry deltas (``data.log``)."""
        raise SessionError(f"{type(self).__name__} does not keep history (supports_history is false)")

    async def _get_blob(self, key: SessionKey, name: str) -> bytes | None:
        """The session's blob ``name``, as :meth:`_read` would return those bytes; ``None``: no such blob."""
        raise SessionError(f"{type(self).__name__} does not keep history (supports_history is false)")

    async def _drop_blobs(self, key: SessionKey, names: tuple[str, ...]) -> None:
        """Remove the session's blobs ``names`` (those that do not exist are ignored)."""
        raise SessionError(f"{type(self).__name__} does not keep history (supports_history is false)")

    async def _list_blobs(self, key: SessionKey) -> list[str]:
        """The names of the session's blobs, in any order (``[]`` when none)."""
        raise SessionError(f"{type(self).__name__} does not keep history (supports_history is false)")

    supports_leases: ClassVar[bool] = False
    """Whether the backend keeps leases (``_take_lease``...) and fences every write with them (docs/leases.md)."""

    async def _take_lease(self, key: SessionKey, ttl: float) -> LeaseGrant | LeaseBusy:
        """Take the session's lease for ``ttl`` seconds, unless another holder's lease is live.

        Atomic in the store: of two takers at once, one gets it. The token is
        strictly greater than every token given before for this session (it
        survives releases, deletes of the session and restarts of the client).

        Returns:
            :class:`LeaseGrant` (token, expiry) or :class:`LeaseBusy` (the live lease's expiry).
        """
        raise SessionError(f"{type(self).__name__} does not support leases (supports_leases is false)")

    async def _renew_lease(self, key: SessionKey, token: int, ttl: float) -> LeaseGrant | None:
        """Extend the lease of ``token`` to ``ttl`` seconds from now; ``None`` when it is not the live lease any more."""
        raise SessionError(f"{type(self).__name__} does not support leases (supports_leases is false)")

    async def _release_lease(self, key: SessionKey, token: int) -> None:
        """End the lease of ``token`` now, if it is still the live one (else change nothing)."""
        raise SessionError(f"{type(self).__name__} does not support leases (supports_leases is false)")

    def _fence(self, key: SessionKey) -> int | None:
        """The token of the lease this object holds on ``key`` (``None``: it holds none).

        Every write primitive of a backend with ``supports_leases`` checks it
        against the stored lease in the write's own atomic step
        (:func:`statekit.session._fence.fence_verdict`), and raises what
        :func:`statekit.session._fence.check_fence` raises when refused.
        """
        held = self._leases
        return held.get(key) if held else None  # no lease held (the usual case): the key is not hashed

    @property
    def _leases(self) -> dict[SessionKey, int]:
        """The leases this object holds: session to token (made on first use, like the revision memory)."""
        held: dict[SessionKey, int] | None = self.__dict__.get("_held_leases")
        if held is None:
            held = self.__dict__.setdefault("_held_leases", {})
        return held

    def _companion_source(self, key: SessionKey) -> str:
        """How error messages name the stored deltas of a session."""
        return f"{self._source(key)} (appended items)"

    async def _list_some(self, user_id: str, limit: int) -> tuple[list[str], bool]:
        """Up to ``limit`` of the user's session ids and whether there are more (for a missing load's hint).

        Lists them all by default; a backend whose stores may be huge bounds the work.
        """
        ids = await self._list(user_id)
        return ids[:limit], len(ids) > limit

    async def _owners(self, session_id: str, limit: int) -> tuple[list[str], bool]:
        """Up to ``limit`` users holding a session with this id, and whether there are more
        (for a missing load's hint; none known by default)."""
        return [], False

    async def _exists(self, key: SessionKey) -> bool:
        """Whether the session exists (override when a cheaper test exists)."""
        return await self._fetch(key) is not None

    async def _close(self) -> None:
        """Release what the backend opened (nothing by default)."""

    def _source(self, key: SessionKey) -> str:
        """How error messages name the stored session (a file name, a key)."""
        return f"session {key.session_id!r} of user {key.user_id!r}"

    def _check_key(self, key: SessionKey) -> None:
        """Refuse ids the storage cannot hold (e.g. too long for a file name)."""

    @property
    def _revisions(self) -> RevisionMemory:
        memory: RevisionMemory | None = self.__dict__.get("_revision_memory")
        if memory is None:  # made on first use: backends need not call an __init__ of ours
            memory = self.__dict__.setdefault("_revision_memory", RevisionMemory())
        return memory

    def _faults(self, primitive: str, where: SessionKey | Callable[[], str]) -> BackendFaults:
        """Around a call of a storage primitive: a fault that is not a ``StatekitError`` becomes a ``SessionError``."""
        if isinstance(where, SessionKey):
            return BackendFaults(self, primitive, partial(self._source, where))
        return BackendFaults(self, primitive, where)

    async def _fetch(self, key: SessionKey) -> bytes | None:
        """The stored bytes (``_read``), with the backend's faults told as ``SessionError``."""
        try:
            raw = await self._read(key)
        except Exception:  # (the wrapper that tells it is made only when there is something to tell)
            with self._faults("_read", key):
                raise
        if raw is None or type(raw) is bytes:
            return raw
        return read_bytes(raw, self, partial(self._source, key))

    def _backend(self) -> Backend:
        """What the pipelines (load, save, update) use of this object, made for one call."""
        return Backend(
            self,
            _primitives(self),
            (self.codec, self.offload_codec),
            (self._secret_box, self.omit_secrets),
            self._revisions,
            self.writes_in_threads,
            (self.keep_history, self.supports_history, self.history_beside),
        )


_PRIMITIVE_NAMES = frozenset(PRIMITIVES)
_primitives_of = operator.attrgetter(*PRIMITIVES)


def _primitives(storage: Storage) -> Primitives:
    """The storage primitives of ``storage``: its class's functions, read at each call (a test or a user may
    replace one on the class); an object that set one of them on itself (a test's stand-in) gets those."""
    if not _PRIMITIVE_NAMES.isdisjoint(storage.__dict__):
        return Primitives(tuple(_unbound(getattr(storage, name)) for name in PRIMITIVES))
    return Primitives(_primitives_of(type(storage)))


def _unbound(call: Callable[..., object]) -> Callable[..., object]:
    """``call`` (set on an object itself), called as its class's functions are: with the object first, ignored."""
    return lambda _storage, *args: call(*args)
