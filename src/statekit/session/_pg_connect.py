"""``PostgresSession``'s connections and errors: a small pool of psycopg async connections, psycopg's
exceptions told as statekit's, connection strings shown without their password, the connection arguments checked."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import AsyncIterator
from typing import Any, Protocol

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from statekit.errors import BackendAuthError, BackendUnavailableError, SessionError, StatekitError, WriteOutcomeUnknownError
from statekit.session._url_passwords import user_info

AUTH_STATES = frozenset({"28000", "28P01"})
"""SQLSTATEs of refused credentials (invalid authorization specification, invalid password)."""

UNKNOWN = "; the write may or may not have been stored: load the session to see"

_AUTH_TEXT = re.compile(r"password authentication failed|no password supplied|authentication failed|pg_hba\.conf", re.I)
_NO_DATABASE = re.compile(r'database "[^"]*" does not exist')
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")


class ConnectionSource(Protocol):
    """What a user's pool must offer (``psycopg_pool.AsyncConnectionPool`` does)."""

    def connection(self, timeout: float | None = None) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """A connection, given back when the block ends."""
        ...


class Connections:
    """Up to ``size`` autocommit connections to ``conninfo``, kept open between operations.

    Connections are made directly (not in a background task), so that the
    reason one cannot be made (a wrong password, no such database) reaches the
    caller. A connection of another event loop is closed, not reused.
    """

    def __init__(self, conninfo: str, size: int, settings: dict[str, Any]) -> None:
        self.conninfo = conninfo
        self.settings = settings
        self._size = size
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop or self._slots is None:
            self._drop_idle()
            self._loop, self._slots = loop, asyncio.Semaphore(self._size)
        async with self._slots:
            conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True, **self.settings)
            reusable = False
            try:
                yield conn
                reusable = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
            finally:
                if reusable:
                    self._idle.append(conn)
                else:
                    with contextlib.suppress(Exception):
                        await conn.close()

    def _drop_idle(self) -> None:
        """Close the idle connections without awaiting (they may belong to a loop that is gone)."""
        for conn in self._idle:
            with contextlib.suppress(Exception):
                conn.pgconn.finish()
        self._idle.clear()

    async def close(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                await conn.close()


ABANDON_TRIES = 200
"""Times (5 ms apart) a statement cut off by the deadline is cancelled again, until psycopg closes its
connection: cancelled once, psycopg waits up to 10 s for the server to cancel the query; a second
cancel makes it close the connection at once (the server then rolls back what it had not committed)."""


async def execute(
    conn: psycopg.AsyncConnection[Any], query: bytes, params: dict[str, Any] | None = None, *, binary: bool = True
) -> psycopg.AsyncCursor[Any]:
    """``conn.execute(query, params)`` (``binary`` results; ``False`` for a script of several statements),
    given up at once when the caller is cancelled (``asyncio.timeout``): the connection is closed, not waited on."""
    inner = asyncio.ensure_future(conn.execute(query, params, binary=binary))
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:
        for _ in range(ABANDON_TRIES):
            if inner.done():
                break
            inner.cancel()
            await asyncio.sleep(0.005)
        inner.add_done_callback(_retrieve)
        raise


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Take an abandoned statement's outcome, so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


def address_of(conninfo: str) -> str:
    """``host:port/dbname`` of a connection string (never its password)."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "postgresql://?"
    return f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}/{parts.get('dbname') or parts.get('user') or ''}"


def password_of(conninfo: str) -> str | None:
    """The password a connection string holds (to keep it out of messages)."""
    try:
        found = conninfo_to_dict(conninfo).get("password")
    except psycopg.Error:
        found = None
    return None if found is None else str(found)


def redacted(text: str, password: str | None) -> str:
    """``text`` with the password (plain and URL-quoted) replaced by ``***``."""
    if not password:
        return text
    import urllib.parse  # noqa: PLC0415 - only when there is a password

    forms = {password, urllib.parse.unquote(password), urllib.parse.quote(password, safe=""), urllib.parse.quote_plus(password)}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "***")
    return text


def translated(err: BaseException, where: str, timeout: float, password: str | None, *, writing: bool) -> StatekitError:
    """The statekit error a psycopg error (or a timeout) stands for; its message never shows the password.

    Args:
        err: What psycopg (or ``asyncio.timeout``) raised.
        where: The server and table, for the message.
        timeout: The operation's bound, in seconds.
        password: To keep out of the message.
        writing: Whether a write was under way on the server (a write cut off by the client's own
            deadline, or whose connection broke, may have landed: ``WriteOutcomeUnknownError``).
    """
    text = redacted(str(err).strip(), password)
    state = getattr(err, "sqlstate", None)
    if isinstance(err, TimeoutError):
        message = f"PostgreSQL at {where} is unavailable: no answer within {timeout:g} s"
        if writing:
            return WriteOutcomeUnknownError(message + UNKNOWN)
        return BackendUnavailableError(message)
    if isinstance(err, pg_errors.QueryCanceled):
        return BackendUnavailableError(
            f"PostgreSQL at {where} is unavailable: the statement did not finish within {timeout:g} s "
            f"(statement_timeout; a lock held by another transaction?); nothing was written: {text}"
        )
    if state in AUTH_STATES or (isinstance(err, psycopg.OperationalError) and state is None and _AUTH_TEXT.search(text)):
        return BackendAuthError(f"PostgreSQL at {where} refused our credentials: {text}")
    if isinstance(err, pg_errors.InsufficientPrivilege):
        return BackendAuthError(f"PostgreSQL at {where} refused: {text} (grant the user access to the tables)")
    if state == "3D000" or _NO_DATABASE.search(text):
        return BackendUnavailableError(f"PostgreSQL at {where} is unavailable: {text} (create it, or fix the URL)")
    if isinstance(err, (psycopg.OperationalError, psycopg.InterfaceError, OSError)):
        message = f"PostgreSQL at {where} is unavailable: {text}"
        if writing and state is None:  # the connection broke, not the statement: it may have committed
            return WriteOutcomeUnknownError(message + UNKNOWN)
        return BackendUnavailableError(message)
    return SessionError(f"PostgreSQL at {where} refused: {text}")


def conninfo_options(conninfo: str) -> str:
    """The ``options`` a connection string gives the server (kept beside statekit's ``statement_timeout``)."""
    try:
        return str(psycopg.conninfo.conninfo_to_dict(conninfo).get("options") or "")
    except psycopg.Error:
        return ""


def scheme(url: object) -> str:
    """The scheme of a URL (``postgresql``), or ``""``."""
    return url.partition("://")[0] if isinstance(url, str) else ""


def check_timeout(value: object) -> float:
    """``timeout=``: a finite number of seconds above 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise SessionError(f"timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def check_pool_size(value: object) -> int:
    """``pool_size=``: a whole number above 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SessionError(f"pool_size must be a positive whole number, got {value!r}")
    return value


def check_table(table: object) -> str:
    """``table=``: a plain SQL name short enough for the names made from it."""
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        raise SessionError(f"table must be a plain SQL name (letters, digits, _; at most 41), got {table!r}")
    return table


def url_password(url: str) -> str | None:
    """The password in a URL's user info (``None``: none), to keep it out of a message about a URL
    libpq could not parse."""
    user, colon, password = (user_info(url) or "").partition(":")
    return (password or None) if colon else None
