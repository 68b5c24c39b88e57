"""A write's command in the Redis protocol, packed in one join (redis-py joins once per argument)."""

from __future__ import annotations

from typing import Any

from redis.asyncio.connection import Connection

LARGE = 6000
"""Bytes from which an argument is sent as a chunk of its own, without copying it (as redis-py's
``buffer_cutoff`` does); the smaller parts around it are joined once."""

_HEADS = tuple(b"$%d\r\n" % size for size in range(1024))
"""The length line of an argument of each size below 1024 bytes (the keys, revisions and numbers of every
command): looked up, not formatted, per argument."""


def packed(connection: Connection, command: tuple[Any, ...]) -> list[bytes]:
    """``command`` as ``connection.pack_command(*command)`` packs it (its encoder's encoding of each
    ``str``), in as few chunks as can be: redis-py copies what it packed so far at every argument, the
    document included, which costs a save as much as the rest of sending it. A large argument (a
    document) is a chunk of its own, sent without a copy."""
    encoding, errors = connection.encoder.encoding, connection.encoder.encoding_errors
    name = command[0]
    if type(name) is not str or " " in name:
        return connection.pack_command(*command)  # redis-py splits a name holding arguments
    chunks: list[bytes] = []
    parts, heads = [b"*%d\r\n" % len(command)], _HEADS
    for arg in command:
        kind = type(arg)
        if kind is str:
            value = arg.encode(encoding, errors)
        elif kind is bytes:
            value = arg
        elif kind is int:
            value = repr(arg).encode()
        else:  # floats, memoryviews...: as redis-py packs them
            return connection.pack_command(*command)
        size = len(value)
        if size > LARGE:
            parts.append(b"$%d\r\n" % size)
            chunks += (b"".join(parts), value)
            parts = [b"\r\n"]
        else:
            parts += (heads[size] if size < 1024 else b"$%d\r\n" % size, value, b"\r\n")
    chunks.append(b"".join(parts))
    return chunks
