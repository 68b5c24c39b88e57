"""``SQLiteSession``: sessions in one SQLite file, for many processes on one machine (standard library ``sqlite3``).

One row per (user_id, session_id) holds the document as written (JSON text, so
``json_extract`` reads it); items appended to ``append_only`` lists since then
are rows of a second table, one per save, inserted in the same transaction that
checks and bumps the session's row, so a turn costs what it adds. Every write
compares and sets in one statement inside ``BEGIN IMMEDIATE``, after the
fence of the session's lease (see :mod:`._sqlite_sql`, :mod:`._sqlite_leases`); calls run in worker threads on a small pool of
connections, each bounded by ``timeout`` (see :mod:`._sqlite_pool`). The
schema is made on first use and carries a version; docs/backends.md shows it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from statekit.state.flags import check_flag
from statekit.values.secrets import SecretKeys
from statekit.codecs import JSON_COMPACT, Codec
from statekit.errors import SessionError
from statekit.session._appends import DeltaBase
from statekit.session._archive import Archive, checked_keep
from statekit.session._base import SessionBase
from statekit.session._companion import joined
from statekit.session._delta_rows import delta_rows
from statekit.session._fence import LeaseBusy, LeaseGrant
from statekit.session._ids import SessionKey
from statekit.session.document import doc_token, header
from statekit.session._revisions import MISSING_REVISION, Expected, revision_of
from statekit.session._sqlite_blobs import drop_blobs, keep, prune, put_blob
from statekit.session._sqlite_leases import fence, release, renew, take
from statekit.session._sqlite_pool import Connections, check_library, commit, rollback
from statekit.session._sqlite_sql import Statements, check_table

__all__ = ["SQLiteSession"]

R = TypeVar("R")

TIMEOUT = 10.0
"""Seconds one call may take in all (waiting for another writer's lock included) unless ``timeout`` is given;
as long as a file session waits for its lock."""


class SQLiteSession(SessionBase):
    """Sessions in a SQLite database file, one row per (user_id, session_id).

    Many processes and threads may use one file at once: every save is a
    compare-and-set in one transaction, and the file is in WAL mode (readers
    never wait). Blocking calls run in worker threads, off the event loop.

    Args:
        path: The database file (made, with its folder, on first use).
        table: The sessions table (its deltas go in ``{table}_deltas``); several
            tables may share a file.
        secret_key: Encrypt ``state_field(secret=True)`` values with this key, or
            with the first of a list of keys, each of which decrypts (see
            :meth:`SessionBase.use_secret_key`).
        omit_secrets: Without a key, leave secret fields out of what is saved;
            ``False`` (the default): such a save is refused with ``SecretError``.
        timeout: Seconds one call may take in all (default :data:`TIMEOUT`,
            10 s), waiting for another writer's lock included; then it raises
            ``BackendUnavailableError`` and nothing was written.
        keep_history: How many past revisions of each session a save keeps besides the
            head (``None``: all; ``0``, the default: none, stored exactly as without
            history), as rows of ``{table}_history`` (see docs/history.md).

    Raises:
        SessionError: A path that cannot name a database file (``:memory:``, empty,
            a folder), a table name that is not a plain SQL name, a ``timeout``
            that is not a positive number of seconds, an SQLite library older than 3.35,
            a ``keep_history`` that is not ``None`` or an integer >= 0.
    """

    codec: ClassVar[Codec] = JSON_COMPACT
    offload_codec: ClassVar[bool] = True
    writes_in_threads: ClassVar[bool] = True
    supports_appends: ClassVar[bool] = True
    supports_leases: ClassVar[bool] = True
    supports_history: ClassVar[bool] = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "statekit_sessions",
        secret_key: SecretKeys | None = None,
        omit_secrets: bool = False,
        timeout: float = TIMEOUT,
        keep_history: int | None = 0,
    ) -> None:
        check_library()
        self.path = _check_path(path)
        self.table = check_table(table)
        self.timeout = _check_timeout(timeout)
        self.use_secret_key(secret_key)
        self.omit_secrets = check_flag(omit_secrets, "omit_secrets", SessionError)
        self.keep_history = checked_keep(keep_history, type(self), supports=self.supports_history)
        self._sql = Statements(self.table)
        self._connections = Connections(self.path, self._sql, self.timeout)

    def __repr__(self) -> str:
        return f"SQLiteSession(path={str(self.path)!r}, table={self.table!r})"

    def _source(self, key: SessionKey) -> str:
        return f"{self.path} table {self.table} session {key.session_id!r} of user {key.user_id!r}"

    async def _call(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` on a connection in a worker thread, within ``timeout`` from now."""
        deadline = time.monotonic() + self.timeout
        return await asyncio.to_thread(self._connections.run, work, deadline)

    # -- reads ---------------------------------------------------------------------

    async def _read(self, key: SessionKey) -> bytes | None:
        sql, where = self._sql.read, _where(key)
        return await self._call(lambda connection: _joined(connection.execute(sql, where).fetchall()))

    async def _exists(self, key: SessionKey) -> bool:
        sql = self._sql.exists
        return await self._call(lambda connection: connection.execute(sql, _where(key)).fetchone() is not None)

    async def _list(self, user_id: str) -> list[str]:
        sql = self._sql.list
        return await self._call(lambda connection: _texts(connection.execute(sql, {"user": user_id})))

    async def _list_some(self, user_id: str, limit: int) -> tuple[list[str], bool]:
        sql = self._sql.list_some
        ids = await self._call(lambda connection: _texts(connection.execute(sql, {"user": user_id, "limit": limit + 1})))
        return ids[:limit], len(ids) > limit

    async def _owners(self, session_id: str, limit: int) -> tuple[list[str], bool]:
        sql = self._sql.owners
        users = await self._call(lambda c: _texts(c.execute(sql, {"session": session_id, "limit": limit + 1})))
        return users[:limit], len(users) > limit

    async def _list_users(self) -> list[str]:
        sql = self._sql.users
        return await self._call(lambda connection: _texts(connection.execute(sql)))

    # -- leases: a row of <table>_leases each, the local clock deciding expiry --------------

    async def _take_lease(self, key: SessionKey, ttl: float) -> LeaseGrant | LeaseBusy:
        sql = self._sql
        return await self._call(lambda connection: take(connection, sql, _where(key), ttl))

    async def _renew_lease(self, key: SessionKey, token: int, ttl: float) -> LeaseGrant | None:
        sql = self._sql
        return await self._call(lambda connection: renew(connection, sql, _where(key), token, ttl))

    async def _release_lease(self, key: SessionKey, token: int) -> None:
        sql = self._sql
        await self._call(lambda connection: release(connection, sql, _where(key), token))

    # -- writes: every one through _put, _append or _delete, the fence first -------------------

    async def _write(self, key: SessionKey, data: bytes) -> None:
        await self._put(key, data, "always", dict)

    async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
        return await self._compare_and_set(key, data, expected, None)

    async def _write_keeping(self, key: SessionKey, data: bytes, expected: Expected, archive: Archive) -> bool:
        return await self._compare_and_set(key, data, expected, archive)

    async def _compare_and_set(self, key: SessionKey, data: bytes, expected: Expected, archive: Archive | None) -> bool:
        """``_write_if``, and with an ``archive`` ``_write_keeping``: one transaction either way."""
        base, raw = expected.base, expected.raw
        if expected.only_base and base is not None:
            return await self._put(key, data, "base", lambda: {"base_token": base.token, "base_count": base.count}, archive)
        log = getattr(raw, "log", b"")
        if log:  # what was read: a document and its deltas, named by its token and their count
            count = base.count if base is not None else log.count(b"\n") - 2  # the log's first newline, the header's
            token = getattr(raw, "token", "")
            return await self._put(key, data, "base", lambda: {"base_token": token, "base_count": count}, archive)
        if raw is None and expected.revision == MISSING_REVISION:
            return await self._put(key, data, "missing", dict, archive)
        return await self._put(key, data, "revision", lambda: {"expected": expected.revision}, archive)

    async def _put(
        self, key: SessionKey, data: bytes, kind: str, condition: Callable[[], dict[str, Any]], archive: Archive | None = None
    ) -> bool:
        """Write a whole document if ``condition()`` holds (``kind``: see ``WRITE_KINDS``), dropping the old deltas;
        with an ``archive``, first dropping the pruned blobs and keeping the stored session as its blob (the copy
        reuses the pages the drop freed), all in the one transaction (rolled back when the condition fails).
        The hashes (the document's revision, an expected one) are computed in the worker thread, off the event loop."""
        sql, carried, source = self._sql, self._fence(key), self._source(key)

        def put(connection: sqlite3.Connection) -> bool:
            values = {**_where(key), **condition(), "document": data, "revision": revision_of(data), "token": doc_token(data)}
            connection.execute("BEGIN IMMEDIATE")
            fence(connection, sql, values, carried, source)
            if archive is not None:  # the pruned first: the copy then fills the pages they free
                prune(connection, sql, values, archive.drop)
                keep(connection, sql, values, archive)
            written = connection.execute(sql.writes[kind], values).rowcount == 1
            if not written and kind == "revision":
                written = _over_deltas(connection, sql, values)
            if not written and archive is not None:
                rollback(connection)
                return False
            if written:
                connection.execute(sql.drop_deltas, values)
            commit(connection)
            return written

        return await self._call(put)

    async def _append(self, key: SessionKey, line: bytes, base: DeltaBase) -> int | None:
        sql, carried, source = self._sql, self._fence(key), self._source(key)
        values = {**_where(key), "base_token": base.token, "base_count": base.count, "line": line}

        def append(connection: sqlite3.Connection) -> bool:
            connection.execute("BEGIN" if not line else "BEGIN IMMEDIATE")  # no line: only the checks, nothing written
            fence(connection, sql, values, carried, source)
            if not line:
                found = connection.execute(sql.at_base, values).fetchone() is not None
                commit(connection)
                return found
            done = connection.execute(sql.append, values).rowcount == 1
            commit(connection)
            return done

        if not await self._call(append):
            return None
        return len(line) + (len(b"\n" + header(base.token, 1)) if base.log_len == 0 and line else 0)

    async def _delete(self, key: SessionKey) -> bool:
        sql, carried, source = self._sql, self._fence(key), self._source(key)

        def delete(connection: sqlite3.Connection) -> bool:
            connection.execute("BEGIN IMMEDIATE")
            fence(connection, sql, _where(key), carried, source)  # the lease's row stays: tokens only grow
            found = connection.execute(sql.delete, _where(key)).rowcount == 1
            connection.execute(sql.drop_deltas, _where(key))
            connection.execute(sql.drop_history, _where(key))  # its kept revisions: erasure means erasure
            commit(connection)
            return found

        return await self._call(delete)

    # -- history: blobs of past revisions, rows of <table>_history (see _sqlite_blobs) ---------

    async def _put_blob(self, key: SessionKey, name: str, data: bytes) -> None:
        sql, fenced = self._sql, (self._fence(key), self._source(key))
        document, token, lines = delta_rows(data, f"{self._source(key)} blob {name}")
        rows = [(0, document, token), *((seq, line, None) for seq, line in enumerate(lines, 1))]
        await self._call(lambda connection: put_blob(connection, sql, {**_where(key), "name": name}, rows, fenced))

    async def _get_blob(self, key: SessionKey, name: str) -> bytes | None:
        sql, where = self._sql.blob, {**_where(key), "name": name}
        return await self._call(lambda connection: _joined(connection.execute(sql, where).fetchall()))

    async def _drop_blobs(self, key: SessionKey, names: tuple[str, ...]) -> None:
        sql, fenced = self._sql, (self._fence(key), self._source(key))
        await self._call(lambda connection: drop_blobs(connection, sql, _where(key), names, fenced))

    async def _list_blobs(self, key: SessionKey) -> list[str]:
        sql = self._sql.blobs
        return await self._call(lambda connection: _texts(connection.execute(sql, _where(key))))

    async def _close(self) -> None:
        await asyncio.to_thread(self._connections.close)


def _over_deltas(connection: sqlite3.Connection, sql: Statements, values: dict[str, Any]) -> bool:
    """A write expecting a revision, over a document with deltas (the session's revision then comes from the
    document and the deltas as a read joins them, see ``revision_of``: no column holds it). Under the write lock this
    transaction holds: read them, compare, and write over them as a base. Whether it wrote."""
    rows = connection.execute(sql.read, values).fetchall()
    stored = _joined(rows)
    if stored is None or len(rows) < 2 or revision_of(stored) != values["expected"]:
        return False
    over = {**values, "base_token": getattr(stored, "token", ""), "base_count": len(rows) - 1}
    return connection.execute(sql.writes["base"], over).rowcount == 1


def _joined(rows: list[tuple[int, bytes, bytes | None]]) -> bytes | None:
    """What a read returns, from the rows of ``READ``: the document (``None``: none), followed by its deltas
    (with their header) when it has any."""
    rows.sort(key=lambda row: row[0])  # the document first, the deltas by seq (already so: a check, in linear time)
    if not rows or rows[0][0] != 0:
        return None
    document, token = bytes(rows[0][1]), rows[0][2]
    if token is None or len(rows) == 1:
        return document
    name = token.decode()
    return joined(document, b"\n" + header(name, len(rows) - 1) + b"".join(line for _, line, _ in rows[1:]), name)


def _where(key: SessionKey) -> dict[str, Any]:
    return {"user": key.user_id, "session": key.session_id}


def _texts(cursor: sqlite3.Cursor) -> list[str]:
    """The first column of every row, as text (the connections hand back TEXT as bytes)."""
    return [value.decode() for (value,) in cursor.fetchall()]


def _check_path(path: object) -> Path:
    if isinstance(path, str | os.PathLike):
        text = os.fspath(path)
        if isinstance(text, str) and text and text != ":memory:" and not text.startswith("file:") and "\x00" not in text:
            found = Path(text)
            if found.is_dir():
                raise SessionError(f"SQLiteSession path {text!r} is a folder: give the database file (inside it, say)")
            return found
    raise SessionError(
        f"SQLiteSession needs the path of a database file (every process opens the same one), got {path!r}; "
        "':memory:' and file: URIs are not sessions others can see"
    )


def _check_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SessionError(f"timeout must be a positive number of seconds, got {value!r}")
    return float(value)
