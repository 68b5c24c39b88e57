"""The guard around every RedisSession operation: its timeout, a pool slot, the cluster's slot map, statekit's errors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from types import TracebackType

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from statekit.errors import BackendAuthError, BackendUnavailableError, SessionError
from statekit.session._redis_auth import password_hint
from statekit.session._redis_cluster import is_cluster
from statekit.session._redis_deadlines import Deadlines

_UNAVAILABLE = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.ClusterError,
    redis_errors.RedisClusterException,
    redis_errors.TryAgainError,
    OSError,  # builtin TimeoutError (asyncio.timeout) included
)

_OTHER_LOOP = (
    "a connection of this RedisSession belongs to another event loop (closed, or not the one running here; "
    "redis-py binds connections to the loop that opened them): make one session object per event loop"
)


class Guard:
    """The operations of one client: each bounded in time and waiting for a connection of the pool, the
    cluster's slot map learnt before them, redis-py's errors turned into statekit's, none after a close."""

    __slots__ = ("client", "closed", "cluster", "deadlines", "in_flight", "slots", "topology")

    def __init__(self, client: Redis | RedisCluster) -> None:
        self.client = client
        self.cluster = is_cluster(client)
        self.closed = False  # close() of an owned client: no operation may start (redis-py would reconnect)
        self.in_flight = 0  # operations under errors(): close() lets them end before closing the client
        self.slots = _slots(client)  # more operations than the pool has connections wait their turn
        self.topology = asyncio.Lock()  # a cluster client learns its slot map once, before concurrent use
        self.deadlines = Deadlines()  # one timer for every operation's timeout

    async def close(self, timeout: float, where: Callable[[], str]) -> None:
        """Close the client once the operations in flight end (each within its ``timeout``)."""
        self.closed = True  # no new operation starts; those in flight end first (each within its timeout)
        with contextlib.suppress(TimeoutError):  # then they fail, as the client closes under them
            async with asyncio.timeout(timeout + 1):
                while self.in_flight:
                    await asyncio.sleep(0.001)
        try:
            async with self.errors(where, timeout, closing=True):
                await self.client.aclose()
        finally:
            self.deadlines.close()

    def errors(self, where: Callable[[], str], timeout: float, *, closing: bool = False) -> Operation:
        """Bound the operation by ``timeout`` and turn redis-py's errors into statekit's
        (``where``: the server, or the node, the errors name): ``async with guard.errors(...):``.

        Raises:
            SessionError: The session is closed (``closing``: the close itself), on entering.
        """
        return Operation(self, where, timeout, closing)

    async def ready(self) -> None:
        """Learn the cluster's slot map once (again after a reset) before the commands of many tasks:
        concurrent first commands race in redis-py and fail, or run twice."""
        assert is_cluster(self.client)
        async with self.topology:
            await self.client.initialize()  # returns at once when the map is known


class Operation:
    """One operation under its :class:`Guard` (an ``async with`` block): the counterpart of
    ``asyncio.timeout`` and the pool's semaphore, as one plain class (a generator-based
    context manager and ``asyncio.timeout`` cost three times as much per operation).

    The deadline starts on entering (so waiting for a pool slot counts) and ends on leaving
    (the guard's :class:`~._redis_deadlines.Deadlines`). When it passes, the task is
    cancelled; on leaving, that cancellation is taken back (``Task.uncancel``) and, unless
    someone else cancelled the task too, told as a ``TimeoutError``, exactly as
    ``asyncio.timeout`` does. The deadline cannot pass after the block ended: leaving drops
    it in the same step.
    """

    __slots__ = ("_cancelling", "_closing", "_expired", "_guard", "_handle", "_slot", "_task", "_timeout", "_where")

    def __init__(self, guard: Guard, where: Callable[[], str], timeout: float, closing: bool) -> None:
        self._guard = guard
        self._where = where
        self._timeout = timeout
        self._closing = closing
        self._expired = False
        self._slot = False
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    async def __aenter__(self) -> None:
        guard = self._guard
        if guard.closed and not self._closing:
            raise SessionError(f"Redis at {self._where()}: this session is closed")
        guard.in_flight += 1
        try:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("Timeout should be used inside a task")  # asyncio.timeout's own words
            self._task, self._cancelling = task, task.cancelling()
            self._handle = guard.deadlines.start(self, self._timeout)
            if guard.slots is not None:
                await guard.slots.acquire()
                self._slot = True
            if guard.cluster and not self._closing:
                await guard.ready()
        except BaseException as err:
            self._end(err)
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end(exc)

    def expire(self) -> None:
        """The deadline passed: cancel the task (told as a timeout on leaving)."""
        assert self._task is not None
        self._task.cancel()
        self._expired = True

    def _end(self, exc: BaseException | None) -> None:
        """Give the slot back, stop the timer, count the operation out; raise ``exc`` told as statekit's error
        (return: let it, or nothing, go on as it is)."""
        guard = self._guard
        try:
            if self._slot:
                self._slot = False
                assert guard.slots is not None
                guard.slots.release()
            guard.deadlines.stop(self)
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            if self._expired:
                assert self._task is not None
                if self._task.uncancel() <= self._cancelling and isinstance(exc, asyncio.CancelledError):
                    try:
                        raise TimeoutError from exc
                    except TimeoutError as timeout_error:
                        self._raise_translated(timeout_error)
            if exc is not None:
                self._raise_translated(exc)
        finally:
            guard.in_flight -= 1

    def _raise_translated(self, err: BaseException) -> None:
        """Raise redis-py's error ``err`` as statekit's; return for anything else (it goes on as it is)."""
        where, client = self._where, self._guard.client
        if isinstance(err, (redis_errors.AuthenticationError, redis_errors.AuthorizationError)):
            hint = password_hint(client) if isinstance(err, redis_errors.AuthenticationError) else ""
            raise BackendAuthError(f"Redis at {where()} refused our credentials: {err}{hint}") from err
        if isinstance(err, TimeoutError):
            message = f"Redis at {where()} is unavailable: no answer within {self._timeout:g} s"
            raise BackendUnavailableError(message) from err
        if isinstance(err, _UNAVAILABLE):
            raise BackendUnavailableError(f"Redis at {where()} is unavailable: {err}") from err
        if isinstance(err, redis_errors.RedisError):
            raise SessionError(f"Redis at {where()} refused: {err}") from err
        if isinstance(err, RuntimeError) and "loop" in str(err):
            raise SessionError(f"Redis at {where()}: {_OTHER_LOOP}") from err


def _slots(client: Redis | RedisCluster) -> asyncio.Semaphore | None:
    """One slot per connection of the client's pool: redis-py raises "Too many connections"
    instead of waiting for one (``None`` for a cluster, whose pools are per node)."""
    limit = getattr(getattr(client, "connection_pool", None), "max_connections", None)
    return asyncio.Semaphore(limit) if isinstance(limit, int) and 0 < limit < 2**31 else None
