"""``RedisSession``: sessions as Redis strings, on ``redis.asyncio``.

Needs the ``redis`` extra: ``pip install 'statekit[redis]'``.

Keys follow the reference pattern, so data it wrote stays readable::

    {key_prefix}user_id:{user_id}:session:{session_id}:state

In the ids, ``%`` and ``:`` are written ``%25`` and ``%3A``, so that no pair of
ids can build the same key (``("a:session:b", "c")`` and ``("a", "b:session:c")``
would otherwise meet).

Every operation touches one key, so a Redis Cluster works as a single server
does (listing scans every primary). A conditional save is one Lua
compare-and-set on that key (``WATCH``/``MULTI`` on servers that run no Lua,
such as fakeredis without ``lupa``, or whose ACL refuses scripts). Each operation is bounded by ``timeout`` seconds
in all (connecting, retries, the reply): a server that accepts connections but
never answers is reported as unavailable, not waited on. Writes are sent once;
a write whose reply is lost gets one more ``timeout`` to learn whether it landed
(see :mod:`._redis_once`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

from statekit.state.flags import check_flag
from statekit.values.secrets import SecretKeys
from statekit.codecs import JSON_COMPACT, Codec
from statekit.errors import BackendAuthError, BackendUnavailableError, MissingExtraError, SessionError
from statekit.session._base import SessionBase
from statekit.session._ids import SessionKey
from statekit.session._appends import DeltaBase
from statekit.session._companion import joined
from statekit.session.document import HEAD_BYTES, count_at, count_field, doc_token, header, token_mark
from statekit.session._redis_auth import password_hint
from statekit.session._revisions import Expected

try:
    from redis import exceptions as _redis_errors
    from redis.asyncio import ConnectionPool, Redis
    from redis.asyncio.cluster import RedisCluster
    from redis.asyncio.retry import Retry
    from redis.client import NEVER_DECODE
    from redis.backoff import ExponentialWithJitterBackoff

    from statekit.session._redis_ids import (
        DELETE,
        MINE,
        Pipe,
        Planned,
        answered,
        companion_expiry,
        deleted_watching,
        id_args,
        id_key,
        new_id,
        tombstone_seconds,
        watched,
    )
    from statekit.session._redis_once import Sending, send_once, write_once  # they need redis too
except ImportError as _missing:  # pragma: no cover - exercised in a venv without redis
    raise MissingExtraError(
        "RedisSession needs the redis package: pip install 'statekit[redis]'"
    ) from _missing

__all__ = ["RedisSession"]

CONNECT_TIMEOUT = 2.0
"""Seconds to wait for a connection, unless ``socket_connect_timeout`` is given."""

SOCKET_TIMEOUT = 2.0
"""Seconds to wait for a reply, unless ``socket_timeout`` is given."""

TIMEOUT = 5.0
"""Seconds one operation may take in all (connecting, retrying, replying) unless ``timeout`` is given."""

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
"""URL schemes of :meth:`RedisSession.from_url` that mean a Redis Cluster (and the plain scheme they stand for)."""

_UNAVAILABLE = (
    _redis_errors.ConnectionError,
    _redis_errors.TimeoutError,
    _redis_errors.ClusterError,
    _redis_errors.RedisClusterException,
    _redis_errors.TryAgainError,
    OSError,  # builtin TimeoutError (asyncio.timeout) included
)
_QUERY_VALUE = re.compile(r"([?&;]([^=&;]*)=)([^&;]*)")
_URL_DELIMITERS = re.compile(r"[/?#@:&;=%]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//)?")

_COMPARE_AND_SET = MINE + """
local current = redis.call('GET', KEYS[1])
local revision = ''
if current then revision = redis.sha1hex(current) end
if revision ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
elseif ARGV[3] == 'keep' then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
else
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
end
stamp()
return 1
"""
"""Write ARGV[1] if the stored value's SHA-1 is ARGV[2] ('' = no value); ARGV[3]: TTL, '' or 'keep' (the key's own);
ARGV[4]: the write's id, pushed onto KEYS[2]; ARGV[5]: how many ids it keeps; ARGV[6]: 'retry' after a lost
reply (see _redis_once, _redis_ids). Answers 1 (written), 0 (changed by another writer), 2 (unknown after a retry)."""

_COMPARE_AND_SET_SHA = hashlib.sha1(_COMPARE_AND_SET.encode(), usedforsecurity=False).hexdigest()

# Deltas of append-only lists follow the document in the same key (one line
# each, see _appends.py). Within one document token the value only grows, so
# the token (in the document's first bytes) and the length say what is stored.
_IF_BASE = MINE + f"""
local head = redis.call('GETRANGE', KEYS[1], 0, {HEAD_BYTES - 1})
if not string.find(head, ARGV[1], 1, true) then return 0 end
if redis.call('STRLEN', KEYS[1]) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[4] == 'set' then
  if ARGV[5] == '' then redis.call('SET', KEYS[1], ARGV[3])
  elseif ARGV[5] == 'keep' then redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
  else redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[5]) end
  stamp()
  return 1
