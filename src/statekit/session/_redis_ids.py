"""Write ids beside Redis values: a write sent again after a lost reply recognises its own write, and only it.

Every conditional write (the compare-and-set script, the delta script, their
``WATCH``/``MULTI`` twins) and every delete carries a random id, and pushes it
in the same atomic step onto a small companion list, :func:`id_key`: the
session key followed by ``:write-id`` (on a Redis Cluster, plus a hash tag when
needed, so that it lives in the value's slot), which keeps the last
:data:`KEPT` ids. The value's bytes, and so its revision, stay as they were. A
write sent again after its reply was lost answers "done" when its own id is
kept; identical bytes stored by another writer are not taken for its own. An
id that is not kept while fewer than :data:`KEPT` are means the write never
landed; when :data:`KEPT` are kept, later writes may have pushed it out, and
the answer is :data:`UNKNOWN`. A value without a companion (written by
AgentScope or an older statekit) is never "mine"; a companion of the previous
format (one id, a string) counts as that one id and becomes a list at the next
write. The companion expires with the value, and a delete leaves it for
:func:`tombstone_seconds`, so that a delete (or a write) sent again knows it
was done.
"""

from __future__ import annotations

import functools
import itertools
import os
from binascii import crc_hqx
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.client import NEVER_DECODE
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from statekit.errors import WriteOutcomeUnknownError
from statekit.session._redis_fence import Answer, fence_watching
from statekit.session._redis_once import Sending, executed, flag

ID_SUFFIX = ":write-id"
"""What follows the session key in its companion's name (never ``:state``: listing does not see it)."""

KEPT = 32
"""How many write ids the companion keeps: a retry whose id was pushed out by as many later
writes cannot tell whether it landed. Read at each write (tests make it smaller)."""

NOT_DONE, DONE, UNKNOWN = 0, 1, 2
"""The scripts' answers: the write was refused (a conflict, or no value to delete), it was done,
or a retry's id may have been pushed out of the companion (:data:`KEPT` later writes)."""

ALIGN = """
local function align(value, ...)
  local ttl = redis.call('PTTL', value)
  for _, other in ipairs({...}) do
    if ttl > 0 then redis.call('PEXPIRE', other, ttl) else redis.call('PERSIST', other) end
  end
end
"""
"""``align(value, other, ...)``: the keys ``other, ...`` (up to the first ``nil``) expire when key ``value`` does
(never, when ``value`` does not)."""

MINE = ALIGN + """
local id, kept = ARGV[#ARGV - 2], tonumber(ARGV[#ARGV - 1])
local function seen()
  local kind = redis.call('TYPE', KEYS[2])['ok']
  if kind == 'string' then
    if redis.call('GET', KEYS[2]) == id then return 1 end
    return 0
  end
  if kind ~= 'list' then return 0 end
  local ids = redis.call('LRANGE', KEYS[2], 0, -1)
  for _, each in ipairs(ids) do
    if each == id then return 1 end
  end
  if #ids >= kept then return 2 end
  return 0
end
if ARGV[#ARGV] == 'retry' then
  local found = seen()
  if found ~= 0 then return found end
end
local function push()
  local length = redis.pcall('LPUSH', KEYS[2], id)
  if type(length) == 'table' then
    redis.call('DEL', KEYS[2])
    length = redis.call('LPUSH', KEYS[2], id)
  end
  if length > kept then redis.call('LTRIM', KEYS[2], 0, kept - 1) end
end
local function stamp()
  push()
  align(KEYS[1], KEYS[2], KEYS[4], KEYS[5])
end
"""
"""Prepended to the write scripts (KEYS[2]: the companion; ARGV[#ARGV - 2]: the write id, ARGV[#ARGV - 1]:
how many ids are kept, ARGV[#ARGV]: 'retry' or ''): a retry whose id is kept answers 1 ("done"), one whose id
may have been pushed out answers 2; ``stamp()`` pushes the id, the companion (and KEYS[4] and KEYS[5], the session's kept
revisions and their records, see :mod:`._redis_history`) expiring with the value. A companion of the previous format (a string)
is one id, replaced by a list at the next write."""

