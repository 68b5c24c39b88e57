"""The ``WATCH``/``MULTI`` twins of RedisSession's write scripts, for Redis servers that run no Lua."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.client import NEVER_DECODE

from statekit.session._history_beside import advance
from statekit.session._redis_fence import Answer, fence_watching
from statekit.session._redis_history import keep_plan, records_text
from statekit.session._redis_ids import DONE, Keys, Pipe, Planned, companion_expiry, expire_as, watched
from statekit.session._redis_once import Sending, executed
from statekit.session._redis_reads import value_read
from statekit.session._revisions import MISSING_REVISION, revision_of
from statekit.session.document import HEAD_BYTES


async def if_base_watching(
    client: Redis | RedisCluster,
    keys: Keys,
    args: tuple[Any, ...],
    ttl: tuple[int | None, bool],
    attempt: tuple[str, bool, Sending, int | None],
) -> Answer:
    """The same as ``IF_BASE`` with ``WATCH``/``MULTI``, for servers that run no Lua
    (``keys``: the value's, its companion's, its lease's and its kept revisions'; ``args``: the script's own,
    read as it reads them; ``ttl``: the session's ``key_ttl`` and whether a save keeps the key's own expiry;
    ``attempt``: the write's id, whether it is sent again, its ``Sending``, the lease token it carries)."""
    mark, length, data, mode, _, at, field = args
    name, count, (key_ttl, keep_ttl) = keys[0], None if at == "" else (int(at), field), ttl

    async def reads(pipe: Pipe) -> Planned:
        expiry = await companion_expiry(pipe, name, key_ttl, mode != "set" or keep_ttl)
        # raw bytes even from a decode_responses client: 512 bytes may end inside a character
        head = await pipe.execute_command("GETRANGE", name, 0, HEAD_BYTES - 1, **{NEVER_DECODE: True})
        if not isinstance(head, bytes) or mark.encode() not in head:
            return None
        if await pipe.strlen(name) != int(length):
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
    keys: Keys,
    args: tuple[Any, ...],
    ttl: tuple[int | None, bool],
    attempt: tuple[str, bool, Sending, int | None],
) -> Answer:
    """The same compare-and-set with ``WATCH``/``MULTI``, for servers that run no Lua (``args``: the
    script's own, the new value and the revision expected first)."""
    name, data, revision, (key_ttl, keep_ttl) = keys[0], args[0], args[1], ttl

    async def reads(pipe: Pipe) -> Planned:
        expiry = await companion_expiry(pipe, name, key_ttl, keep_ttl)
        if not _is_revision(value_read(await pipe.get(name)), revision):
            return None
        return (lambda queued: queued.set(name, data, **_expiry(key_ttl, keep_ttl))), expiry

    return await watched(client, keys, attempt, reads)


async def keep_watching(
    client: Redis | RedisCluster,
    keys: Keys,
    args: tuple[Any, ...],
    ttl: tuple[int | None, bool],
    attempt: tuple[str, bool, Sending, int | None],
) -> Answer:
    """``KEEP`` (:mod:`._redis_history`) with ``WATCH``/``MULTI``: the compare-and-set (or, after a delta save,
    the base's check) that keeps the old value as a field of the kept revisions' key (``keys[3]``), changes
    their records (the list ``keys[4]``) and removes the pruned ones; ``args``: the script's own, read by
    :func:`._redis_history.keep_plan` as the script reads them."""
    (name, history, records), (key_ttl, keep_ttl) = (keys[0], keys[3], keys[4]), ttl
    data, (kind, check, length), archive = keep_plan(args)

    async def reads(pipe: Pipe) -> Planned:
        expiry = await companion_expiry(pipe, name, key_ttl, keep_ttl)
        current: Any = await pipe.execute_command("GET", name, **{NEVER_DECODE: True})  # bytes or None
        if kind == "base":
            if current is None or len(current) != length or check.encode() not in current[:HEAD_BYTES]:
                return None
        elif not _is_revision(value_read(current), check):
            return None
        index = None
        if archive.index is not None:  # the kept records change with the value (only writes of it change them)
            stored: Any = await pipe.execute_command("LRANGE", records, 0, -1, **{NEVER_DECODE: True})
            index = advance(records_text(stored), archive.index)

        def queue(queued: Pipe) -> None:
            queued.set(name, data, **_expiry(key_ttl, keep_ttl))
            if current is not None and archive.keep_as is not None:
                queued.hsetnx(history, archive.keep_as, current)
            drop = archive.drop if index is None else (*archive.drop, *index[1])
            if drop:
                queued.hdel(history, *drop)
            if index is not None:  # (written whole: the twin runs where Lua does not, not at every turn)
                queued.delete(records)
                if index[0]:
                    queued.rpush(records, *index[0].splitlines())

        return queue, expiry

    return await watched(client, keys, attempt, reads)


