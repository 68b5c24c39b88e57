"""``PostgresSession``'s leases: take, renew and release, one statement each on the server's clock, and the fence's answer read.

A session's lease is one row of ``<table>_leases`` (token, expiry as
``timestamptz``); ``clock_timestamp()`` on the server decides when it ends, so
the clients' clocks do not matter. The row stays after a release and after a
delete of the session, so tokens only grow. Every write statement checks it
first (``_pg_sql.FENCE``) and answers the verdict, which :func:`refused` turns
into the refusal.
"""

from __future__ import annotations

from typing import Any

import psycopg

from statekit.session._fence import FENCE_OK, LeaseBusy, LeaseGrant, check_fence
from statekit.session._pg_connect import execute
from statekit.session._pg_sql import Statements


async def take(
    conn: psycopg.AsyncConnection[Any], sql: Statements, params: dict[str, Any], ttl: float
) -> LeaseGrant | LeaseBusy:
    """The lease for ``ttl`` seconds with the next token, unless a live one is stored (then its expiry)."""
    row = await (await execute(conn, sql.take_lease, {**params, "ttl": ttl})).fetchone()
    if row is not None:
        return LeaseGrant(int(row[0]), float(row[1]))
    busy = await (await execute(conn, sql.lease_expiry, params)).fetchone()
    # released since the take looked (rare): no expiry to wait for, so the caller asks again at once
    return LeaseBusy(float(busy[0]) if busy is not None and busy[0] is not None else 0.0)


async def renew(
    conn: psycopg.AsyncConnection[Any], sql: Statements, params: dict[str, Any], token: int, ttl: float
) -> LeaseGrant | None:
    """The lease of ``token`` extended to ``ttl`` seconds from now; ``None`` when it is not the live lease."""
    row = await (await execute(conn, sql.renew_lease, {**params, "token": token, "ttl": ttl})).fetchone()
    return None if row is None else LeaseGrant(token, float(row[0]))


async def release(conn: psycopg.AsyncConnection[Any], sql: Statements, params: dict[str, Any], token: int) -> None:
    """End the lease of ``token`` if it is still the stored one; the token stays."""
    await execute(conn, sql.release_lease, {**params, "token": token})


def refused(code: object, held_until: object, source: str, carried: int | None) -> None:
    """Raise what the fence's verdict (the last two columns of a write's answer) stands for; nothing when it is 0.

    Raises:
        LeaseHeldError, LeaseLostError: The statement changed nothing.
    """
    if code != FENCE_OK:
        check_fence(int(code) if isinstance(code, int) else -1, source, carried, _seconds(held_until))


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
