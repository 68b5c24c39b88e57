"""redis-py clients for RedisSession: short default timeouts, URLs (cluster schemes, passwords never echoed), addresses."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from statekit.errors import SessionError
from statekit.session._url_passwords import split_authority, user_info

CONNECT_TIMEOUT = 2.0
"""Seconds to wait for a connection, unless ``socket_connect_timeout`` is given."""

SOCKET_TIMEOUT = 2.0
"""Seconds to wait for a reply, unless ``socket_timeout`` is given."""

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
"""URL schemes of :meth:`RedisSession.from_url` that mean a Redis Cluster (and the plain scheme they stand for)."""

_QUERY_VALUE = re.compile(r"([?&;]([^=&;]*)=)([^&;]*)")
_URL_DELIMITERS = re.compile(r"[/?#@:&;=%]")


def _default_retry() -> Retry:
    """Two quick retries: a restarted server is met, a dead one reported in seconds."""
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 2)


Client = Redis | RedisCluster
"""The clients a :class:`RedisSession` works with."""


def client_from_url(url: str, cluster: bool, options: dict[str, Any]) -> Client:
    """The client of :meth:`RedisSession.from_url` (``options``: redis-py's).

    Raises:
        SessionError: The URL is not a usable one (the password is never echoed).
    """
    scheme, sep, rest = url.partition("://")
    if scheme in CLUSTER_SCHEMES:
        url, cluster = f"{CLUSTER_SCHEMES[scheme]}{sep}{rest}", True
    try:
        _check_database(url)
        client: Client = (RedisCluster if cluster else Redis).from_url(url, **defaults(options))
    except (ValueError, TypeError, redis_errors.RedisError, redis_errors.RedisClusterException) as err:
        raise SessionError(f"not a usable Redis URL {_redact(url)!r}: {_reason(err, url)}") from None
    return client


def defaults(options: dict[str, Any]) -> dict[str, Any]:
    """redis-py client options with statekit's short timeouts and retries unless given."""
    return {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "retry": _default_retry(),
        **options,
    }


_DATABASE_PATH = re.compile(r"/?|/\d+")


def _check_database(url: str) -> None:
    """Refuse a URL path that is not a database number (redis-py would read
    ``/abc`` as database 0 and ``/3/4`` as 34, silently).

    Raises:
        ValueError: Saying what the path must be.
    """
    parts = urllib.parse.urlsplit(url)  # as redis-py parses it
    if parts.scheme in ("redis", "rediss") and not _DATABASE_PATH.fullmatch(parts.path):
        raise ValueError("the path must be a database number, as in redis://host:6379/0")


def _redact(url: str) -> str:
    """``url`` with its passwords masked: the user info and ``password=`` query values.

    The user info runs to the last ``@`` (as redis-py reads it), whatever comes
    before; a user info without ``:`` may be a password and is masked whole.
    """
    head, rest = split_authority(str(url))
    user_info, at, host = rest.rpartition("@")
    if at:
        user, colon, _ = user_info.partition(":")
        rest = f"{user if colon else ''}:***@{host}"
    return head + _QUERY_VALUE.sub(lambda m: m.group(1) + ("***" if _names_password(m.group(2)) else m.group(3)), rest)


def _reason(err: Exception, url: str) -> str:
    """redis-py's reason for refusing ``url``, unless it quotes a piece of a password."""
    reason = str(err)
    if any(piece in reason for piece in _password_pieces(url)):
        return "redis-py's reason quotes part of the password, so it is not shown"
    return reason


def _password_pieces(url: str) -> set[str]:
    """The passwords in ``url`` and their pieces between URL delimiters, quoted and not."""
    info = user_info(url)
    user, colon, password = (info or "").partition(":")
    found = [password if colon else user] if info is not None else []
    found += [m.group(3) for m in _QUERY_VALUE.finditer(split_authority(url)[1]) if _names_password(m.group(2))]
    texts = found + [urllib.parse.unquote_plus(text) for text in found]
    return {piece for text in texts for piece in [text, *_URL_DELIMITERS.split(text)] if piece}


def _names_password(name: str) -> bool:
    return "pass" in urllib.parse.unquote_plus(name).lower()


def address(client: Client) -> str:
    """Where ``client`` connects, for ``RedisSession.address`` and errors: ``host:port/db``, ``unix:path``,
    or a cluster's startup nodes."""
    if isinstance(client, RedisCluster):
        return ",".join(f"{node.host}:{node.port}" for node in client.nodes_manager.startup_nodes.values())
    settings = client.connection_pool.connection_kwargs
    if "path" in settings:
        return f"unix:{settings['path']}"
    return f"{settings.get('host', 'localhost')}:{settings.get('port', 6379)}/{settings.get('db', 0)}"


def checked_timeout(value: object) -> float:
    """A session's ``timeout=``, checked.

    Raises:
        SessionError: Not a positive number of seconds.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SessionError(f"timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def is_positive_int(value: object) -> bool:
    """Whether ``value`` is an integer (not a bool) above 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
