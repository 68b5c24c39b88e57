"""A session's read (``GET``, or ``GETEX`` sliding its and its history's expiry) on a pooled connection, without redis-py's per-command layers."""

from __future__ import annotations

from functools import partial
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from statekit.session._companion import value_joined
from statekit.session._redis_once import connection_of
from statekit.session._redis_packing import packed
from statekit.session._redis_pipe import Pipe


async def read_value(
    client: Redis | RedisCluster, name: str, ttl: int | None, followers: tuple[str, ...] = (), shared: Pipe | None = None
) -> Any:
    """The value of key ``name`` (``ttl``: read with ``GETEX ... EX ttl``, and the keys ``followers`` given the
    same expiry in the same round trip), as ``client.get``/``client.getex`` answer.

    Through the client's ``shared`` pipe (see :mod:`._redis_pipe`) it goes with the other tasks' commands of this
    turn of the loop; if that round trip loses its connection, it is read again as below.

    A plain ``Redis`` client's command goes out on a connection of its pool, retried
    by the connection's ``Retry`` after a lost connection (a read may be sent again)
    as ``execute_command`` retries it, without its per-command observability and
    wrappers (a quarter of a small read's cost). Any other client (a cluster, a
    subclass, a single-connection client) reads through its own ``get``/``getex``.
    """
    if ttl is None:
        command: tuple[Any, ...] = ("GET", name)
        commands = [command]
    else:
        command = ("GETEX", name, "EX", ttl)
        commands = [command, *(("EXPIRE", follower, ttl) for follower in followers)]
    if shared is None:
        return await _direct(client, name, ttl, commands)
    if shared.idle():
        return await shared.alone(_direct(client, name, ttl, commands))
    try:
        return await shared.send(None, commands)
    except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError):
        return await _direct(client, name, ttl, commands)  # again on a connection of its own, retried as redis-py does


def value_read(value: Any) -> bytes | None:
    """A session's value (or a kept revision of it) as Redis answered it (bytes, or text from a
    ``decode_responses`` client), as a read returns it: its deltas marked (see :func:`._companion.value_joined`),
    so that its revision is the one a read names."""
    if value is None:
        return None
    return value_joined(value.encode("utf-8") if isinstance(value, str) else value)


async def _direct(client: Redis | RedisCluster, name: str, ttl: int | None, commands: list[tuple[Any, ...]]) -> Any:
    """:func:`read_value`'s commands on a connection of their own."""
    if type(client) is not Redis or client.connection is not None:
        if len(commands) == 1:
            return await (client.get(name) if ttl is None else client.getex(name, ex=ttl))
        async with client.pipeline(transaction=False) as pipe:
            for each in commands:
                pipe.execute_command(*each)
            return (await pipe.execute())[0]
    pool = client.connection_pool
    connection = await connection_of(pool, commands[0][0])
    try:
        message = [part for each in commands for part in packed(connection, each)]
        once, lost = partial(_once, connection, message, len(commands)), partial(_lost, connection)
        return await connection.retry.call_with_retry(once, lost)
    finally:
        await pool.release(connection)


async def _once(connection: Any, message: list[bytes], replies: int) -> Any:
    """Send the packed commands and read every reply (so that none is left for the connection's next command);
    the first one's, raised if it is an error."""
    await connection.send_packed_command(message)  # checks its health first, as send_command does
    answers: list[Any] = []
    for _ in range(replies):
        try:
            answers.append(await connection.read_response())
        except redis_errors.ResponseError as err:
            answers.append(err)
    if isinstance(answers[0], redis_errors.ResponseError):
        raise answers[0]
    return answers[0]


async def _lost(connection: Any, error: Exception) -> None:
    """The connection was lost: the commands go again on a new one (as redis-py's retry does)."""
    await connection.disconnect()
