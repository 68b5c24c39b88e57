"""Whether a redis-py client is a cluster client, decided once per client class (not per operation)."""

from __future__ import annotations

import functools
from typing import TypeGuard

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster


def is_cluster(client: Redis | RedisCluster) -> TypeGuard[RedisCluster]:
    """Whether ``client`` is a ``RedisCluster`` (or a subclass of it).

    ``isinstance(client, RedisCluster)`` runs ``typing``'s Python-level protocol
    check (redis-py's ``RedisCluster`` derives from a ``Protocol``) at every call:
    several times per save and load, for an answer fixed by the client's class.
    """
    return _cluster_class(type(client))


@functools.cache
def _cluster_class(cls: type) -> bool:
    return issubclass(cls, RedisCluster)
