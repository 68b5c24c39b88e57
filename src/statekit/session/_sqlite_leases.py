"""``SQLiteSession``'s leases: take, renew and release, each one ``BEGIN IMMEDIATE`` transaction, and the fence every write checks first.

A session's lease is one row of ``<table>_leases`` (token, expiry). Its expiry
is decided by the local clock (``time.time()``, read once the write lock is
held): every process sharing the file runs on this machine, so they share that
clock. The row stays after a release (expiry 0) and after the session is
deleted, so tokens only grow. These run in a worker thread on a connection of
the pool (:mod:`._sqlite_pool`), inside the transaction of the write they guard.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from statekit.session._fence import FENCE_OK, LeaseBusy, LeaseGrant, check_fence, fence_verdict
from statekit.session._sqlite_pool import commit
from statekit.session._sqlite_sql import Statements


def fence(connection: sqlite3.Connection, sql: Statements, where: dict[str, Any], carried: int | None, source: str) -> None:
    """Inside a write's ``BEGIN IMMEDIATE``, before it changes anything: refuse it unless the lease allows it.

    Args:
        connection: In the write's transaction (the write lock held).
        sql: The table's statements.
        where: The session's ``user`` and ``session``.
        carried: The token of the lease the writing object holds (``None``: none).
        source: How messages name the session.

    Raises:
        LeaseHeldError, LeaseLostError: What :func:`~._fence.check_fence` raises; the transaction is
            rolled back by the pool, nothing written.
    """
    token, expires_at = _stored(connection, sql, where)
    code = fence_verdict(token, expires_at, carried, time.time())
    if code != FENCE_OK:
        check_fence(code, source, carried, expires_at)


def take(connection: sqlite3.Connection, sql: Statements, where: dict[str, Any], ttl: float) -> LeaseGrant | LeaseBusy:
    """The lease for ``ttl`` seconds with the next token, unless a live one is stored."""
    connection.execute("BEGIN IMMEDIATE")
    token, expires_at = _stored(connection, sql, where)
    now = time.time()
    if token is not None and expires_at is not None and expires_at > now:
        commit(connection)
        return LeaseBusy(expires_at)
    granted = LeaseGrant((token or 0) + 1, now + ttl)
    connection.execute(sql.set_lease, {**where, "token": granted.token, "expires_at": granted.expires_at})
    commit(connection)
    return granted


def renew(connection: sqlite3.Connection, sql: Statements, where: dict[str, Any], token: int, ttl: float) -> LeaseGrant | None:
    """The lease of ``token`` extended to ``ttl`` seconds from now; ``None`` when it is not the live lease."""
    connection.execute("BEGIN IMMEDIATE")
    stored, expires_at = _stored(connection, sql, where)
    now = time.time()
    if stored != token or expires_at is None or expires_at <= now:
        commit(connection)
        return None
    renewed = LeaseGrant(token, now + ttl)
    connection.execute(sql.set_lease, {**where, "token": token, "expires_at": renewed.expires_at})
    commit(connection)
    return renewed


def release(connection: sqlite3.Connection, sql: Statements, where: dict[str, Any], token: int) -> None:
    """End the lease of ``token`` if it is still the stored one (one statement); the token stays."""
    connection.execute(sql.end_lease, {**where, "token": token})


def _stored(connection: sqlite3.Connection, sql: Statements, where: dict[str, Any]) -> tuple[int | None, float | None]:
    row = connection.execute(sql.lease, where).fetchone()
    return (None, None) if row is None else (int(row[0]), float(row[1]))
