"""``PostgresSession``'s leases: take, renew and release, one statement each on the server's clock, and the fence's answer read.

A session's lease is one row of ``<table>_leases`` (token, expiry as
``timestamptz``); ``clock_timestamp()`` on the server decides when it ends, so
the clients' clocks do not matter. The row stays after a release and after a
delete of the session, so tokens only grow. Every write statement checks it
first (``_pg_sql.FENCE``) and answers the row it found with the server's clock,
from which :func:`refused` tells the refusal by the one rule (``fence_verdict``).
"""

from __future__ import annotations

from typing import Any

import psycopg

from statekit.session._fence import LeaseBusy, LeaseGrant, check_fence, fence_verdict
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


def refused(found: tuple[Any, ...], source: str, carried: int | None) -> None:
    """Raise the refusal of a fenced write from what it answered last (the lease's token, its expiry and the
    server's clock: ``_pg_sql._VERDICT``); nothing when the fence let it write.

    Raises:
        LeaseHeldError, LeaseLostError: The statement changed nothing (its condition is the same rule).
    """
    token, ends, now = found[-3:]
    if token is None and carried is None:  # never leased, carrying nothing: the common case
        return
    held_until = None if ends is None else float(ends)
    check_fence(fence_verdict(token, held_until, carried, 0.0 if now is None else float(now)), source, carried, held_until)
