"""RedisSession's leases: their two keys beside the session's, and taking, renewing and releasing one in one round trip.

A session key ``K`` has, once leased, ``K:lease-token`` (a counter ``INCR``ed
at each take, never expiring: tokens keep growing over releases and deletes of
the session) and, while a lease is live, ``K:lease`` (the token, expired by
Redis with ``PX``). On a Redis Cluster both carry a hash tag when needed to
sit in ``K``'s slot (as the write ids do, :func:`._redis_ids.beside`), so one
script touches them with the session's keys. Expiries come from the server's
clock (``TIME``, ``PTTL``). On a server without Lua, ``WATCH``/``MULTI`` twins
answer the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.client import NEVER_DECODE

from statekit.session._fence import LeaseBusy, LeaseGrant
from statekit.session._redis_cluster import is_cluster
from statekit.session._redis_fence import CLOCK, now_ms
from statekit.session._redis_ids import Pipe, beside
from statekit.session._redis_once import Sending, raise_if_lost
from statekit.session._redis_scripts import Script, Scripting

LEASE_SUFFIX = ":lease"
"""What follows a session key in its live lease's key (never ``:state``: listing does not see it)."""

TOKEN_SUFFIX = ":lease-token"
"""What follows a session key in its token counter's key."""

TAKE = Script(CLOCK + """
local left = redis.call('PTTL', KEYS[1])
if left ~= -2 then return {0, now_ms() + math.max(left, 0)} end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
return {token, now_ms() + tonumber(ARGV[1])}
""")
"""Take the lease (KEYS[1]) for ARGV[1] ms unless one is live: ``{token, expiry_ms}`` from the counter (KEYS[2]),
or ``{0, expiry_ms}`` of the live one."""

RENEW = Script(CLOCK + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now_ms() + tonumber(ARGV[2])
""")
"""Extend the lease (KEYS[1]) of token ARGV[1] to ARGV[2] ms from now: its new expiry in ms, or -1 when it is not live."""

RELEASE = Script("""
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
""")
"""End the lease (KEYS[1]) of token ARGV[1], if it is still the live one; the counter stays."""


def lease_key(name: str, cluster: bool) -> str:
    """The key of session key ``name``'s live lease (on a cluster, in ``name``'s slot)."""
    return beside(name, LEASE_SUFFIX, cluster)


class Leasing:
    """The lease operations of one client: the scripts above, or their twins on a server without Lua."""

    __slots__ = ("client", "scripting")

    def __init__(self, client: Redis | RedisCluster, scripting: Scripting) -> None:
        self.client = client
        self.scripting = scripting

    def _keys(self, name: str) -> tuple[str, str]:
        cluster = is_cluster(self.client)
        return lease_key(name, cluster), beside(name, TOKEN_SUFFIX, cluster)

    async def take(self, name: str, ttl: float) -> LeaseGrant | LeaseBusy:
        """Take session key ``name``'s lease for ``ttl`` seconds, or learn until when it is held."""
        keys, ms = self._keys(name), _ms(ttl)
        twin = partial(_take_watching, self.client, keys, ms)
        token, until = await self.scripting.run(TAKE, Sending(), keys, (ms,), twin)
        return LeaseBusy(int(until) / 1000) if int(token) == 0 else LeaseGrant(int(token), int(until) / 1000)

    async def renew(self, name: str, token: int, ttl: float) -> LeaseGrant | None:
        """Extend the lease of ``token`` to ``ttl`` seconds from now; ``None`` when it is not live any more."""
        keys, ms = (lease_key(name, is_cluster(self.client)),), _ms(ttl)
        twin = partial(_renew_watching, self.client, keys[0], token, ms)
        until = int(await self.scripting.run(RENEW, Sending(), keys, (token, ms), twin))
        return None if until < 0 else LeaseGrant(token, until / 1000)

    async def release(self, name: str, token: int) -> None:
        """End the lease of ``token`` if it is still the live one."""
        keys = (lease_key(name, is_cluster(self.client)),)
        twin = partial(_release_watching, self.client, keys[0], token)
        await self.scripting.run(RELEASE, Sending(), keys, (token,), twin)


def _ms(seconds: float) -> int:
    """A ttl in whole milliseconds, at least one (``PX`` refuses 0)."""
    return max(1, round(seconds * 1000))


Plan = Callable[[Pipe], Awaitable[Any]]
"""Reads under ``WATCH``, then ``MULTI``, the writes and ``EXEC``: the answer (a changed key raises ``WatchError``)."""


async def _transaction(client: Redis | RedisCluster, watch: tuple[str, ...], plan: Plan) -> Any:
    """``plan``'s answer, run again while a watched key changes before ``EXEC`` (the operation's timeout ends it);
    a connection lost meanwhile is raised as that loss: such a lease operation is not sent again."""
    while True:
        try:
            async with client.pipeline(transaction=True) as pipe:
                await pipe.watch(*watch)
                return await plan(pipe)
        except redis_errors.WatchError as err:
            raise_if_lost(err)  # else another client changed the lease first: look again


async def _take_watching(client: Redis | RedisCluster, keys: tuple[str, str], ms: int) -> list[int]:
    """``TAKE`` with ``WATCH``/``MULTI``."""
    lease, counter = keys

    async def plan(pipe: Pipe) -> list[int]:
        left = await pipe.pttl(lease)
        if left != -2:
            return [0, now_ms(await pipe.time()) + max(left, 0)]
        last: Any = await pipe.execute_command("GET", counter, **{NEVER_DECODE: True})
        token = int(last or 0) + 1
        pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        pipe.set(counter, token)
        pipe.set(lease, token, px=ms)
        pipe.time()
        done: list[Any] = await pipe.execute()
        return [token, now_ms(done[2]) + ms]

    result: list[int] = await _transaction(client, keys, plan)
    return result


async def _renew_watching(client: Redis | RedisCluster, lease: str, token: int, ms: int) -> int:
    """``RENEW`` with ``WATCH``/``MULTI``."""

    async def plan(pipe: Pipe) -> int:
        if not await _holds(pipe, lease, token):
            return -1
        pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        pipe.pexpire(lease, ms)
        pipe.time()
        done: list[Any] = await pipe.execute()
        return now_ms(done[1]) + ms

    return int(await _transaction(client, (lease,), plan))


async def _release_watching(client: Redis | RedisCluster, lease: str, token: int) -> int:
    """``RELEASE`` with ``WATCH``/``MULTI``."""

    async def plan(pipe: Pipe) -> int:
        if await _holds(pipe, lease, token):
            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            pipe.delete(lease)
            await pipe.execute()
        return 0

    return int(await _transaction(client, (lease,), plan))


async def _holds(pipe: Pipe, lease: str, token: int) -> bool:
    """Whether the live lease (read while watched) is ``token``'s."""
    held: Any = await pipe.execute_command("GET", lease, **{NEVER_DECODE: True})
    return held is not None and int(held) == token
