"""The lease record of a file session: a hidden JSON file beside it, read and written under the session's lock.

Beside ``chat-1.json``, ``.chat-1.json.lease`` holds ``{"token": 3, "expires_at":
1790000000.25}``: the fencing token last handed out for the session and when
its lease ends (seconds since the epoch; ``0`` once released). Taking,
renewing and releasing a lease, and the fence every write checks, each run
under the session's ``flock`` (:mod:`._filelock`), so each is one step between
threads and processes; the record is replaced atomically and durably
(:mod:`._atomic`). It stays after a release and after the session is deleted,
so tokens only grow; listings and the leftovers sweep never take it for a
session (its name starts with a dot and does not end in the codec's suffix).

Expiry is decided by the local clock (``time.time()``): machines sharing a
folder must keep their clocks in step (docs/backends.md).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from statekit.errors import SessionError
from statekit.session._atomic import atomic_write
from statekit.session._file_names import lease_path
from statekit.session._fence import LeaseBusy, LeaseGrant, check_fence, fence_verdict
from statekit.session._filelock import session_lock
from statekit.session._safe_files import read_regular_stat

_RECORD_LIMIT = 4096
"""Bytes read of a lease record at most (one statekit writes is under 100)."""


def read_lease(path: Path) -> tuple[int, float] | None:
    """The stored lease of the session file ``path``: (token, expires_at), or ``None`` when it was never leased.

    Call it under the session's lock.

    Raises:
        SessionError: The record is a link, a folder or another odd file, or not a lease record statekit wrote.
        OSError: It cannot be read.
    """
    record = lease_path(path)
    got = read_regular_stat(record, _RECORD_LIMIT + 1)
    if got is None:
        return None
    return _parsed(got[0], record, path)


def _parsed(raw: bytes, record: Path, path: Path) -> tuple[int, float]:
    try:
        data: object = json.loads(raw) if len(raw) <= _RECORD_LIMIT else None
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep
        data = None
    if isinstance(data, dict) and set(data) == {"token", "expires_at"}:
        token, expires_at = data["token"], data["expires_at"]
        if type(token) is int and token >= 1 and type(expires_at) in (int, float) and 0 <= expires_at < math.inf:
            return token, float(expires_at)
    raise SessionError(
        f'{record} is not a lease record statekit wrote ({{"token": <a whole number of 1 or more>, "expires_at": '
        f"<seconds since the epoch>}}), so the lease of {path} cannot be checked and nothing was changed. "
        "Remove it only when no process holds or waits for a lease on that session (the next lease then starts "
        "again at token 1)"
    )


def fence(path: Path, carried: int | None) -> None:
    """Under the session's lock, before a write: refuse it unless the stored lease allows it.

    Args:
        path: The session file.
        carried: The token of the lease the writing object holds (``None``: none).

    Raises:
        LeaseHeldError: Another object holds the live lease.
        LeaseLostError: The writer's lease expired or was taken over.
        SessionError: A bad lease record (:func:`read_lease`).
    """
    stored = read_lease(path)
    token, expires_at = (None, None) if stored is None else stored
    verdict = fence_verdict(token, expires_at, carried, time.time())
    check_fence(verdict, str(path), carried, expires_at)


def take_lease(path: Path, ttl: float, timeout: float) -> LeaseGrant | LeaseBusy:
    """A new lease (the next token) for ``ttl`` seconds, unless a live one exists; one step under the session's lock.

    Args:
        path: The session file (it need not exist; its folder is created).
        ttl: Seconds the lease lasts.
        timeout: Seconds to wait for the session's lock (:func:`._filelock.session_lock`).
    """
    with session_lock(path, timeout):
        token, expires_at = read_lease(path) or (0, 0.0)
        now = time.time()
        if expires_at > now:
            return LeaseBusy(expires_at)
        return _written(path, token + 1, now + ttl)


def renew_lease(path: Path, token: int, ttl: float, timeout: float) -> LeaseGrant | None:
    """The lease of ``token`` extended to ``ttl`` seconds from now, under the session's lock (``None``: not live)."""
    with session_lock(path, timeout):
        stored = read_lease(path)
        now = time.time()
        if stored is None or stored[0] != token or stored[1] <= now:
            return None
        return _written(path, token, now + ttl)


def release_lease(path: Path, token: int, timeout: float) -> None:
    """End the lease of ``token`` if it is the live one, under the session's lock (the token stays recorded)."""
    with session_lock(path, timeout):
        stored = read_lease(path)
        if stored is not None and stored[0] == token and stored[1] > time.time():
            _written(path, token, 0.0)


def _written(path: Path, token: int, expires_at: float) -> LeaseGrant:
    data = json.dumps({"token": token, "expires_at": expires_at}).encode() + b"\n"
    atomic_write(lease_path(path), data, locked=True)
    return LeaseGrant(token, expires_at)
