"""``SQLiteSession``'s history: blobs of past revisions as rows of ``<table>_history``, kept, put and dropped behind the lease's fence.

A blob is what a read of the session returned then: its document (``seq`` 0)
and its deltas (``seq`` 1, 2, ...), the rows :data:`._sqlite_sql.READ` reads,
so it reads back through the same join. A save that keeps history copies the
stored rows into the table with one ``INSERT ... SELECT`` (:func:`keep`) in the
``BEGIN IMMEDIATE`` transaction of the write that replaces them, after its
fence; these run in a worker thread on a connection of the pool.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from statekit.session._archive import Archive
from statekit.session._sqlite_leases import fence
from statekit.session._sqlite_pool import commit
from statekit.session._sqlite_sql import Statements


def keep(connection: sqlite3.Connection, sql: Statements, where: dict[str, Any], archive: Archive) -> None:
    """Inside a write's transaction, after its fence and before it replaces the session: keep what is stored
    as the blob ``archive.keep_as`` (nothing when that is ``None`` or nothing is stored)."""
    if archive.keep_as is not None:
        connection.execute(sql.keep, {**where, "name": archive.keep_as})


def prune(connection: sqlite3.Connection, sql: Statements, where: dict[str, Any], names: tuple[str, ...]) -> None:
    """Inside a write's transaction: remove the blobs ``names`` (those missing are ignored)."""
    if names:
        connection.executemany(sql.drop_blob, [{**where, "name": name} for name in names])


def put_blob(
    connection: sqlite3.Connection,
    sql: Statements,
    where: dict[str, Any],
    rows: list[tuple[int, bytes, str | None]],
    fenced: tuple[int | None, str],
) -> None:
    """Store a blob's ``rows`` (``seq``, data, token; each with the blob's ``name`` in ``where``) in one
    transaction, unless the blob is there (it holds the same bytes). ``fenced``: the lease token the writer
    carries and how messages name the session (:func:`~._sqlite_leases.fence`)."""
    connection.execute("BEGIN IMMEDIATE")
    fence(connection, sql, where, *fenced)
    connection.executemany(sql.put_blob, [{**where, "seq": seq, "data": data, "token": token} for seq, data, token in rows])
    commit(connection)


def drop_blobs(
    connection: sqlite3.Connection, sql: Statements, where: dict[str, Any], names: tuple[str, ...], fenced: tuple[int | None, str]
) -> None:
    """Remove the blobs ``names`` in one transaction, behind the fence."""
    connection.execute("BEGIN IMMEDIATE")
    fence(connection, sql, where, *fenced)
    prune(connection, sql, where, names)
    commit(connection)
