"""The guard around every RedisSession operation: its timeout, a pool slot, the cluster's slot map, statekit's errors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from statekit.errors import BackendAuthError, BackendUnavailableError, SessionError
from statekit.session._redis_auth import password_hint
from statekit.session._redis_cluster import is_cluster

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

    __slots__ = ("client", "closed", "in_flight", "slots", "topology")

    def __init__(self, client: Redis | RedisCluster) -> None:
        self.client = client
        self.closed = False  # close() of an owned client: no operation may start (redis-py would reconnect)
        self.in_flight = 0  # operations under errors(): close() lets them end before closing the client
        self.slots = _slots(client)  # more operations than the pool has connections wait their turn
        self.topology = asyncio.Lock()  # a cluster client learns its slot map once, before concurrent use

    async def close(self, timeout: float, where: Callable[[], str]) -> None:
        """Close the client once the operations in flight end (each within its ``timeout``)."""
        self.closed = True  # no new operation starts; those in flight end first (each within its timeout)
        with contextlib.suppress(TimeoutError):  # then they fail, as the client closes under them
            async with asyncio.timeout(timeout + 1):
                while self.in_flight:
                    await asyncio.sleep(0.001)
        async with self.errors(where, timeout, closing=True):
            await self.client.aclose()

    @contextlib.asynccontextmanager
    async def errors(self, where: Callable[[], str], timeout: float, *, closing: bool = False) -> AsyncIterator[None]:
        """Bound the operation by ``timeout`` and turn redis-py's errors into statekit's
        (``where``: the server, or the node, the errors name).

        Raises:
            SessionError: The session is closed (``closing``: the close itself).
        """
        if self.closed and not closing:
            raise SessionError(f"Redis at {where()}: this session is closed")
        self.in_flight += 1
        try:
            async with asyncio.timeout(timeout), self.slots or contextlib.nullcontext():
                if is_cluster(self.client) and not closing:
                    await self._ready(self.client)
                yield
        except (redis_errors.AuthenticationError, redis_errors.AuthorizationError) as err:
            hint = password_hint(self.client) if isinstance(err, redis_errors.AuthenticationError) else ""
            raise BackendAuthError(f"Redis at {where()} refused our credentials: {err}{hint}") from err
        except TimeoutError as err:
            message = f"Redis at {where()} is unavailable: no answer within {timeout:g} s"
            raise BackendUnavailableError(message) from err
        except _UNAVAILABLE as err:
            raise BackendUnavailableError(f"Redis at {where()} is unavailable: {err}") from err
        except redis_errors.RedisError as err:
            raise SessionError(f"Redis at {where()} refused: {err}") from err
        except RuntimeError as err:
            if "loop" not in str(err):
                raise
            raise SessionError(f"Redis at {where()}: {_OTHER_LOOP}") from err
        finally:
            self.in_flight -= 1

    async def _ready(self, client: RedisCluster) -> None:
        """Learn the cluster's slot map once (again after a reset) before the commands of many tasks:
        concurrent first commands race in redis-py and fail, or run twice."""
        async with self.topology:
            await client.initialize()  # returns at once when the map is known


def _slots(client: Redis | RedisCluster) -> asyncio.Semaphore | None:
    """One slot per connection of the client's pool: redis-py raises "Too many connections"
    instead of waiting for one (``None`` for a cluster, whose pools are per node)."""
    limit = getattr(getattr(client, "connection_pool", None), "max_connections", None)
    return asyncio.Semaphore(limit) if isinstance(limit, int) and 0 < limit < 2**31 else None
