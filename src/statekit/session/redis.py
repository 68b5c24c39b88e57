"""``RedisSession``: sessions as Redis strings, on ``redis.asyncio``.

Needs the ``redis`` extra: ``pip install 'statekit[redis]'``.

Keys follow the reference pattern, so data it wrote stays readable::

    {key_prefix}user_id:{user_id}:session:{session_id}:state

In the ids, ``%`` and ``:`` are written ``%25`` and ``%3A``, so that no pair of
ids can build the same key (``("a:session:b", "c")`` and ``("a", "b:session:c")``
would otherwise meet).

Every operation touches one session's keys, in one slot, so a Redis Cluster
works as a single server does (listing scans every primary). Leases are two
keys beside the session's (see :mod:`._redis_leases`); every write checks
them first, in its own script (:mod:`._redis_fence`). A conditional save is one Lua
compare-and-set on that key (``WATCH``/``MULTI`` on servers that run no Lua,
such as fakeredis without ``lupa``, or whose ACL refuses scripts). Each operation is bounded by ``timeout`` seconds
in all (connecting, retries, the reply): a server that accepts connections but
never answers is reported as unavailable, not waited on. Writes are sent once;
a write whose reply is lost gets one more ``timeout`` to learn whether it landed
(see :mod:`._redis_once`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from functools import partial
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

from statekit.state.flags import check_flag
from statekit.values.secrets import SecretKeys
from statekit.codecs import JSON_COMPACT, Codec
from statekit.errors import MissingExtraError, SessionError
from statekit.session._base import SessionBase
from statekit.session._ids import SessionKey
from statekit.session._appends import DeltaBase
from statekit.session.document import count_at, count_field, header, token_mark
from statekit.session._revisions import Expected
from statekit.session._fence import LeaseBusy, LeaseGrant
from statekit.session._archive import Archive, checked_keep

try:
    from redis.asyncio import ConnectionPool, Redis
    from redis.asyncio.cluster import RedisCluster

    from statekit.session._redis_client import (
        CLUSTER_SCHEMES as CLUSTER_SCHEMES,
        CONNECT_TIMEOUT as CONNECT_TIMEOUT,
        SOCKET_TIMEOUT as SOCKET_TIMEOUT,
        Client as Client,
        address,
        checked_timeout,
        client_from_url,
        defaults,
        is_positive_int,
    )
    from statekit.session._redis_cluster import is_cluster
    from statekit.session._redis_guard import Guard
    from statekit.session._redis_fence import carried, fenced
    from statekit.session._redis_history import DROP, KEEP, PUT, blob_names, history_key, keep_args
    from statekit.session._redis_history import records_key, records_text
    from statekit.session._redis_ids import Keys, answered, deleted_watching, id_args, id_key, new_id, tombstone_seconds
    from statekit.session._redis_leases import Leasing, lease_key
    from statekit.session._redis_once import Sending, write_once  # they need redis too
    from statekit.session._redis_write import ConditionalWrite
    from statekit.session._redis_reads import read_value, value_read
    from statekit.session._redis_pipe import Pipe
    from statekit.session._redis_scan import SCAN_ROUNDS as SCAN_ROUNDS, quote
    from statekit.session._redis_scan import sessions_of, some_owners_of, some_sessions_of, users_of
    from statekit.session._redis_scripts import COMPARE_AND_SET, DELETE_SCRIPT, IF_BASE, SET_SCRIPT, Script, Scripting
    from statekit.session._redis_watch import Plan, Twin, compare_and_set_watching, fenced_watching, if_base_watching
    from statekit.session._redis_watch import blob_drop_plan, blob_put_plan, keep_watching, set_plan
except ImportError as _missing:  # pragma: no cover - exercised in a venv without redis
    raise MissingExtraError(
        "RedisSession needs the redis package: pip install 'statekit[redis]'"
    ) from _missing

__all__ = ["RedisSession"]

TIMEOUT = 5.0
"""Seconds one operation may take in all (connecting, retrying, replying) unless ``timeout`` is given."""

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
        keep_ttl: With no ``key_ttl``, let a save keep the expiry the key already
            has (``SET ... KEEPTTL``) instead of clearing it: for tools that
            rewrite the keys of an app that lets them expire (``statekit
            compact`` and ``migrate`` set it).
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
        keep_history: How many past revisions of each session to keep (``None``:
            all; ``0``, the default: none). They live in a hash beside the
            session's key, expiring with it (docs/history.md, docs/backends.md).
        **kwargs: Passed to ``redis.asyncio.Redis``. Unless given,
            ``socket_connect_timeout`` and ``socket_timeout`` are 2 s and
            ``retry`` two quick retries (of reads: writes are never re-sent
            blindly), so that a server that is down is reported within a few seconds.

    Raises:
        SessionError: ``key_ttl`` or ``timeout`` is not a positive number of seconds,
            or ``keep_history`` is neither ``None`` nor an integer >= 0.
    """

    SESSION_KEY: ClassVar[str] = "user_id:{user_id}:session:{session_id}:state"
    """The key pattern (after ``key_prefix``), as in the reference."""

    codec: ClassVar[Codec] = JSON_COMPACT
    supports_appends: ClassVar[bool] = True
    supports_leases: ClassVar[bool] = True
    supports_history: ClassVar[bool] = True
    history_beside: ClassVar[bool] = True
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
        keep_ttl: bool = False,
        keep_history: int | None = 0,
        **kwargs: Any,
    ) -> None:
        if key_ttl is not None and not is_positive_int(key_ttl):
            raise SessionError(f"key_ttl must be a positive whole number of seconds or None, got {key_ttl!r}")
        self.timeout = checked_timeout(timeout)
        self.use_secret_key(secret_key)
        self.omit_secrets = check_flag(omit_secrets, "omit_secrets", SessionError)
        self.keep_history = checked_keep(keep_history, type(self), supports=self.supports_history)
        self.key_ttl = key_ttl
        self.key_prefix = key_prefix
        self._owns_client = client is None
        if client is None:
            client = Redis(
                host=host, port=port, db=db, password=password, connection_pool=connection_pool, **defaults(kwargs)
            )
        self._client: Client = client
        self._guard = Guard(client)  # the timeout, pool slots, slot map and errors of every operation
        self._pipe = Pipe.of(client)  # the commands of many tasks in one round trip (see _redis_pipe)
        self._scripting = Scripting(client, self._pipe)  # the write scripts, or their WATCH/MULTI twins on a server without Lua
        self._leasing = Leasing(client, self._scripting)  # take, renew, release (see _redis_leases)
        self._keep_ttl = check_flag(keep_ttl, "keep_ttl", SessionError)  # with no key_ttl: saves keep the key's expiry
        self.address = address(client)

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
            **options: ``key_prefix``, ``key_ttl``, ``timeout``, ``secret_key``, ``omit_secrets``, ``keep_ttl`` and
                ``keep_history`` go to the session; the rest to the redis-py client (``socket_timeout``...).

        Raises:
            SessionError: The URL is not one of these (the password is never echoed).
        """
        names = ("key_prefix", "key_ttl", "timeout", "secret_key", "omit_secrets", "keep_ttl", "keep_history")
        own = {name: options.pop(name) for name in names if name in options}
        client = client_from_url(url, cluster, options)
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
            user_id=quote(key.user_id), session_id=quote(key.session_id)
        )

    def _source(self, key: SessionKey) -> str:
        scheme = "redis+cluster" if isinstance(self._client, RedisCluster) else "redis"
        return f"{scheme}://{self.address} {self._key(key)}"

    async def _read(self, key: SessionKey) -> bytes | None:
        async with self._errors(key):
            ttl = self.key_ttl  # with a TTL, the kept revisions' expiry slides too
            keys = (self._key(key),) if ttl is None else self._keys(key)
            return value_read(await read_value(self._client, keys[0], ttl, keys[3:], self._pipe))

    async def _write(self, key: SessionKey, data: bytes) -> None:
        expiry = (self.key_ttl, self._keep_ttl)
        await self._fenced(key, SET_SCRIPT, (data, self._ttl_arg()), lambda keys: set_plan(keys, data, expiry))

    async def _fenced(
        self, key: SessionKey, script: Script, args: tuple[Any, ...], plan: Callable[[tuple[str, ...]], Plan]
    ) -> None:
        """A write that checks only the lease fence (a plain save, a blob's), on the value's, its lease's and its
        kept revisions' keys: ``script`` with ``args`` and the token carried, or ``plan(keys)`` without Lua."""
        token, sent, (name, _, *kept) = self._fence(key), [False], self._keys(key)
        keys = (name, *kept)  # (no write id: its companion is not touched)

        async def attempt(retried: bool, sending: Sending) -> Any:
            sent[0] = retried  # no write id: a refused resend cannot tell whether the first send landed
            return await self._scripting.run(
                script, sending, keys, (*args, carried(token)),
                lambda: fenced_watching(self._client, keys[1], (token, sending), plan(keys)),
            )

        fenced(await write_once(lambda: self._errors(key), attempt), lambda: self._source(key), token, sent[0])

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
        at, field = ("", b"") if count is None else (str(count[0]), count[1])
        args = (token_mark(base.token), str(base.doc_len + base.log_len), data, mode, self._ttl_arg(), at, field)
        return await self._conditional(key, IF_BASE, args, if_base_watching)

    async def _conditional(self, key: SessionKey, script: Script, args: tuple[Any, ...], twin: Twin) -> bool:
        """A conditional write with a write id (see _redis_once): ``script`` on :meth:`_keys` with ``args``, the
        token carried and the id; without Lua, its twin, given the client, the keys, ``args``, ``(key_ttl, keep_ttl)``
        and the attempt ``(id, retried, sending, token)``."""
        token = self._fence(key)
        write = ConditionalWrite(
            self._scripting, (script, self._keys(key), args, twin), token, (self.key_ttl, self._keep_ttl),
            partial(self._errors, key),
        )
        return self._answered(key, await write_once(write.errors, write.attempt), token)

    def _keys(self, key: SessionKey) -> Keys:
        """The keys a conditional write touches (:data:`._redis_ids.Keys`)."""
        name, cluster = self._key(key), self._guard.cluster
        return name, id_key(name, cluster), lease_key(name, cluster), history_key(name, cluster), records_key(name, cluster)

    def _answered(self, key: SessionKey, answer: Any, token: int | None) -> bool:
        """A conditional write's answer (a script's or a twin's) as a bool, a refusal of the lease fence raised."""
        return answered(fenced(answer, lambda: self._source(key), token), self._where(key))

    def _ttl_arg(self) -> str:
        """The scripts' TTL argument: seconds, ``"keep"`` (the key's own expiry) or ``""`` (none)."""
        if self.key_ttl is not None:
            return str(self.key_ttl)
        return "keep" if self._keep_ttl else ""

    def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> Coroutine[Any, Any, bool]:
        # a plain method handing back the write's coroutine: one coroutine less held while it waits
        if expected.only_base:
            assert expected.base is not None
            return self._if_base(key, expected.base, data, "set")
        args = (data, expected.revision, self._ttl_arg())
        return self._conditional(key, COMPARE_AND_SET, args, compare_and_set_watching)

    def _write_keeping(self, key: SessionKey, data: bytes, expected: Expected, archive: Archive) -> Coroutine[Any, Any, bool]:
        # (as _write_if: the write's coroutine handed back, one coroutine less)
        return self._conditional(key, KEEP, keep_args(data, expected, self._ttl_arg(), archive), keep_watching)

    async def _put_blob(self, key: SessionKey, name: str, data: bytes) -> None:
        await self._fenced(key, PUT, (name, data), lambda keys: blob_put_plan(keys, name, data))

    async def _drop_blobs(self, key: SessionKey, names: tuple[str, ...]) -> None:
        if names:
            await self._fenced(key, DROP, names, lambda keys: blob_drop_plan(keys, names))

    async def _get_blob(self, key: SessionKey, name: str) -> bytes | None:
        async with self._errors(key):
            return value_read(await self._client.execute_command("HGET", self._keys(key)[3], name))

    async def _get_index(self, key: SessionKey) -> bytes | None:
        async with self._errors(key):
            return records_text(await self._client.execute_command("LRANGE", self._keys(key)[4], 0, -1))

    async def _list_blobs(self, key: SessionKey) -> list[str]:
        async with self._errors(key):
            return blob_names(await self._client.execute_command("HKEYS", self._keys(key)[3]))

    async def _delete(self, key: SessionKey) -> bool:
        write_id, seconds, token, keys = new_id(), tombstone_seconds(self.timeout), self._fence(key), self._keys(key)

        async def attempt(retried: bool, sending: Sending) -> Any:
            return await self._scripting.run(
                DELETE_SCRIPT, sending, keys, (seconds, carried(token), *id_args(write_id, retried)),
                lambda: deleted_watching(self._client, keys, (write_id, seconds, token), (retried, sending)),
            )

        return self._answered(key, await write_once(lambda: self._errors(key), attempt), token)

    async def _take_lease(self, key: SessionKey, ttl: float) -> LeaseGrant | LeaseBusy:
        async with self._errors(key):
            return await self._leasing.take(self._key(key), ttl)

    async def _renew_lease(self, key: SessionKey, token: int, ttl: float) -> LeaseGrant | None:
        async with self._errors(key):
            return await self._leasing.renew(self._key(key), token, ttl)

    async def _release_lease(self, key: SessionKey, token: int) -> None:
        async with self._errors(key):
            await self._leasing.release(self._key(key), token)

    async def _exists(self, key: SessionKey) -> bool:
        async with self._errors(key):
            return bool(await self._client.exists(self._key(key)))

    async def _list(self, user_id: str) -> list[str]:
        async with self._errors():
            return await sessions_of(self._client, (self.key_prefix, self.SESSION_KEY), user_id)

    async def _list_some(self, user_id: str, limit: int) -> tuple[list[str], bool]:
        async with self._errors():
            return await some_sessions_of(self._client, (self.key_prefix, self.SESSION_KEY), user_id, limit)

    async def _owners(self, session_id: str, limit: int) -> tuple[list[str], bool]:
        async with self._errors():
            return await some_owners_of(self._client, (self.key_prefix, self.SESSION_KEY), session_id, limit)

    async def _list_users(self) -> list[str]:
        async with self._errors():
            return await users_of(self._client, (self.key_prefix, self.SESSION_KEY))

    async def _close(self) -> None:
        if not self._owns_client:
            return
        await self._guard.close(self.timeout, lambda: self.address)

    def _errors(self, key: SessionKey | None = None, *, closing: bool = False) -> AbstractAsyncContextManager[None]:
        """Bound the operation by ``timeout`` and turn redis-py's errors into statekit's.

        Raises:
            SessionError: The session is closed (``closing``: the close itself).
        """
        return self._guard.errors(partial(self._where, key), self.timeout, closing=closing)

    def _where(self, key: SessionKey | None) -> str:
        """The server, or for a cluster the node that holds ``key`` (errors only)."""
        if key is None or not is_cluster(self._client):
            return self.address
        try:
            node = self._client.get_node_from_key(self._key(key))
        except Exception:  # noqa: BLE001 - the topology is unknown: name the cluster
            return self.address
        return f"cluster node {node.name}" if node is not None else self.address