def _is_revision(current: bytes | None, revision: str) -> bool:
    """Whether the stored value ``current`` (``None``: none; read by :func:`value_read`) has ``revision``
    (:data:`MISSING_REVISION`: no value), as the scripts' ``revision_of`` computes it."""
    return (MISSING_REVISION if current is None else revision_of(current)) == revision


def blob_put_plan(keys: tuple[str, ...], blob: str, data: bytes) -> Plan:
    """``PUT``'s twin (for :func:`fenced_watching`): field ``blob`` of ``keys[2]`` set to ``data`` unless it is
    there, it and the records ``keys[3]`` expiring with the value ``keys[0]``."""

    async def plan(pipe: Pipe) -> Callable[[Pipe], object]:
        expiry = await companion_expiry(pipe, keys[0], None, True)

        def queued(later: Pipe) -> None:
            later.hsetnx(keys[2], blob, data)
            for kept in keys[2:]:
                expire_as(later, kept, expiry)

        return queued

    return plan


def blob_drop_plan(keys: tuple[str, ...], blobs: tuple[str, ...]) -> Plan:
    """``DROP``'s twin (for :func:`fenced_watching`): the fields ``blobs`` of ``keys[2]`` removed."""

    async def plan(pipe: Pipe) -> Callable[[Pipe], object]:
        return lambda later: later.hdel(keys[2], *blobs)

    return plan


def set_plan(keys: tuple[str, ...], data: bytes, ttl: tuple[int | None, bool]) -> Plan:
    """``SET_SCRIPT``'s twin (for :func:`fenced_watching`; ``keys``: the value's, its lease's, its kept
    revisions' and their records', which expire with it; ``ttl``: the session's ``key_ttl`` and whether a save
    keeps the key's own)."""
    name, history, (key_ttl, keep_ttl) = keys[0], keys[2:], ttl

    async def plan(pipe: Pipe) -> Callable[[Pipe], object]:
        expiry = await companion_expiry(pipe, name, key_ttl, keep_ttl)

        def queued(later: Pipe) -> None:
            later.set(name, data, **_expiry(key_ttl, keep_ttl))
            for kept in history:
                expire_as(later, kept, expiry)

        return queued

    return plan


Twin = Callable[
    [Redis | RedisCluster, Keys, tuple[Any, ...], tuple[int | None, bool], tuple[str, bool, Sending, int | None]],
    Awaitable[Answer],
]
"""A conditional write's ``WATCH``/``MULTI`` twin, given the client, the keys, the script's own arguments (before
the lease token and the write id), ``(key_ttl, keep_ttl)`` and the attempt ``(write id, retried, Sending, lease
token)``: one of the functions above, nothing bound (nothing more is held while the write waits), reading what
the write is from the arguments the script reads it from."""

Plan = Callable[[Pipe], Awaitable[Callable[[Pipe], object]]]
"""A lease-fenced write's reads on the ``WATCH`` path (before ``MULTI``), giving what to queue after it."""


async def fenced_watching(
    client: Redis | RedisCluster,
    lease: str,
    attempt: tuple[int | None, Sending],
    plan: Plan,
) -> Answer:
    """A write that checks only the lease fence, with ``WATCH``/``MULTI``: the fence (``lease`` watched), then
    ``plan`` (its reads, before ``MULTI``) gives what to queue; a lease changed meanwhile looks again.
    ``attempt``: the lease token the write carries, its ``Sending``."""
    token, sending = attempt
    while True:
        async with client.pipeline(transaction=True) as pipe:
            await pipe.watch(lease)
            refused = await fence_watching(pipe, lease, token)
            if refused is not None:
                return refused
            queue = await plan(pipe)
            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            queue(pipe)
            if await executed(pipe, sending):
                return DONE


def _expiry(key_ttl: int | None, keep_ttl: bool) -> dict[str, Any]:
    """``SET``'s expiry options, as the scripts' TTL argument says."""
    return {"ex": key_ttl, "keepttl": key_ttl is None and keep_ttl}
