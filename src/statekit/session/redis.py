"""``RedisSession``: sessions as Redis strings, on ``redis.asyncio``.

Needs the ``redis`` extra: ``pip install 'statekit[redis]'``.

Keys follow the reference pattern, so data it wrote stays readable::

    {key_prefix}user_id:{user_id}:session:{session_id}:state

In the ids, ``%`` and ``:`` are written ``%25`` and ``%3A``, so that no pair of
ids can build the same key (``("a:session:b", "c")`` and ``("a", "b:session:c")``
would otherwise meet).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any, ClassVar

from statekit.codecs import JSON_COMPACT, Codec
from statekit.errors import BackendUnavailableError, MissingExtraError, SessionError
from statekit.session._base import SessionBase, SessionKey

try:
    from redis import exceptions as _redis_errors
    from redis.asyncio import ConnectionPool, Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialWithJitterBackoff
except ImportError as _missing:  # pragma: no cover - exercised in a venv without redis
    raise MissingExtraError(
        "RedisSession needs the redis package: pip install 'statekit[redis]'"
    ) from _missing

__all__ = ["RedisSession"]

CONNECT_TIMEOUT = 2.0
"""Seconds to wait for a connection, unless ``socket_connect_timeout`` is given."""

SOCKET_TIMEOUT = 10.0
"""Seconds to wait for a reply, unless ``socket_timeout`` is given."""

_COMPARE_AND_SET = """
local current = redis.call('GET', KEYS[1])
local revision = ''
if current then revision = redis.sha1hex(current) end
if revision ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
end
return 1
"""
"""Write ARGV[1] if the stored value's SHA-1 is ARGV[2] ('' = no value); ARGV[3]: TTL or ''."""

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
_QUOTED = re.compile("%25|%3A")


def _quote(value: str) -> str:
    return value.replace("%", "%25").replace(":", "%3A") if "%" in value or ":" in value else value


def _unquote(value: str) -> str:
    return _QUOTED.sub(lambda match: "%" if match.group() == "%25" else ":", value)


def _default_retry() -> Retry:
    """Two quick retries: a restarted server is met, a dead one reported in seconds."""
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 2)


