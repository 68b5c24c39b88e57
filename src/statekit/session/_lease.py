"""``lease()`` and ``alease()``: one session object owns a session's writes for a while; the :class:`Lease` it holds.

A lease is taken from the store (:meth:`~._storage.Storage._take_lease`), which
hands out a fencing token; the object remembers the token (``Storage._leases``)
and every write it makes carries it, so the store can refuse the writes of
anyone else and of a holder whose lease ran out (:mod:`._fence`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine, Generator
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, TypeVar, cast

import attrs

from statekit.errors import SessionError, StatekitError
from statekit.session._fence import LeaseBusy, LeaseGrant, as_datetime, checked_seconds, refuse_held, refuse_lost
from statekit.session._ids import SessionKey
from statekit.session._storage import Storage

T = TypeVar("T")

DEFAULT_TTL = 30.0
"""Seconds a lease lasts unless ``ttl=`` says otherwise."""

MAX_TTL = 365 * 24 * 3600.0
"""The longest ``ttl=``: a year (a lease is for a turn; a longer one is a mistake)."""

FIRST_POLL = 0.01
"""Seconds: the first wait before asking again for a lease that is held (then longer, up to :data:`LAST_POLL`)."""

LAST_POLL = 0.05
"""Seconds: the longest wait between two asks for a held lease."""

Block = Callable[[str, Callable[[], Coroutine[Any, Any, Any]]], Any]
"""Runs a coroutine on the session's private loop and waits (the blocking twins' runner)."""


@attrs.frozen
class LeaseOps:
    """What a :class:`Lease` may do with the session object that holds it (made by :class:`LeaseMethods`).

    Attributes:
        source: How messages name the session.
        renew: Renews the lease of a token for some seconds (``None``: lost), faults told as ``SessionError``.
        release: Forgets the token in the object and ends its lease in the store.
        block: Runs a coroutine on the session's private loop (for the blocking twins).
    """

    source: str
    renew: Callable[[int, float], Coroutine[Any, Any, LeaseGrant | None]]
    release: Callable[[int], Coroutine[Any, Any, None]]
    block: Block


class Lease:
    """A session's lease, held by the session object that took it, until released or expired.

    While it is live, that object alone may write the session (save, update,
    delete, remove modules, write a document, delta saves); anyone else gets
    :class:`~statekit.errors.LeaseHeldError`. Once it expired or was taken over,
    the object's writes raise :class:`~statekit.errors.LeaseLostError` (fencing)
    until it is released. ``with`` / ``async with`` release it on exit.

    Attributes:
        session_id: The session.
        user_id: Its owner.
        token: The fencing token: greater than every token handed out before for this session.
        expires_at: When the lease ends unless renewed (UTC).
        ttl: Seconds the lease was last taken or renewed for.
    """

    __slots__ = ("_key", "_ops", "_released", "expires_at", "token", "ttl")

    def __init__(self, key: SessionKey, granted: LeaseGrant, ttl: float, ops: LeaseOps) -> None:
        self._key = key
        self._ops = ops
        self._released = False
        self.token = granted.token
        self.expires_at: datetime = as_datetime(granted.expires_at)
        self.ttl = ttl

    @property
    def session_id(self) -> str:
        """The session."""
        return self._key.session_id

    @property
    def user_id(self) -> str:
        """The session's owner."""
        return self._key.user_id

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._released

    def __repr__(self) -> str:
        state = "released" if self._released else f"expires_at={self.expires_at.isoformat()}"
        return f"Lease(session_id={self.session_id!r}, user_id={self.user_id!r}, token={self.token}, {state})"

    async def arenew(self, ttl: float | None = None) -> None:
        """Extend the lease to ``ttl`` seconds from now (``None``: the ttl it was taken with).

        Raises:
            LeaseLostError: It expired or was taken over (nothing was extended).
            SessionError: It was released, or ``ttl`` is not a number of seconds above 0.
        """
        seconds = self.ttl if ttl is None else _ttl(ttl)
        if self._released:
            raise SessionError(f"the lease on {self._ops.source} (token {self.token}) was released; take a new one")
        renewed = await self._ops.renew(self.token, seconds)
        if renewed is None:
            refuse_lost(self._ops.source, self.token, "it was not renewed")
        self.expires_at = as_datetime(renewed.expires_at)
        self.ttl = seconds

    def renew(self, ttl: float | None = None) -> None:
        """Blocking :meth:`arenew`."""
        self._ops.block("renew", lambda: self.arenew(ttl))

    async def arelease(self) -> None:
        """End the lease now, if it is still this object's (a lost or released lease: nothing to do).

        The object's writes carry no token afterwards.
        """
        if self._released:
            return
        self._released = True
        await self._ops.release(self.token)

    def release(self) -> None:
        """Blocking :meth:`arelease`."""
        self._ops.block("release", self.arelease)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        _released_on_exit(self.release, error)

    async def __aenter__(self) -> Lease:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await _areleased_on_exit(self.arelease, error)


def _released_on_exit(release: Callable[[], None], error: BaseException | None) -> None:
    """Release; when the block raised, a failed release does not hide its error (the lease then just runs out)."""
    try:
        release()
    except StatekitError:
        if error is None:
            raise


async def _areleased_on_exit(release: Callable[[], Coroutine[Any, Any, None]], error: BaseException | None) -> None:
    try:
        await release()
    except StatekitError:
        if error is None:
            raise


