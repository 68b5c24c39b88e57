"""A session's read (``GET``, or ``GETEX`` sliding its expiry) on a pooled connection, without redis-py's per-command layers."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from statekit.session._redis_once import connection_of
from statekit.session._redis_packing import packed


async def read_value(client: Redis | RedisCluster, name: str, ttl: int | None) -> Any:
    """The value of key ``name`` (``ttl``: read with ``GETEX ... EX ttl``), as ``client.get``/``client.getex`` answer.

    A plain ``Redis`` client's command goes out on a connection of its pool, retried
    by the connection's ``Retry`` after a lost connection (a read may be sent again)
    as ``execute_command`` retries it, without its per-command observability and
    wrappers (a quarter of a small read's cost). Any other client (a cluster, a
    subclass, a single-connection client) reads through its own ``get``/``getex``.
    """
    if type(client) is not Redis or client.connection is not None:
        return await (client.get(name) if ttl is None else client.getex(name, ex=ttl))
    command: tuple[Any, ...] = ("GET", name) if ttl is None else ("GETEX", name, "EX", ttl)
    pool = client.connection_pool
    connection = await connection_of(pool, command[0])
    try:
        message = packed(connection, command)

        async def once() -> Any:
            await connection.send_packed_command(message)  # checks its health first, as send_command does
            return await connection.read_response()

        async def lost(error: Exception) -> None:
            await connection.disconnect()  # sent again on a new connection (as redis-py's retry does)

        return await connection.retry.call_with_retry(once, lost)
    finally:
        await pool.release(connection)