end
if ARGV[3] ~= '' then redis.call('APPEND', KEYS[1], ARGV[3]) end
if ARGV[6] ~= '' then redis.call('SETRANGE', KEYS[1], tonumber(ARGV[6]), ARGV[7]) end
if ARGV[5] ~= '' and ARGV[5] ~= 'keep' then redis.call('EXPIRE', KEYS[1], ARGV[5]) end
stamp()
return 1
"""
_IF_BASE_SHA = hashlib.sha1(_IF_BASE.encode(), usedforsecurity=False).hexdigest()
_DELETE_SHA = hashlib.sha1(DELETE.encode(), usedforsecurity=False).hexdigest()

_OTHER_LOOP = (
    "a connection of this RedisSession belongs to another event loop (closed, or not the one running here; "
    "redis-py binds connections to the loop that opened them): make one session object per event loop"
)

SCAN_ROUNDS = 10
"""A missing load's hint (near session ids) looks at most at the keys of this many ``SCAN`` calls of 1000."""

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
_QUOTED = re.compile("%25|%3A")


def _quote(value: str) -> str:
    return value.replace("%", "%25").replace(":", "%3A") if "%" in value or ":" in value else value


def _unquote(value: str) -> str:
    return _QUOTED.sub(lambda match: "%" if match.group() == "%25" else ":", value)


def _default_retry() -> Retry:
    """Two quick retries: a restarted server is met, a dead one reported in seconds."""
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 2)


Client = Redis | RedisCluster
"""The clients a :class:`RedisSession` works with."""