DELETE = """
redis.call('DEL', KEYS[4], KEYS[5])
if redis.call('DEL', KEYS[1]) == 0 then
  if redis.call('PTTL', KEYS[2]) == -1 then redis.call('DEL', KEYS[2]) end
  return 0
end
push()
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""
"""After :data:`MINE` (and the lease fence): delete KEYS[1] and its kept revisions (KEYS[4], KEYS[5]); when there was a
value, push the delete's id and keep the ids for ARGV[1] seconds. When there was none, a companion left without
expiry (its value deleted by another program) goes too; one that expires may hold another delete's id, which its
own retry may still look for."""


def id_args(write_id: str, retried: bool) -> tuple[str, str, str]:
    """The scripts' last arguments: the write id, how many ids are kept (:data:`KEPT`), the retry flag."""
    return write_id, str(KEPT), flag(retried)


def new_id() -> str:
    """A write's id: random, the same when the write is sent again (``secrets.token_hex(8)``'s
    bytes, from ``os.urandom``, without its two calls on the way: this runs at every save)."""
    return os.urandom(8).hex()


def tombstone_seconds(timeout: float) -> int:
    """How long a delete's id stays: past both budgets of asking again (two ``timeout``), with a margin."""
    return int(2 * timeout) + 60


def id_key(name: str, cluster: bool) -> str:
    """The companion key of session key ``name``; on a cluster, in ``name``'s slot."""
    return beside(name, ID_SUFFIX, cluster)


def beside(name: str, suffix: str, cluster: bool) -> str:
    """The key ``name`` followed by ``suffix``; on a cluster, plus a hash tag when needed to stay in ``name``'s slot."""
    plain = name + suffix
    if not cluster:
        return plain
    slot = key_slot(name.encode())
    if key_slot(plain.encode()) == slot:  # ``name`` has a hash tag: ``plain`` keeps it
        return plain
    if "{" not in name:  # the tag appended is the first one
        return f"{plain}{{{_tag(slot)}}}"
    return _searched(plain, slot)


@functools.cache
def _tag(slot: int) -> str:
    """The first hexadecimal number whose hash slot is ``slot`` (about 16,000 tries, once per slot)."""
    tags = map("{:x}".format, itertools.count())
    return next(tag for tag in tags if crc_hqx(tag.encode(), 0) % REDIS_CLUSTER_HASH_SLOTS == slot)


@functools.lru_cache(maxsize=256)
def _searched(plain: str, slot: int) -> str:
    """``plain`` plus the first tag that puts it in ``slot`` (a key whose own ``{`` has no valid tag)."""
    return next(
        named
        for named in (f"{plain}{{{index:x}}}" for index in itertools.count())
        if key_slot(named.encode()) == slot
    )


async def looked_at(
    pipe: Pipeline | ClusterPipeline, companion: str, write_id: str, retried: bool
) -> tuple[int, bool]:
    """On the ``WATCH`` path, before ``MULTI``: for a retry, what the kept ids say (:data:`DONE`,
    :data:`UNKNOWN`, else :data:`NOT_DONE`, as ``seen()`` in :data:`MINE`); and whether the companion
    is of the previous format (a string: :func:`pushed` replaces it)."""
    kind = await pipe.execute_command("TYPE", companion, **{NEVER_DECODE: True})
    kind = kind.decode() if isinstance(kind, bytes) else str(kind)
    replace = kind not in ("list", "none")
    if not retried or kind not in ("list", "string"):
        return NOT_DONE, replace
    ids: Any  # bytes: a list of them, or the one string of the previous format
    if kind == "string":
        ids = [await pipe.execute_command("GET", companion, **{NEVER_DECODE: True})]
    else:
        ids = await pipe.execute_command("LRANGE", companion, 0, -1, **{NEVER_DECODE: True})
    if write_id.encode() in ids:
        return DONE, replace
    return (UNKNOWN if kind == "list" and len(ids) >= KEPT else NOT_DONE), replace


def pushed(pipe: Pipeline | ClusterPipeline, companion: str, write: tuple[str, bool], expiry: dict[str, Any]) -> None:
    """Queue, after ``MULTI``, what ``stamp()`` in :data:`MINE` does (``write``: the id, and whether the
    companion is a string to replace; ``expiry``: from :func:`companion_expiry`, none: persist)."""
    write_id, replace = write
    if replace:
        pipe.delete(companion)
    pipe.lpush(companion, write_id)
    pipe.ltrim(companion, 0, KEPT - 1)
    expire_as(pipe, companion, expiry)


def expire_as(pipe: Pipeline | ClusterPipeline, name: str, expiry: dict[str, Any]) -> None:
    """Queue giving key ``name`` the expiry :func:`companion_expiry` gave (none: persist)."""
    if "ex" in expiry:
        pipe.expire(name, expiry["ex"])
    elif "px" in expiry:
        pipe.pexpire(name, expiry["px"])
    else:
        pipe.persist(name)


