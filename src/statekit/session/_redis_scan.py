"""RedisSession's keys listed: ids quoted into keys and back, ``SCAN`` patterns, a bounded scan of a server or cluster."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

SCAN_ROUNDS = 10
"""A missing load's hint (near session ids) looks at most at the keys of this many ``SCAN`` calls of 1000."""

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
_QUOTED = re.compile("%25|%3A")


def quote(value: str) -> str:
    """An id as it is written in a key: ``%`` and ``:`` as ``%25`` and ``%3A``, so no two pairs of ids meet."""
    return value.replace("%", "%25").replace(":", "%3A") if "%" in value or ":" in value else value


def _unquote(value: str) -> str:
    return _QUOTED.sub(lambda match: "%" if match.group() == "%25" else ":", value)


def glob(text: str) -> str:
    """``text`` as a literal in a ``SCAN`` ``MATCH`` pattern."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


async def scan_all(client: Redis | RedisCluster, pattern: str) -> list[Any]:
    """Every key matching ``pattern`` (on a cluster, of every master)."""
    return [key async for key in client.scan_iter(match=pattern, count=1000)]


async def scan_some(client: Redis | RedisCluster, pattern: str, limit: int) -> tuple[list[Any], bool]:
    """Keys matching ``pattern`` from at most :data:`SCAN_ROUNDS` ``SCAN`` calls (a Redis Cluster: rounds,
    each one ``SCAN`` per master), and whether the scan stopped before the end."""
    if isinstance(client, RedisCluster):
        return await _scan_cluster(client, pattern, limit)
    keys, cursor = [], 0
    for _ in range(SCAN_ROUNDS):
        cursor, found = await client.scan(cursor, match=pattern, count=1000)
        keys += found
        if not cursor or len(keys) >= limit:
            break
    return keys, bool(cursor)


async def _scan_cluster(client: RedisCluster, pattern: str, limit: int) -> tuple[list[Any], bool]:
    """Keys matching ``pattern`` from at most :data:`SCAN_ROUNDS` rounds of one ``SCAN`` on each
    master that has more, and whether any master had more when it stopped."""
    keys: list[Any] = []
    cursors: dict[str, Any] = {node.name: 0 for node in client.get_primaries()}
    for _ in range(SCAN_ROUNDS):
        for name, cursor in list(cursors.items()):
            node = client.get_node(node_name=name)
            reply: Any = await client.scan(cursor, match=pattern, count=1000, target_nodes=node)
            answer, found = reply  # a cluster answers {node name: cursor}, keys
            keys += found
            cursors[name] = answer[name]
        cursors = {name: cursor for name, cursor in cursors.items() if cursor}
        if not cursors or len(keys) >= limit:
            break
    return keys, bool(cursors)


Keys = tuple[str, str]
"""How a store names its session keys: its ``key_prefix`` and its pattern (``RedisSession.SESSION_KEY``)."""


async def sessions_of(client: Redis | RedisCluster, keys: Keys, user_id: str) -> list[str]:
    """The session ids stored for ``user_id`` (every key of the pattern, on every master)."""
    prefix, template = keys
    head, tail = template.split("{session_id}")
    head = prefix + head.format(user_id=quote(user_id))
    return session_ids(await scan_all(client, glob(head) + "*" + tail), head, tail)


async def some_sessions_of(
    client: Redis | RedisCluster, keys: Keys, user_id: str, limit: int
) -> tuple[list[str], bool]:
    """Up to ``limit`` session ids of ``user_id`` from a bounded scan (:func:`scan_some`), and whether there are more."""
    prefix, template = keys
    head, tail = template.split("{session_id}")
    return await _some(client, prefix + head.format(user_id=quote(user_id)), tail, limit)


async def some_owners_of(
    client: Redis | RedisCluster, keys: Keys, session_id: str, limit: int
) -> tuple[list[str], bool]:
    """Up to ``limit`` user ids holding ``session_id``, from a bounded scan, and whether there are more."""
    prefix, template = keys
    head, tail = template.split("{user_id}")
    return await _some(client, prefix + head, tail.format(session_id=quote(session_id)), limit)


async def _some(client: Redis | RedisCluster, head: str, tail: str, limit: int) -> tuple[list[str], bool]:
    """The middles of keys ``head*tail``, from at most :data:`SCAN_ROUNDS` ``SCAN`` calls
    (a Redis Cluster: rounds, each one ``SCAN`` per master), and whether the scan stopped before the end."""
    found, more = await scan_some(client, glob(head) + "*" + glob(tail), limit)
    names = session_ids(found, head, tail)
    return names[:limit], more or len(names) > limit


async def users_of(client: Redis | RedisCluster, keys: Keys) -> list[str]:
    """The user ids that have sessions, sorted, once each."""
    prefix, template = keys
    head, rest = template.split("{user_id}")
    middle, tail = rest.split("{session_id}")
    head = prefix + head
    pattern = "*".join(glob(part) for part in (head, middle, tail))
    return user_ids(await scan_all(client, pattern), head, middle, tail)


def session_ids(keys: list[Any], head: str, tail: str) -> list[str]:
    """The ids between ``head`` and ``tail`` in ``keys``, unquoted (keys with a ``:`` there are not ours)."""
    return [_unquote(middle) for middle in _middles(keys, head, tail)]


def user_ids(keys: list[Any], head: str, middle: str, tail: str) -> list[str]:
    """The user ids in ``keys`` (``head`` user ``middle`` session ``tail``), unquoted and sorted, once each."""
    return sorted({_unquote(user) for user, _ in _pairs(keys, head, middle, tail)})


def _middles(keys: list[Any], head: str, tail: str, *, allow_colon: bool = False) -> Iterator[str]:
    """The session id part of each key (keys with a ``:`` there are not ours, unless ``allow_colon``)."""
    for key in keys:
        try:
            text = key.decode("utf-8") if isinstance(key, bytes) else str(key)
        except UnicodeDecodeError:
            continue
        middle = text[len(head) : len(text) - len(tail)]
        if middle and (allow_colon or ":" not in middle):
            yield middle


def _pairs(keys: list[Any], head: str, middle: str, tail: str) -> Iterator[tuple[str, str]]:
    """The (user id, session id) parts of each key, still quoted (keys with a ``:`` in either are not ours)."""
    for both in _middles(keys, head, tail, allow_colon=True):
        user, sep, session = both.partition(middle)
        if sep and session and ":" not in user + session:
            yield user, session