class RedisSession(SessionBase):
    """Sessions in Redis (a server or a Redis Cluster), one string key per (user_id, session_id).

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
        client: An existing ``redis.asyncio.Redis`` or
            ``redis.asyncio.cluster.RedisCluster`` to use; it is not closed by
            :meth:`aclose` (whoever opened it closes it).
        timeout: Seconds one operation may take in all before it raises
            ``BackendUnavailableError`` (default :data:`TIMEOUT`, 5 s); a write
            whose reply was lost gets as long again to learn whether it landed,
            then raises ``WriteOutcomeUnknownError``.
        secret_key: Encrypt ``state_field(secret=True)`` values with this key, or
            with the first of a list of keys, each of which decrypts (see
            :meth:`SessionBase.use_secret_key`).
        omit_secrets: Without a key, leave secret fields out of what is saved;
            ``False`` (the default): such a save is refused with ``SecretError``.
        **kwargs: Passed to ``redis.asyncio.Redis``. Unless given,
            ``socket_connect_timeout`` and ``socket_timeout`` are 2 s and
            ``retry`` two quick retries (of reads: writes are never re-sent
            blindly), so that a server that is down is reported within a few seconds.

    Raises:
        SessionError: ``key_ttl`` or ``timeout`` is not a positive number of seconds.
    """

    SESSION_KEY: ClassVar[str] = "user_id:{user_id}:session:{session_id}:state"
    """The key pattern (after ``key_prefix``), as in the reference."""

    codec: ClassVar[Codec] = JSON_COMPACT
    supports_appends: ClassVar[bool] = True
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
        client: Client | None = None,
        timeout: float = TIMEOUT,
        secret_key: SecretKeys | None = None,
        omit_secrets: bool = False,
        **kwargs: Any,
    ) -> None:
        if key_ttl is not None and not _is_positive_int(key_ttl):
            raise SessionError(f"key_ttl must be a positive whole number of seconds or None, got {key_ttl!r}")
        self.timeout = _check_timeout(timeout)
        self.use_secret_key(secret_key)
        self.omit_secrets = check_flag(omit_secrets, "omit_secrets", SessionError)
        self.key_ttl = key_ttl
        self.key_prefix = key_prefix
        self._owns_client = client is None
        if client is None:
            client = Redis(
                host=host, port=port, db=db, password=password, connection_pool=connection_pool, **_defaults(kwargs)
            )
        self._client: Client = client
        self._closed = False  # aclose() of an owned client: no operation may start (redis-py would reconnect)
        self._in_flight = 0  # operations under _errors: aclose() lets them end before closing the client
        self._slots = _slots(client)  # more operations than the pool has connections wait their turn
        self._lua = True  # until the server says it runs no scripts
        self._topology = asyncio.Lock()  # a cluster client learns its slot map once, before concurrent use
        self._keep_ttl = False  # with no key_ttl: saves keep the key's expiry (statekit's commands set it)
        self.address = _address(client)

    def __repr__(self) -> str:
        return f"RedisSession(address={self.address!r}, key_prefix={self.key_prefix!r}, key_ttl={self.key_ttl!r})"

    @classmethod
    def from_url(cls, url: str, *, cluster: bool = False, **options: Any) -> RedisSession:
        """Open a session store on the Redis server (or cluster) a URL names.

        Schemes: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://``
        (TLS), ``unix:///path/to/socket``, and ``redis+cluster://host:port`` /
        ``rediss+cluster://`` for a Redis Cluster (any node of it; the client
        finds the others). The session owns the client and closes it.

        Args:
            url: Where Redis is; query options of redis-py are understood.
            cluster: Build a ``RedisCluster`` client even for a ``redis://`` URL.
            **options: ``key_prefix``, ``key_ttl``, ``timeout``, ``secret_key`` and ``omit_secrets`` go to the
                session; the rest to the redis-py client (``socket_timeout``...).

        Raises:
            SessionError: The URL is not one of these (the password is never echoed).
        """
        own = {name: options.pop(name) for name in ("key_prefix", "key_ttl", "timeout", "secret_key", "omit_secrets") if name in options}
        scheme, sep, rest = url.partition("://")
        if scheme in CLUSTER_SCHEMES:
            url, cluster = f"{CLUSTER_SCHEMES[scheme]}{sep}{rest}", True
        try:
            _check_database(url)
            client: Client = (RedisCluster if cluster else Redis).from_url(url, **_defaults(options))
        except (ValueError, TypeError, _redis_errors.RedisError, _redis_errors.RedisClusterException) as err:
            raise SessionError(f"not a usable Redis URL {_redact(url)!r}: {_reason(err, url)}") from None
        session = cls(client=client, **own)
        session._owns_client = True
        return session

    def get_client(self) -> Client:
        """The underlying ``redis.asyncio`` client (``Redis`` or ``RedisCluster``)."""
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
        scheme = "redis+cluster" if isinstance(self._client, RedisCluster) else "redis"
        return f"{scheme}://{self.address} {self._key(key)}"

    async def _read(self, key: SessionKey) -> bytes | None:
        async with self._errors(key):
            if self.key_ttl is None:
                value = await self._client.get(self._key(key))
            else:
                value = await self._client.getex(self._key(key), ex=self.key_ttl)
        value = value.encode("utf-8") if isinstance(value, str) else value
        return None if value is None else self._joined(value)

    async def _write(self, key: SessionKey, data: bytes) -> None:
        name = self._key(key)
        expiry = ("EX", self.key_ttl) if self.key_ttl is not None else ("KEEPTTL",) if self._keep_ttl else ()

        async def attempt(retried: bool, sending: Sending) -> None:
            await send_once(self._client, sending, name, "SET", name, data, *expiry)

        await write_once(lambda: self._errors(key), attempt)

    async def _append(self, key: SessionKey, line: bytes, base: DeltaBase) -> int | None:
        data = (b"\n" + header(base.token, 1) if base.log_len == 0 and line else b"") + line
        count = None
        if base.log_len and line:  # the header's count of deltas, rewritten in place (see _proofs.py)
            at = count_at(header(base.token, 0))
            count = None if at is None else (base.doc_len + 1 + at, count_field(base.count + 1))
        done = await self._if_base(key, base, data, "append", count)
        return len(data) if done else None

    async def _if_base(
        self, key: SessionKey, base: DeltaBase, data: bytes, mode: str, count: tuple[int, bytes] | None = None
    ) -> bool:
        """Append ``data`` (or set it, ``mode="set"``) if the stored value is still ``base``
        (``count``: then write these bytes at this offset)."""
        ttl = self._ttl_arg()
        at, field = ("", b"") if count is None else (str(count[0]), count[1])
        write_id = new_id()
        args = (token_mark(base.token), str(base.doc_len + base.log_len), data, mode, ttl, at, field)
        name = self._key(key)

        async def attempt(retried: bool, sending: Sending) -> int:
            if self._lua:
                try:
                    return await self._eval(_IF_BASE, _IF_BASE_SHA, name, sending, *args, *id_args(write_id, retried))
                except _redis_errors.ResponseError as err:
                    if not _refuses_scripts(err):
                        raise
                    self._lua = False
            return await self._if_base_watch(name, base, data, (mode, count), (write_id, retried, sending))

        return answered(await write_once(lambda: self._errors(key), attempt), self._where(key))

    async def _eval(self, script: str, sha: str, name: str, sending: Sending, *args: Any) -> int:
        """Run a script on ``name`` and its companion (:func:`id_key`); its answer (``DONE``...)."""
        keys = (2, name, self._id_key(name))
        try:
            return int(await send_once(self._client, sending, name, "EVALSHA", sha, *keys, *args))
        except _redis_errors.NoScriptError:  # EVAL caches it on this node only (SCRIPT LOAD needs all of them)
            return int(await send_once(self._client, sending, name, "EVAL", script, *keys, *args))

    def _id_key(self, name: str) -> str:
        return id_key(name, isinstance(self._client, RedisCluster))

    async def _if_base_watch(
        self,
        name: str,
        base: DeltaBase,
        data: bytes,
        change: tuple[str, tuple[int, bytes] | None],
        attempt: tuple[str, bool, Sending],
    ) -> int:
        """The same as ``_IF_BASE`` with ``WATCH``/``MULTI``, for servers that run no Lua
        (``change``: the mode and the header's count to write; ``attempt``: the write's id, whether it is
        sent again, its ``Sending``)."""
        mode, count = change

        async def reads(pipe: Pipe) -> Planned:
            expiry = await companion_expiry(pipe, name, self.key_ttl, mode != "set" or self._keep_ttl)
            # raw bytes even from a decode_responses client: 512 bytes may end inside a character
            head = await pipe.execute_command("GETRANGE", name, 0, HEAD_BYTES - 1, **{NEVER_DECODE: True})
            if not isinstance(head, bytes) or doc_token(head) != base.token:
                return None
            if await pipe.strlen(name) != base.doc_len + base.log_len:
                return None
            return queue, expiry

        def queue(pipe: Pipe) -> None:
            if mode == "set":
                pipe.set(name, data, **self._expiry())
            elif data:
                pipe.append(name, data)
            if count is not None:
                pipe.setrange(name, *count)
            if mode != "set" and self.key_ttl is not None:
                pipe.expire(name, self.key_ttl)

        return await watched(self._client, (name, self._id_key(name)), attempt, reads)

    def _ttl_arg(self) -> str:
        """The scripts' TTL argument: seconds, ``"keep"`` (the key's own expiry) or ``""`` (none)."""
        if self.key_ttl is not None:
            return str(self.key_ttl)
        return "keep" if self._keep_ttl else ""

    def _expiry(self) -> dict[str, Any]:
        """``SET``'s expiry options, as :meth:`_ttl_arg` says."""
        return {"ex": self.key_ttl, "keepttl": self.key_ttl is None and self._keep_ttl}

    def _joined(self, value: bytes) -> bytes:
        """A value holding deltas after its document, marked for the decoder."""
        end = value.find(b"\n")
        token = doc_token(value) if end >= 0 else None
        return value if token is None else joined(value[:end], value[end:], token)

    async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
        if expected.only_base:
            assert expected.base is not None
            return await self._if_base(key, expected.base, data, "set")
        name, write_id = self._key(key), new_id()

        async def attempt(retried: bool, sending: Sending) -> int:
            if self._lua:
                try:
                    args = (data, expected.revision, self._ttl_arg(), *id_args(write_id, retried))
                    return await self._eval(_COMPARE_AND_SET, _COMPARE_AND_SET_SHA, name, sending, *args)
                except _redis_errors.ResponseError as err:
                    if not _refuses_scripts(err):
                        raise
                    self._lua = False  # a server without scripting (fakeredis, some proxies, an ACL)
            return await self._compare_and_set_watch(name, data, expected, (write_id, retried, sending))

        return answered(await write_once(lambda: self._errors(key), attempt), self._where(key))

    async def _compare_and_set_watch(
        self, name: str, data: bytes, expected: Expected, attempt: tuple[str, bool, Sending]
    ) -> int:
        """The same compare-and-set with ``WATCH``/``MULTI``, for servers that run no Lua."""

        async def reads(pipe: Pipe) -> Planned:
            expiry = await companion_expiry(pipe, name, self.key_ttl, self._keep_ttl)
            current = await pipe.get(name)
            if not expected.matches(current.encode("utf-8") if isinstance(current, str) else current):
                return None
            return (lambda queued: queued.set(name, data, **self._expiry())), expiry

        return await watched(self._client, (name, self._id_key(name)), attempt, reads)

    async def _delete(self, key: SessionKey) -> bool:
        name, write_id, seconds = self._key(key), new_id(), tombstone_seconds(self.timeout)

        async def attempt(retried: bool, sending: Sending) -> int:
            if self._lua:
                try:
                    return await self._eval(DELETE, _DELETE_SHA, name, sending, seconds, *id_args(write_id, retried))
                except _redis_errors.ResponseError as err:
                    if not _refuses_scripts(err):
                        raise
                    self._lua = False
            keys = (name, self._id_key(name))
            return await deleted_watching(self._client, keys, (write_id, seconds), (retried, sending))

        return answered(await write_once(lambda: self._errors(key), attempt), self._where(key))

    async def _exists(self, key: SessionKey) -> bool:
        async with self._errors(key):
            return bool(await self._client.exists(self._key(key)))

    async def _list(self, user_id: str) -> list[str]:
        head, tail = self.SESSION_KEY.split("{session_id}")
        head = self.key_prefix + head.format(user_id=_quote(user_id))
        pattern = _GLOB_SPECIAL.sub(r"\\\1", head) + "*" + tail
        async with self._errors():
            keys = [key async for key in self._client.scan_iter(match=pattern, count=1000)]
        return [_unquote(middle) for middle in _middles(keys, head, tail)]

    async def _list_some(self, user_id: str, limit: int) -> tuple[list[str], bool]:
        head, tail = self.SESSION_KEY.split("{session_id}")
        head = self.key_prefix + head.format(user_id=_quote(user_id))
        return await self._scan_some(head, tail, limit)

    async def _owners(self, session_id: str, limit: int) -> tuple[list[str], bool]:
        head, tail = self.SESSION_KEY.split("{user_id}")
        return await self._scan_some(self.key_prefix + head, tail.format(session_id=_quote(session_id)), limit)

    async def _scan_some(self, head: str, tail: str, limit: int) -> tuple[list[str], bool]:
        """The middles of keys ``head*tail``, from at most :data:`SCAN_ROUNDS` ``SCAN`` calls
        (a Redis Cluster: rounds, each one ``SCAN`` per master), and whether the scan stopped before the end."""
        pattern = _GLOB_SPECIAL.sub(r"\\\1", head) + "*" + _GLOB_SPECIAL.sub(r"\\\1", tail)
        async with self._errors():
            if isinstance(self._client, RedisCluster):
                keys, more = await self._scan_cluster(self._client, pattern, limit)
            else:
                keys, cursor = [], 0
                for _ in range(SCAN_ROUNDS):
                    cursor, found = await self._client.scan(cursor, match=pattern, count=1000)
                    keys += found
                    if not cursor or len(keys) >= limit:
                        break
                more = bool(cursor)
        names = [_unquote(middle) for middle in _middles(keys, head, tail)]
        return names[:limit], more or len(names) > limit

    async def _scan_cluster(self, client: RedisCluster, pattern: str, limit: int) -> tuple[list[Any], bool]:
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

    async def _list_users(self) -> list[str]:
        head, rest = self.SESSION_KEY.split("{user_id}")
        middle, tail = rest.split("{session_id}")
        head = self.key_prefix + head
        pattern = "*".join(_GLOB_SPECIAL.sub(r"\\\1", part) for part in (head, middle, tail))
        async with self._errors():
            keys = [key async for key in self._client.scan_iter(match=pattern, count=1000)]
        return sorted({_unquote(user) for user, _ in _pairs(keys, head, middle, tail)})

    async def _close(self) -> None:
        if not self._owns_client:
            return
        self._closed = True  # no new operation starts; those in flight end first (each within its timeout)
        with contextlib.suppress(TimeoutError):  # then they fail, as the client closes under them
            async with asyncio.timeout(self.timeout + 1):
                while self._in_flight:
                    await asyncio.sleep(0.001)
        async with self._errors(closing=True):
            await self._client.aclose()

    @contextlib.asynccontextmanager
    async def _errors(self, key: SessionKey | None = None, *, closing: bool = False) -> AsyncIterator[None]:
        """Bound the operation by ``timeout`` and turn redis-py's errors into statekit's.

        Raises:
            SessionError: The session is closed (``closing``: the close itself).
        """
        if self._closed and not closing:
            raise SessionError(f"Redis at {self._where(key)}: this session is closed")
        self._in_flight += 1
        try:
            async with asyncio.timeout(self.timeout), self._slots or contextlib.nullcontext():
                if isinstance(self._client, RedisCluster) and not closing:
                    await self._ready(self._client)
                yield
        except (_redis_errors.AuthenticationError, _redis_errors.AuthorizationError) as err:
            hint = password_hint(self._client) if isinstance(err, _redis_errors.AuthenticationError) else ""
            raise BackendAuthError(f"Redis at {self._where(key)} refused our credentials: {err}{hint}") from err
        except TimeoutError as err:
            message = f"Redis at {self._where(key)} is unavailable: no answer within {self.timeout:g} s"
            raise BackendUnavailableError(message) from err
        except _UNAVAILABLE as err:
            raise BackendUnavailableError(f"Redis at {self._where(key)} is unavailable: {err}") from err
        except _redis_errors.RedisError as err:
            raise SessionError(f"Redis at {self._where(key)} refused: {err}") from err
        except RuntimeError as err:
            if "loop" not in str(err):
                raise
            raise SessionError(f"Redis at {self._where(key)}: {_OTHER_LOOP}") from err
        finally:
            self._in_flight -= 1

    async def _ready(self, client: RedisCluster) -> None:
        """Learn the cluster's slot map once (again after a reset) before the commands of many tasks:
        concurrent first commands race in redis-py and fail, or run twice."""
        async with self._topology:
            await client.initialize()  # returns at once when the map is known

    def _where(self, key: SessionKey | None) -> str:
        """The server, or for a cluster the node that holds ``key`` (errors only)."""
        if key is None or not isinstance(self._client, RedisCluster):
            return self.address
        try:
            node = self._client.get_node_from_key(self._key(key))
        except Exception:  # noqa: BLE001 - the topology is unknown: name the cluster
            return self.address
        return f"cluster node {node.name}" if node is not None else self.address


