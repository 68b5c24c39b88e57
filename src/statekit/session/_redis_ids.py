"""Write ids beside Redis values: a write sent again after a lost reply recognises its own write, and only it.

Every conditional write (the compare-and-set script, the delta script, their
``WATCH``/``MULTI`` twins) carries a random id, and stores it in the same
atomic step in a small companion key, :func:`id_key`: the session key followed
by ``:write-id`` (on a Redis Cluster, plus a hash tag when needed, so that it
lives in the value's slot). The value's bytes, and so its revision, stay as
they were. A write sent again after its reply was lost answers "done" only when
the companion holds its own id; identical bytes stored by another writer are
not taken for its own. A value without a companion (written by AgentScope or
an older statekit) is never "mine". The companion expires with the value, and
a delete leaves its own id there for :func:`tombstone_seconds`, so that a
delete sent again knows it was done.
"""

from __future__ import annotations

import functools
import itertools
import secrets
from binascii import crc_hqx
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.client import NEVER_DECODE
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from statekit.session._redis_once import Sending, executed

ID_SUFFIX = ":write-id"
"""What follows the session key in its companion's name (never ``:state``: listing does not see it)."""

MINE = """
if ARGV[#ARGV] == 'retry' and redis.call('GET', KEYS[2]) == ARGV[#ARGV - 1] then return 1 end
local function stamp()
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('SET', KEYS[2], ARGV[#ARGV - 1], 'PX', ttl)
  else redis.call('SET', KEYS[2], ARGV[#ARGV - 1]) end
end
"""
"""Prepended to the write scripts (KEYS[2]: the companion; ARGV[#ARGV - 1]: the write id, ARGV[#ARGV]:
'retry' or ''): a retry whose id is stored answers "done"; ``stamp()`` stores the id, expiring with the value."""

DELETE = """
if ARGV[#ARGV] == 'retry' and redis.call('GET', KEYS[2]) == ARGV[1] then return 1 end
if redis.call('DEL', KEYS[1]) == 0 then
  if redis.call('PTTL', KEYS[2]) == -1 then redis.call('DEL', KEYS[2]) end
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return 1
"""
"""Delete KEYS[1]; when there was one, leave the delete's id (ARGV[1]) for ARGV[2] seconds. When there was
none, a write id left without expiry (its value deleted by another program) goes too; one that expires may be
another delete's, which its own retry may still look for."""


def new_id() -> str:
    """A write's id: random, the same when the write is sent again."""
    return secrets.token_hex(8)


def tombstone_seconds(timeout: float) -> int:
    """How long a delete's id stays: past both budgets of asking again (two ``timeout``), with a margin."""
    return int(2 * timeout) + 60


def id_key(name: str, cluster: bool) -> str:
    """The companion key of session key ``name``; on a cluster, in ``name``'s slot."""
    plain = name + ID_SUFFIX
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


async def mine(pipe: Pipeline | ClusterPipeline, companion: str, write_id: str) -> bool:
    """For a retry on the ``WATCH`` path: whether the companion holds this write's id."""
    return bool(await pipe.execute_command("GET", companion, **{NEVER_DECODE: True}) == write_id.encode())


async def companion_expiry(
    pipe: Pipeline | ClusterPipeline, name: str, key_ttl: int | None, keeps: bool
) -> dict[str, Any]:
    """``SET``'s expiry options for the companion on the ``WATCH`` path: the value's TTL after the write
    (``key_ttl``; else, when the write ``keeps`` the value's own, that one, read while watched; else none)."""
    if key_ttl is not None:
        return {"ex": key_ttl}
    if not keeps:
        return {}
    left = await pipe.pttl(name)
    return {"px": left} if left > 0 else {}


async def deleted_watching(
    client: Redis | RedisCluster, keys: tuple[str, str], delete: tuple[str, int], attempt: tuple[bool, Sending]
) -> bool:
    """:data:`DELETE` with ``WATCH``/``MULTI``, for servers that run no Lua (``keys``: the value's and
    its companion's; ``delete``: the delete's id and how long it stays; ``attempt``: sent again?, its ``Sending``)."""
    (name, companion), (write_id, seconds), (retried, sending) = keys, delete, attempt
    while True:
        async with client.pipeline(transaction=True) as pipe:
            await pipe.watch(name)
            if retried and await mine(pipe, companion, write_id):
                return True
            if not await pipe.exists(name):
                if await pipe.pttl(companion) == -1:  # left by another program's delete (see DELETE)
                    await pipe.delete(companion)
                return False
            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            pipe.delete(name)
            pipe.set(companion, write_id, ex=seconds)
            if await executed(pipe, sending):
                return True
        # the value changed between EXISTS and EXEC: look again (within the operation's timeout)
