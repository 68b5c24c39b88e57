"""The ``WATCH``/``MULTI`` twins of RedisSession's write scripts, for Redis servers that run no Lua."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.client import NEVER_DECODE

from statekit.session._appends import DeltaBase
from statekit.session._redis_fence import Answer, fence_watching
from statekit.session._redis_ids import DONE, Pipe, Planned, companion_expiry, watched
from statekit.session._redis_once import Sending, executed
from statekit.session._revisions import Expected
from statekit.session.document import HEAD_BYTES, doc_token


async def if_base_watching(
    client: Redis | RedisCluster,
    keys: tuple[str, str, str],
    base: DeltaBase,
    data: bytes,
    change: tuple[str, tuple[int, bytes] | None],
    ttl: tuple[int | None, bool],
    attempt: tuple[str, bool, Sending, int | None],
) -> Answer:
    """The same as ``IF_BASE`` with ``WATCH``/``MULTI``, for servers that run no Lua
    (``keys``: the value's, its companion's and its lease's; ``change``: the mode and the header's count
    to write; ``ttl``: the session's ``key_ttl`` and whether a save keeps the key's own expiry; ``attempt``:
    the write's id, whether it is sent again, its ``Sending``, the lease token it carries)."""
    name, (mode, count), (key_ttl, keep_ttl) = keys[0], change, ttl

    async def reads(pipe: Pipe) -> Planned:
        expiry = await companion_expiry(pipe, name, key_ttl, mode != "set" or keep_ttl)
        # raw bytes even from a decode_responses client: 512 bytes may end inside a character
        head = await pipe.execute_command("GETRANGE", name, 0, HEAD_BYTES - 1, **{NEVER_DECODE: True})
        if not isinstance(head, bytes) or doc_token(head) != base.token:
            return None
        if await pipe.strlen(name) != base.doc_len + base.log_len:
            return None
        return queue, expiry

    def queue(pipe: Pipe) -> None:
        if mode == "set":
            pipe.set(name, data, **_expiry(key_ttl, keep_ttl))
        elif data:
            pipe.append(name, data)
        if count is not None:
            pipe.setrange(name, *count)
        if mode != "set" and key_ttl is not None:
            pipe.expire(name, key_ttl)

    return await watched(client, keys, attempt, reads)


async def compare_and_set_watching(
    client: Redis | RedisCluster,
    keys: tuple[str, str, str],
    data: bytes,
    expected: Expected,
    ttl: tuple[int | None, bool],
    attempt: tuple[str, bool, Sending, int | None],
) -> Answer:
    """The same compare-and-set with ``WATCH``/``MULTI``, for servers that run no Lua."""
    name, (key_ttl, keep_ttl) = keys[0], ttl

    async def reads(pipe: Pipe) -> Planned:
        expiry = await companion_expiry(pipe, name, key_ttl, keep_ttl)
        current = await pipe.get(name)
        if not expected.matches(current.encode("utf-8") if isinstance(current, str) else current):
            return None
        return (lambda queued: queued.set(name, data, **_expiry(key_ttl, keep_ttl))), expiry

    return await watched(client, keys, attempt, reads)


async def set_watching(
    client: Redis | RedisCluster,
    keys: tuple[str, str],
    data: bytes,
    ttl: tuple[int | None, bool],
    attempt: tuple[int | None, Sending],
) -> Answer:
    """``SET_SCRIPT`` with ``WATCH``/``MULTI`` (``keys``: the value's and its lease's; ``attempt``: the lease
    token the write carries, its ``Sending``): the lease fence, then the write; a lease changed meanwhile looks again."""
    (name, lease), (token, sending) = keys, attempt
    while True:
        async with client.pipeline(transaction=True) as pipe:
            await pipe.watch(lease)
            refused = await fence_watching(pipe, lease, token)
            if refused is not None:
                return refused
            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            pipe.set(name, data, **_expiry(*ttl))
            if await executed(pipe, sending):
                return DONE


def _expiry(key_ttl: int | None, keep_ttl: bool) -> dict[str, Any]:
    """``SET``'s expiry options, as the scripts' TTL argument says."""
    return {"ex": key_ttl, "keepttl": key_ttl is None and keep_ttl}