class LeaseTaking(Coroutine[Any, Any, Lease]):
    """What :meth:`~statekit.session.SessionBase.alease` returns: a coroutine of the :class:`Lease` (await it,
    or hand it to ``asyncio.create_task``), which also works in ``async with`` (released on exit).

    The taking starts when it is first awaited (or entered): made and dropped unused, it takes nothing.
    """

    __slots__ = ("_lease", "_running", "_take")

    def __init__(self, take: Callable[[], Coroutine[Any, Any, Lease]]) -> None:
        self._take = take
        self._running: Coroutine[Any, Any, Lease] | None = None
        self._lease: Lease | None = None

    def _started(self) -> Coroutine[Any, Any, Lease]:
        if self._running is None:
            self._running = self._take()
        return self._running

    def __await__(self) -> Generator[Any, None, Lease]:
        return self._started().__await__()

    def send(self, value: Any) -> Any:
        return self._started().send(value)

    def throw(self, kind: Any, value: Any = None, trace: Any = None) -> Any:
        if value is None and trace is None:  # the one-argument form (the three-argument one is deprecated)
            return self._started().throw(kind)
        return self._started().throw(kind, value, trace)

    def close(self) -> None:
        if self._running is not None:
            self._running.close()

    async def __aenter__(self) -> Lease:
        self._lease = await self._take()
        return self._lease

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._lease is not None:
            await _areleased_on_exit(self._lease.arelease, error)


class _Session(Protocol):
    def key(self, session_id: str, user_id: str | None = None) -> SessionKey: ...
    def _block(self, name: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T: ...


class LeaseMethods(Storage):
    """``lease`` and ``alease`` of :class:`~statekit.session.SessionBase` (which gives ``key`` and ``_block``)."""

    def alease(
        self, session_id: str, user_id: str | None = None, *, ttl: float = DEFAULT_TTL, wait: float = 0.0
    ) -> LeaseTaking:
        """Take the session's lease for ``ttl`` seconds: this object alone may write the session meanwhile.

        ``async with session.alease("s") as lease:`` releases it on exit (also on
        an exception); ``lease = await session.alease("s")`` keeps it until
        :meth:`Lease.arelease`. The session need not exist. See docs/leases.md.

        Args:
            session_id: The session.
            user_id: Its owner (``None``: the backend's default user).
            ttl: Seconds the lease lasts unless renewed (``Lease.arenew``).
            wait: Seconds to wait for a lease another holder has, before giving up.

        Raises:
            LeaseHeldError: Another holder's lease is still live after ``wait`` seconds (it says until when).
            SessionError: The backend does not support leases, this object already
                holds the session's lease, or ``ttl`` / ``wait`` is not a number of seconds.
            InvalidSessionIdError: An id is empty, too long or holds NUL.
        """
        key = cast("_Session", self).key(session_id, user_id)
        seconds, waited = _ttl(ttl), checked_seconds(wait, "wait", positive=False)
        return LeaseTaking(lambda: self._take(key, seconds, waited))

    def lease(self, session_id: str, user_id: str | None = None, *, ttl: float = DEFAULT_TTL, wait: float = 0.0) -> Lease:
        """Blocking :meth:`alease`: ``with session.lease("s") as lease:`` releases it on exit."""
        taking = self.alease(session_id, user_id, ttl=ttl, wait=wait)
        return cast("_Session", self)._block("lease", lambda: _awaited(taking))

    async def _take(self, key: SessionKey, ttl: float, wait: float) -> Lease:
        if not self.supports_leases:
            raise SessionError(f"{type(self).__name__} does not support leases (supports_leases is false)")
        if key in self._leases:
            raise SessionError(
                f"this session object already holds the lease on {self._source(key)} "
                f"(token {self._leases[key]}); renew it, or release it before taking another"
            )
        deadline = time.monotonic() + wait
        pause = FIRST_POLL
        while True:
            with self._faults("_take_lease", key):
                outcome = await self._take_lease(key, ttl)
            if isinstance(outcome, LeaseGrant):
                self._leases[key] = outcome.token
                return Lease(key, outcome, ttl, self._lease_ops(key))
            busy = _busy(outcome, self)
            left = deadline - time.monotonic()
            if left <= 0:
                refuse_held(self._source(key), busy.expires_at, "lease")
            until_free = max(busy.expires_at - time.time(), 0.0) + 0.001
            await asyncio.sleep(min(left, until_free, pause * random.uniform(0.5, 1.0)))  # noqa: S311 - jitter
            pause = min(pause * 2, LAST_POLL)

    def _lease_ops(self, key: SessionKey) -> LeaseOps:
        async def renew(token: int, ttl: float) -> LeaseGrant | None:
            with self._faults("_renew_lease", key):
                renewed = await self._renew_lease(key, token, ttl)
            return None if renewed is None else _granted(renewed, self)

        async def release(token: int) -> None:
            if self._leases.get(key) == token:
                del self._leases[key]
            with self._faults("_release_lease", key):
                await self._release_lease(key, token)

        return LeaseOps(self._source(key), renew, release, cast("_Session", self)._block)


async def _awaited(taking: LeaseTaking) -> Lease:
    return await taking


def _ttl(value: object) -> float:
    seconds = checked_seconds(value, "ttl", positive=True)
    if seconds > MAX_TTL:
        raise SessionError(f"ttl must be at most {MAX_TTL:.0f} seconds (a year), not {value!r}")
    return seconds


def _granted(outcome: object, storage: object) -> LeaseGrant:
    if not isinstance(outcome, LeaseGrant):
        raise SessionError(f"{type(storage).__name__}._renew_lease returned {outcome!r}; it must return LeaseGrant or None")
    return outcome


def _busy(outcome: object, storage: object) -> LeaseBusy:
    if not isinstance(outcome, LeaseBusy):
        raise SessionError(f"{type(storage).__name__}._take_lease returned {outcome!r}; it must return LeaseGrant or LeaseBusy")
    return outcome