def _slots(client: Client) -> asyncio.Semaphore | None:
    """One slot per connection of the client's pool: redis-py raises "Too many connections"
    instead of waiting for one (``None`` for a cluster, whose pools are per node)."""
    limit = getattr(getattr(client, "connection_pool", None), "max_connections", None)
    return asyncio.Semaphore(limit) if isinstance(limit, int) and 0 < limit < 2**31 else None


def _refuses_scripts(err: Exception) -> bool:
    """Whether the server runs no scripts: it does not know the command, or an ACL refuses it (``NOPERM``)."""
    message = str(err).lower()
    return message.startswith("unknown command") or (
        isinstance(err, _redis_errors.NoPermissionError) and "'eval" in message
    )


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


def _check_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SessionError(f"timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _defaults(options: dict[str, Any]) -> dict[str, Any]:
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
    head, rest = _split_authority(str(url))
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
    _, rest = _split_authority(url)
    user_info, at, _ = rest.rpartition("@")
    user, colon, password = user_info.partition(":")
    found = [password if colon else user] if at else []
    found += [m.group(3) for m in _QUERY_VALUE.finditer(rest) if _names_password(m.group(2))]
    texts = found + [urllib.parse.unquote_plus(text) for text in found]
    return {piece for text in texts for piece in [text, *_URL_DELIMITERS.split(text)] if piece}


def _split_authority(url: str) -> tuple[str, str]:
    """``url`` cut before its user info: after the scheme and its ``//`` (if any), else at the start."""
    scheme = _SCHEME.match(url)
    return (url[: scheme.end()], url[scheme.end() :]) if scheme else ("", url)


def _names_password(name: str) -> bool:
    return "pass" in urllib.parse.unquote_plus(name).lower()


def _address(client: Client) -> str:
    if isinstance(client, RedisCluster):
        return ",".join(f"{node.host}:{node.port}" for node in client.nodes_manager.startup_nodes.values())
    settings = client.connection_pool.connection_kwargs
    if "path" in settings:
        return f"unix:{settings['path']}"
    return f"{settings.get('host', 'localhost')}:{settings.get('port', 6379)}/{settings.get('db', 0)}"