class RedisSession(SessionBase):
    """Sessions in Redis, one string key per (user_id, session_id).

    Args:
        host: Redis server host.
        port: Redis server port.
        db: Database index.
        password: Password, if the server needs one.
        connection_pool: A ``redis.asyncio.ConnectionPool`` to draw from (the
            host, port, db and password arguments are then ignored).
        key_ttl: Seconds each session lives after its last save or load (the
            expiry slides); ``None`` keeps sessions forever.
        key_prefix: Put before every key, to keep apps apart (``"prod:"``).
        client: An existing ``redis.asyncio.Redis`` to use; it is not closed
            by :meth:`aclose` (whoever opened it closes it).
        **kwargs: Passed to ``redis.asyncio.Redis``. Unless given,
            ``socket_connect_timeout`` is 2 s, ``socket_timeout`` 10 s and
            ``retry`` two quick retries, so that a server that is down is
            reported within a few seconds.

    Raises:
        SessionError: ``key_ttl`` is not a positive number of seconds.
    """

    SESSION_KEY: ClassVar[str] = "user_id:{user_id}:session:{session_id}:state"
    """The key pattern (after ``key_prefix``), as in the reference."""

    codec: ClassVar[Codec] = JSON_COMPACT
    default_user_id: ClassVar[str] = "default_user"
    """The ``user_id`` of calls that give none, as in the reference."""

    def __init__(
        self,
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        password: str | None = None,
        connection_pool: ConnectionPool | None = None,
        key_ttl: int | None = None,
        key_prefix: str = "",
        client: Redis | None = None,
        **kwargs: Any,
    ) -> None:
        if key_ttl is not None and not _is_positive_int(key_ttl):
            raise SessionError(f"key_ttl must be a positive whole number of seconds or None, got {key_ttl!r}")
        self.key_ttl = key_ttl
        self.key_prefix = key_prefix
        self._owns_client = client is None
        if client is None:
            kwargs.setdefault("socket_connect_timeout", CONNECT_TIMEOUT)
            kwargs.setdefault("socket_timeout", SOCKET_TIMEOUT)
            kwargs.setdefault("retry", _default_retry())
            client = Redis(host=host, port=port, db=db, password=password, connection_pool=connection_pool, **kwargs)
        self._client = client
        self._compare_and_set = client.register_script(_COMPARE_AND_SET)
        self.address = _address(client)

    def __repr__(self) -> str:
        return f"RedisSession(address={self.address!r}, key_prefix={self.key_prefix!r}, key_ttl={self.key_ttl!r})"

    def get_client(self) -> Redis:
        """The underlying ``redis.asyncio.Redis`` client."""
        return self._client

    def session_key(self, session_id: str, user_id: str | None = None) -> str:
        """The Redis key a session is stored under.

        Raises:
            InvalidSessionIdError: An id that cannot be stored.
        """
        return self._key(self.key(session_id, user_id))

    def _key(self, key: SessionKey) -> str:
        return self.key_prefix + self.SESSION_KEY.format(
            user_id=_quote(key.user_id), session_id=_quote(key.session_id)
        )

    def _source(self, key: SessionKey) -> str:
        return f"redis://{self.address} {self._key(key)}"

    async def _read(self, key: SessionKey) -> bytes | None:
        with self._errors():
            if self.key_ttl is None:
                value = await self._client.get(self._key(key))
            else:
                value = await self._client.getex(self._key(key), ex=self.key_ttl)
        return value.encode("utf-8") if isinstance(value, str) else value

    async def _write(self, key: SessionKey, data: bytes) -> None:
        with self._errors():
            await self._client.set(self._key(key), data, ex=self.key_ttl)

    async def _write_if(self, key: SessionKey, data: bytes, expected: str) -> bool:
        ttl = "" if self.key_ttl is None else str(self.key_ttl)
        with self._errors():
            return bool(await self._compare_and_set(keys=[self._key(key)], args=[data, expected, ttl]))

    async def _delete(self, key: SessionKey) -> bool:
        with self._errors():
            return bool(await self._client.delete(self._key(key)))

    async def _exists(self, key: SessionKey) -> bool:
        with self._errors():
            return bool(await self._client.exists(self._key(key)))

    async def _list(self, user_id: str) -> list[str]:
        head, tail = self.SESSION_KEY.split("{session_id}")
        head = self.key_prefix + head.format(user_id=_quote(user_id))
        pattern = _GLOB_SPECIAL.sub(r"\\\1", head) + "*" + tail
        with self._errors():
            keys = [key async for key in self._client.scan_iter(match=pattern, count=1000)]
        return [_unquote(middle) for middle in _middles(keys, head, tail)]

    async def _close(self) -> None:
        if self._owns_client:
            with self._errors():
                await self._client.aclose()

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (_redis_errors.ConnectionError, _redis_errors.TimeoutError, OSError) as err:
            raise BackendUnavailableError(f"Redis at {self.address} is unavailable: {err}") from err
        except _redis_errors.RedisError as err:
            raise SessionError(f"Redis at {self.address} refused: {err}") from err


def _middles(keys: list[Any], head: str, tail: str) -> Iterator[str]:
    """The session id part of each key (keys with a ``:`` there are not ours)."""
    for key in keys:
        try:
            text = key.decode("utf-8") if isinstance(key, bytes) else str(key)
        except UnicodeDecodeError:
            continue
        middle = text[len(head) : len(text) - len(tail)]
        if middle and ":" not in middle:
            yield middle


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _address(client: Redis) -> str:
    settings = client.connection_pool.connection_kwargs
    if "path" in settings:
        return f"unix:{settings['path']}"
    return f"{settings.get('host', 'localhost')}:{settings.get('port', 6379)}/{settings.get('db', 0)}"
