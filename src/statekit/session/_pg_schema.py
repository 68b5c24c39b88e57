"""``PostgresSession``'s schema on the server: found at this statekit's version, or created, or upgraded in place, or refused saying why."""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg

from statekit.errors import SessionError
from statekit.session._pg_connect import execute
from statekit.session._pg_sql import ADDED, LOCK, SCHEMA_VERSION, Statements


async def ensure_schema(conn: psycopg.AsyncConnection[Any], sql: Statements, address: str, *, create: bool) -> int:
    """The tables' schema version, after creating them, or upgrading an older version in place (the DDL
    again: every table ``IF NOT EXISTS``, the version raised), under an advisory lock, when ``create``.

    Raises:
        SessionError: No tables (without ``create``), tables of an older version (without ``create``), or of a
            newer one (never touched); nothing was changed.
    """
    version = await _version(conn, sql)
    if (version is None or version < SCHEMA_VERSION) and create:
        async with conn.transaction():
            await execute(conn, LOCK)
            await execute(conn, sql.ddl, binary=False)
            with contextlib.suppress(psycopg.errors.FeatureNotSupported, psycopg.errors.SyntaxError):
                async with conn.transaction():  # a savepoint: a server without lz4 keeps pglz
                    await execute(conn, sql.fast_compression, binary=False)
        version = await _version(conn, sql)
    if version is None:
        raise SessionError(
            f"PostgreSQL at {address} has no table {sql.table!r}: create it with `statekit init-db URL` "
            "(or let the first use create it: create_schema=True)"
        )
    if version < SCHEMA_VERSION:
        added = " and ".join(ADDED[later] for later in range(version + 1, SCHEMA_VERSION + 1))
        raise SessionError(
            f"the table {sql.table!r} at {address} has schema version {version}, older than this "
            f"statekit's {SCHEMA_VERSION} (which adds {added}): upgrade it in place with "
            "`statekit init-db URL` (or create_schema=True); nothing was changed"
        )
    if version > SCHEMA_VERSION:
        raise SessionError(
            f"the table {sql.table!r} at {address} has schema version {version}, newer than this "
            f"statekit's {SCHEMA_VERSION}: upgrade statekit"
        )
    return version


async def _version(conn: psycopg.AsyncConnection[Any], sql: Statements) -> int | None:
    try:
        async with conn.transaction():
            row = await (await execute(conn, sql.version, {"name": sql.table})).fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    return None if row is None else int(row[0])
