"""``PostgresSession``: sessions as rows of a PostgreSQL table, on psycopg 3 (async).

Needs the ``postgres`` extra: ``pip install 'statekit[postgres]'``.

One row per (user_id, session_id) holds the document's exact bytes (``raw``:
the revision is their SHA-1) and the same document as ``jsonb`` (``document``)
for people who query it; items appended to append-only lists since the last
full write are rows of ``<table>_deltas``, one per save, so such a turn writes
only its new items. Every write is one statement (the lease's fence, then a
compare-and-set on the revision, or on the delta base), so two writers never
both win; leases are rows of ``<table>_leases`` (:mod:`._pg_leases`). The tables are
created on first use (or by ``statekit init-db URL``) and carry a schema
version; docs/backends.md shows the DDL.

Every operation is bounded: ``timeout`` seconds for connecting and for each
statement (``connect_timeout``, ``statement_timeout``: the server cancels it,
so nothing is written), and ``timeout`` + :data:`GRACE` seconds in all on the
client's clock (then a write's outcome is unknown: ``WriteOutcomeUnknownError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from statekit.state.flags import check_flag
from statekit.values.secrets import SecretKeys
from statekit.codecs import JSON_COMPACT, Codec
from statekit.errors import MissingExtraError, SessionError
from statekit.session._base import SessionBase
from statekit.session._appends import DeltaBase
from statekit.session._archive import Archive, checked_keep
from statekit.session._fence import LeaseBusy, LeaseGrant
from statekit.session._ids import SessionKey
from statekit.session.document import header
from statekit.session._revisions import MISSING_REVISION, Expected, revision_of

try:
    import psycopg

    from statekit.session._pg_connect import (
        Connections,
        ConnectionSource,
        address_of,
        check_pool_size,
        check_table,
        check_timeout,
        conninfo_options,
        execute,
        password_of,
        redacted,
        scheme,
        translated,
        url_password,
    )
    from statekit.session._pg_leases import refused, release, renew, take
    from statekit.session._pg_rows import NUL_ESCAPE, blob_of, row_of, stored
    from statekit.session._pg_schema import ensure_schema
    from statekit.session._pg_sql import SCHEMA_VERSION, Statements, ddl_text
except ImportError as _missing:  # pragma: no cover - exercised in a venv without psycopg
    raise MissingExtraError("PostgresSession needs psycopg 3: pip install 'statekit[postgres]'") from _missing

__all__ = ["SCHEMA_VERSION", "PostgresSession"]

TIMEOUT = 5.0
"""Seconds to connect, and for each statement, unless ``timeout`` is given."""

GRACE = 2.0
"""Seconds past ``timeout`` that an operation may take in all before the client gives up on it."""

POOL_SIZE = 10
"""Connections a session object keeps open at most (more concurrent operations wait their turn)."""


SCHEMES = ("postgresql", "postgres")


class PostgresSession(SessionBase):
    """Sessions in a PostgreSQL table, one row per (user_id, session_id).

    Args:
        conninfo_or_pool: A libpq connection string or ``postgresql://`` URL, or
            a pool with an async ``connection()`` context manager
            (``psycopg_pool.AsyncConnectionPool``, opened by you; its
            connections must be in autocommit mode, and it is not closed by
            :meth:`aclose`; set ``statement_timeout`` on its connections
            yourself: only the client's deadline applies to them).
        table: The sessions table (a plain SQL identifier); its deltas live in ``<table>_deltas``.
        timeout: Seconds to connect and for each statement (default :data:`TIMEOUT`);
            an operation raises ``BackendUnavailableError`` (or ``BackendAuthError``)
            within ``timeout`` + :data:`GRACE` seconds.
        secret_key: Encrypt ``state_field(secret=True)`` values with this key (see
            :meth:`SessionBase.use_secret_key`).
        omit_secrets: Without a key, leave secret fields out of what is saved.
        pool_size: Connections kept open at most (a connection string only).
        create_schema: Create the tables on first use when missing (``False``:
            they must exist, made by ``statekit init-db``).
        keep_history: How many past revisions of each session a save keeps besides the
            head (``None``: all; ``0``, the default: none, stored exactly as without
            history), as rows of ``<table>_history`` (see docs/history.md).
        **connect_options: More ``psycopg.AsyncConnection.connect`` arguments.

    Raises:
        SessionError: A bad table name, timeout, pool size or ``keep_history``.
    """

    codec: ClassVar[Codec] = JSON_COMPACT
    supports_appends: ClassVar[bool] = True
    supports_leases: ClassVar[bool] = True
    supports_history: ClassVar[bool] = True

    def __init__(
        self,
        conninfo_or_pool: str | ConnectionSource,
        *,
        table: str = "statekit_sessions",
        timeout: float = TIMEOUT,
        secret_key: SecretKeys | None = None,
        omit_secrets: bool = False,
        pool_size: int = POOL_SIZE,
        create_schema: bool = True,
        keep_history: int | None = 0,
        **connect_options: Any,
    ) -> None:
        check_table(table)
        self.timeout = check_timeout(timeout)
        pool_size = check_pool_size(pool_size)
        self.use_secret_key(secret_key)
        self.omit_secrets = check_flag(omit_secrets, "omit_secrets", SessionError)
        self.create_schema = check_flag(create_schema, "create_schema", SessionError)
        self.keep_history = checked_keep(keep_history, type(self), supports=self.supports_history)
        self.table = table
        self._sql = Statements(table)
        self._schema_ready = False
        self._closed = False
        if isinstance(conninfo_or_pool, str):
            self._password = connect_options.get("password") or password_of(conninfo_or_pool)
            self.address = address_of(conninfo_or_pool)
            settings = {"connect_timeout": max(2, math.ceil(self.timeout)), **connect_options}
            given = connect_options.get("options") or conninfo_options(conninfo_or_pool)
            settings["options"] = f"-c statement_timeout={math.ceil(self.timeout * 1000)} {given}".strip()
            owned = Connections(conninfo_or_pool, pool_size, settings)
            self._owned: Connections | None = owned
            self._source_of: ConnectionSource = owned
        else:
            if not callable(getattr(conninfo_or_pool, "connection", None)):
                raise SessionError(
                    f"PostgresSession needs a connection string or a pool with connection(), got {type(conninfo_or_pool).__name__}"
                )
            self._password, self.address, self._owned = None, "a pool", None
            self._source_of = conninfo_or_pool

    def __repr__(self) -> str:
        return f"PostgresSession(address={self.address!r}, table={self.table!r})"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresSession:
        """Open a session store on the PostgreSQL database a URL names.

        ``postgresql://[user[:password]@][host][:port][/dbname][?param=value...]``
        (``postgres://`` too); query parameters are libpq's (``sslmode``...).

        Args:
            url: Where the database is.
            **options: ``table``, ``timeout``, ``secret_key``, ``omit_secrets``, ``pool_size``,
                ``create_schema``, ``keep_history``; the rest go to ``psycopg.AsyncConnection.connect``.

        Raises:
            SessionError: The URL is not a usable PostgreSQL URL (the password is never echoed).
        """
        if scheme(url) not in SCHEMES:
            shown = redacted(str(url), url_password(str(url)))
            raise SessionError(f"not a PostgreSQL URL {shown!r}: it must start with postgresql:// or postgres://")
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as err:
            secret = url_password(url)
            raise SessionError(
                f"not a usable PostgreSQL URL {redacted(url, secret)!r}: {redacted(str(err), secret)}"
            ) from None
        return cls(url, **options)

    @staticmethod
    def schema_ddl(table: str = "statekit_sessions") -> str:
        """The SQL that creates the tables (what ``statekit init-db`` and the first use run), for operators.

        Raises:
            SessionError: ``table`` is not a plain SQL name.
        """
        return ddl_text(check_table(table))

    async def init_schema(self) -> int:
        """Create the tables when missing, or upgrade those of an older schema version in place (as the first
        use does), and return the schema version.

        Raises:
            SessionError: The tables were made by a newer statekit (a higher schema version).
            BackendUnavailableError, BackendAuthError: As any operation.
        """
        async with self._conn(None, writing=True) as conn:
            return await self._ensure_schema(conn, create=True)

    # -- storage primitives --------------------------------------------------------

    async def _read(self, key: SessionKey) -> bytes | None:
        async with self._conn(key) as conn:
            row = await self._one(conn, self._sql.read, _params(key))
        return None if row is None else stored(row)

    async def _write(self, key: SessionKey, data: bytes) -> None:
        await self._write_kind(key, data, "always", {})

    async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
        return await self._compare_and_set(key, data, expected, {})

    async def _write_keeping(self, key: SessionKey, data: bytes, expected: Expected, archive: Archive) -> bool:
        return await self._compare_and_set(key, data, expected, {"keep_as": archive.keep_as, "drop": list(archive.drop)})

    async def _compare_and_set(self, key: SessionKey, data: bytes, expected: Expected, keeping: dict[str, Any]) -> bool:
        """``_write_if``, and with ``keeping`` (``_pg_sql.KEEPING``'s parameters) ``_write_keeping``."""
        base = expected.base
        if expected.only_base or (base is not None and base.log_len > 0):
            assert base is not None
            return await self._write_kind(key, data, "base", _base(base) | keeping)
        if expected.revision == MISSING_REVISION:
            return await self._write_kind(key, data, "missing", keeping)
        return await self._write_kind(key, data, "revision", {"expected": expected.revision} | keeping, expected)

    async def _write_kind(
        self, key: SessionKey, data: bytes, kind: str, more: dict[str, Any], expected: Expected | None = None
    ) -> bool:
        """One full write, fenced (see ``_pg_sql.WRITE_KINDS``), keeping history when ``more`` has ``keep_as``;
        ``expected``: compare revisions in Python when the row found has deltas (its revision is not a column then)."""
        params = {**_params(key), **row_of(data), **more, "fence": self._fence(key)}
        writes = self._sql.keeping if "keep_as" in more else self._sql.writes
        async with self._conn(key, writing=True) as conn:
            row = await self._one(conn, writes[kind], params)
            assert row is not None
            refused(row, self._source(key), params["fence"])
            written, has_deltas = bool(row[0]), bool(row[1])
            if written or not has_deltas or expected is None:
                return written
            async with conn.transaction():  # a row with deltas: lock it, hash it, write it (fenced again)
                # Locked first, then read in a snapshot taken under the lock: a locking read returns the row's
                # newest version but its deltas (a subquery) as of its own snapshot, which an append that
                # committed while it waited for the lock is not in.
                if await self._one(conn, self._sql.read_locked, params) is None:
                    return False
                found = await self._one(conn, self._sql.read, params)
                if found is None or revision_of(stored(found)) != expected.revision:
                    return False
                again = await self._one(conn, writes["always"], params)
                assert again is not None
                refused(again, self._source(key), params["fence"])
            return True

    async def _append(self, key: SessionKey, line: bytes, base: DeltaBase) -> int | None:
        params = {**_params(key), **_base(base), "fence": self._fence(key)}
        grew = len(line) + (len(header(base.token, 1)) + 1 if base.log_len == 0 else 0) if line else 0
        params |= {"grew": grew, "line": line, "queryable": NUL_ESCAPE not in line}
        async with self._conn(key, writing=True) as conn:
            row = await self._one(conn, self._sql.append if line else self._sql.at_base, params)
        assert row is not None
        refused(row, self._source(key), params["fence"])
        return grew if row[0] else None

    async def _delete(self, key: SessionKey) -> bool:
        params = {**_params(key), "fence": self._fence(key)}
        async with self._conn(key, writing=True) as conn:
            row = await self._one(conn, self._sql.delete, params)
        assert row is not None
        refused(row, self._source(key), params["fence"])
        return bool(row[0])

    async def _put_blob(self, key: SessionKey, name: str, data: bytes) -> None:
        params = {**_params(key), **blob_of(data, f"{self._source(key)} blob {name}"), "name": name}
        await self._fenced(key, self._sql.put_blob, params)

    async def _get_blob(self, key: SessionKey, name: str) -> bytes | None:
        async with self._conn(key) as conn:
            row = await self._one(conn, self._sql.blob, {**_params(key), "name": name})
        return None if row is None else stored(row)

    async def _drop_blobs(self, key: SessionKey, names: tuple[str, ...]) -> None:
        await self._fenced(key, self._sql.drop_blobs, {**_params(key), "drop": list(names)})

    async def _list_blobs(self, key: SessionKey) -> list[str]:
        async with self._conn(key) as conn:
            return [row[0] for row in await (await execute(conn, self._sql.blobs, _params(key))).fetchall()]

    async def _fenced(self, key: SessionKey, query: bytes, params: dict[str, Any]) -> None:
        """Run a write that answers only the fence's verdict; raise its refusal."""
        params["fence"] = self._fence(key)
        async with self._conn(key, writing=True) as conn:
            row = await self._one(conn, query, params)
        assert row is not None
        refused(row, self._source(key), params["fence"])

    async def _take_lease(self, key: SessionKey, ttl: float) -> LeaseGrant | LeaseBusy:
        async with self._conn(key, writing=True) as conn:
            return await take(conn, self._sql, _params(key), ttl)

    async def _renew_lease(self, key: SessionKey, token: int, ttl: float) -> LeaseGrant | None:
        async with self._conn(key, writing=True) as conn:
            return await renew(conn, self._sql, _params(key), token, ttl)

    async def _release_lease(self, key: SessionKey, token: int) -> None:
        async with self._conn(key, writing=True) as conn:
            await release(conn, self._sql, _params(key), token)

    async def _exists(self, key: SessionKey) -> bool:
        async with self._conn(key) as conn:
            return await self._one(conn, self._sql.exists, _params(key)) is not None

    async def _list(self, user_id: str) -> list[str]:
        async with self._conn(None) as conn:
            return [row[0] for row in await (await execute(conn, self._sql.list, {"user": user_id})).fetchall()]

    async def _list_some(self, user_id: str, limit: int) -> tuple[list[str], bool]:
        async with self._conn(None) as conn:
            cursor = await execute(conn, self._sql.list_some, {"user": user_id, "limit": limit + 1})
            ids = [row[0] for row in await cursor.fetchall()]
        return ids[:limit], len(ids) > limit

    async def _owners(self, session_id: str, limit: int) -> tuple[list[str], bool]:
        async with self._conn(None) as conn:
            cursor = await execute(conn, self._sql.owners, {"session": session_id, "limit": limit + 1})
            users = [row[0] for row in await cursor.fetchall()]
        return users[:limit], len(users) > limit

    async def _list_users(self) -> list[str]:
        async with self._conn(None) as conn:
            return [row[0] for row in await (await execute(conn, self._sql.users)).fetchall()]

    async def _close(self) -> None:
        self._closed = True
        if self._owned is not None:
            await self._owned.close()

    def _source(self, key: SessionKey) -> str:
        return f"postgresql://{self.address} {self.table} (user {key.user_id!r}, session {key.session_id!r})"

    # -- connections, schema, errors -----------------------------------------------

    @contextlib.asynccontextmanager
    async def _conn(self, key: SessionKey | None, *, writing: bool = False) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection with the schema ready, the operation bounded and psycopg's errors told as statekit's."""
        if self._closed:
            raise SessionError(f"PostgreSQL at {self._where(key)}: this session is closed")
        sent = False  # whether a write may have reached the server (then a lost answer leaves it unknown)
        try:
            async with asyncio.timeout(self.timeout + GRACE):
                async with self._source_of.connection(timeout=self.timeout) as conn:
                    if not self._schema_ready:
                        await self._ensure_schema(conn, create=self.create_schema)
                    sent = writing
                    yield conn
        except (psycopg.Error, TimeoutError, OSError) as err:
            raise translated(err, self._where(key), self.timeout, self._password, writing=sent) from None

    async def _ensure_schema(self, conn: psycopg.AsyncConnection[Any], *, create: bool) -> int:
        version = await ensure_schema(conn, self._sql, self.address, create=create)
        self._schema_ready = True
        return version

    @staticmethod
    async def _one(conn: psycopg.AsyncConnection[Any], query: bytes, params: dict[str, Any]) -> tuple[Any, ...] | None:
        cursor = await execute(conn, query, params)
        return await cursor.fetchone()

    def _where(self, key: SessionKey | None) -> str:
        return self.address if key is None else self._source(key)


def _params(key: SessionKey) -> dict[str, Any]:
    return {"user": key.user_id, "session": key.session_id}


def _base(base: DeltaBase) -> dict[str, Any]:
    return {"base_token": base.token, "base_bytes": base.log_len}