async def companion_expiry(
    pipe: Pipeline | ClusterPipeline, name: str, key_ttl: int | None, keeps: bool
) -> dict[str, Any]:
    """The companion's expiry on the ``WATCH`` path: the value's TTL after the write
    (``key_ttl``; else, when the write ``keeps`` the value's own, that one, read while watched; else none)."""
    if key_ttl is not None:
        return {"ex": key_ttl}
    if not keeps:
        return {}
    left = await pipe.pttl(name)
    return {"px": left} if left > 0 else {}


Pipe = Pipeline | ClusterPipeline

Keys = tuple[str, str, str, str, str]
"""The keys a conditional write touches: the value's, its companion's, its lease's, its kept revisions' and
their records' (see :mod:`._redis_history`)."""

Planned = tuple[Callable[[Pipe], object], dict[str, Any]] | None
"""What a ``WATCH`` write's reads decided: what to queue after ``MULTI`` and the companion's expiry (as
:func:`companion_expiry` gives it), or ``None``: the value is not the one expected."""


async def watched(
    client: Redis | RedisCluster,
    keys: tuple[str, ...],
    write: tuple[str, bool, Sending, int | None],
    reads: Callable[[Pipe], Awaitable[Planned]],
) -> Answer:
    """A conditional write with ``WATCH``/``MULTI``, for servers that run no Lua; it answers as the scripts do.

    ``keys``: the value's, its companion's, its lease's and (optional) its kept revisions' and their
    records', which expire with the value as the companion does; ``write``: the id, whether it is sent again,
    its ``Sending``, the lease token it carries; ``reads``: reads the watched value (its last read just
    before ``EXEC``) and plans the write. The lease fence is checked first (:func:`fence_watching`), then
    ``reads``. A failed ``EXEC`` (the value or the lease changed) looks again, within the timeout: a
    retry's first send may land at any point meanwhile: before the value is read, then a value that does
    not match sends the retry to the ids again; after it, then the retry's ``EXEC`` fails, and it looks again.
    """
    (name, companion, lease, *history), (write_id, retried, sending, token) = keys, write
    while True:
        async with client.pipeline(transaction=True) as pipe:
            await pipe.watch(name, lease)
            found, replace = await looked_at(pipe, companion, write_id, retried)
            if found != NOT_DONE:
                return found
            refused = await fence_watching(pipe, lease, token)
            if refused is not None:
                return refused
            planned = await reads(pipe)
            if planned is None:  # leaving the block resets the pipeline, which unwatches
                return (await looked_at(pipe, companion, write_id, retried))[0] if retried else NOT_DONE
            queue, expiry = planned
            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            queue(pipe)
            pushed(pipe, companion, (write_id, replace), expiry)
            for kept in history:
                expire_as(pipe, kept, expiry)
            if await executed(pipe, sending):
                return DONE
        # the value or the lease changed before EXEC (maybe by this write's first send): look again


async def deleted_watching(
    client: Redis | RedisCluster,
    keys: Keys,
    delete: tuple[str, int, int | None],
    attempt: tuple[bool, Sending],
) -> Answer:
    """:data:`DELETE` with ``WATCH``/``MULTI`` (``keys``: :data:`Keys`; the kept revisions and their
    records go with the value; ``delete``: the delete's id, how long the ids stay, the lease token it
    carries; ``attempt``: sent again?, its ``Sending``)."""
    (name, companion, _, *history), (write_id, seconds, token), (retried, sending) = keys, delete, attempt

    async def reads(pipe: Pipe) -> Planned:
        if await pipe.exists(name):
            return (lambda queued: queued.delete(name, *history)), {"ex": seconds}
        await pipe.delete(*history)  # kept revisions whose value is gone (deleted by another program)
        if await pipe.pttl(companion) == -1:  # left by another program's delete (see DELETE)
            await pipe.delete(companion)
        return None

    return await watched(client, keys, (write_id, retried, sending, token), reads)


def answered(outcome: int, where: str) -> bool:
    """A write's answer (:data:`DONE`, :data:`NOT_DONE`) as a bool; ``where``: the server, for the error.

    Raises:
        WriteOutcomeUnknownError: The answer is :data:`UNKNOWN`.
    """
    if outcome == UNKNOWN:
        raise WriteOutcomeUnknownError(
            f"Redis at {where}: a write was sent but its reply was lost; asked again, its write id was no longer "
            f"among the last {KEPT} kept (as many writes came since): the write may or may not have been applied "
            "(load the session to see which)"
        )
    return outcome == DONE
