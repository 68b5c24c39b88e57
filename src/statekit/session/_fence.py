"""Leases, as a store keeps them: what a take returns, the fence every write checks, and the refusals of both.

One rule, used by every backend (a Lua script or an SQL statement computes the
same verdict and returns its code): a session's stored lease is a fencing
token and an expiry. A write that carries no token (the writing object holds
no lease on the session) is accepted unless a live lease exists; a write that
carries a token is accepted only while that token's lease is the live one.
Anything else changes nothing and raises.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Final, NoReturn

import attrs

from statekit.errors import LeaseHeldError, LeaseLostError, SessionError

FENCE_OK: Final = 0
"""The write may go ahead."""

FENCE_HELD: Final = 1
"""A live lease exists and the write carries no token, or another token: :class:`LeaseHeldError`."""

FENCE_LOST: Final = 2
"""The write carries a token whose lease expired or was taken over: :class:`LeaseLostError`."""


@attrs.frozen
class LeaseGrant:
    """A lease the store gave (or renewed): its fencing token and when it ends.

    Attributes:
        token: Strictly greater than every token given before for this session.
        expires_at: Seconds since the epoch (UTC) at which it ends unless renewed.
    """

    token: int
    expires_at: float


@attrs.frozen
class LeaseBusy:
    """A lease refused: another holder's lease is live until ``expires_at`` (seconds since the epoch, UTC)."""

    expires_at: float


def fence_verdict(stored_token: int | None, stored_expires_at: float | None, carried: int | None, now: float) -> int:
    """Whether a write may go ahead, from the stored lease (or none) and the token the write carries.

    Args:
        stored_token: The token of the stored lease record (``None``: never leased or released).
        stored_expires_at: When that lease ends (seconds since the epoch, store's clock).
        carried: The token of the lease the writing object holds (``None``: it holds none).
        now: The store's clock, in the same unit.

    Returns:
        :data:`FENCE_OK`, :data:`FENCE_HELD` or :data:`FENCE_LOST`.
    """
    live = stored_token is not None and stored_expires_at is not None and stored_expires_at > now
    if carried is None:
        return FENCE_HELD if live else FENCE_OK
    return FENCE_OK if live and stored_token == carried else FENCE_LOST


def check_fence(code: int, source: str, carried: int | None, held_until: float | None = None) -> None:
    """Raise the refusal a fence verdict stands for (nothing for :data:`FENCE_OK`).

    Args:
        code: What :func:`fence_verdict` (or a store's script) decided.
        source: Where the session is stored, for the message.
        carried: The token the refused write carried.
        held_until: When the live lease ends, when known (seconds since the epoch).

    Raises:
        LeaseHeldError: Another object holds the live lease; nothing was written.
        LeaseLostError: This object's lease expired or was taken over; nothing was written.
    """
    if code == FENCE_OK:
        return
    if code == FENCE_HELD:
        refuse_held(source, held_until, "write")
    if code == FENCE_LOST and carried is not None:
        refuse_lost(source, carried, "nothing was written")
    raise SessionError(f"{source}: the store answered an unknown lease verdict {code!r}")


def refuse_held(source: str, held_until: float | None, what: str) -> NoReturn:
    """Raise :class:`LeaseHeldError` for a write (``what="write"``) or a lease asked for (``what="lease"``)."""
    until = None if held_until is None else as_datetime(held_until)
    when = "" if until is None else f" until {until.isoformat(timespec='milliseconds')}"
    if what == "write":
        message = (
            f"{source} is leased by another session object{when}; nothing was written. "
            "Take the lease (session.lease(...)) before writing a session that others lease, or wait until it is released"
        )
    else:
        message = f"{source} is leased by another session object{when}; pass wait= to wait for it"
    raise LeaseHeldError(message, source=source, held_until=until)


def refuse_lost(source: str, token: int, outcome: str) -> NoReturn:
    """Raise :class:`LeaseLostError`: the lease of ``token`` is no longer this object's."""
    raise LeaseLostError(
        f"the lease on {source} that this session object held (token {token}) expired or was taken over; "
        f"{outcome}. Another worker may own the session now: take the lease again and load before saving",
        source=source,
        token=token,
    )


def as_datetime(seconds: float) -> datetime:
    """Seconds since the epoch as an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, UTC)


def checked_seconds(value: object, name: str, *, positive: bool) -> float:
    """A ``ttl=`` or ``wait=`` argument: a finite number of seconds (``> 0`` for a ttl, ``>= 0`` for a wait).

    Raises:
        SessionError: Not a number (``True`` included), not finite, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SessionError(f"{name} must be a number of seconds, not {value!r}")
    if value < 0 or (positive and value == 0):
        raise SessionError(f"{name} must be {'more than' if positive else 'at least'} 0 seconds, not {value!r}")
    return float(value)
