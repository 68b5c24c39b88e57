"""``SQLiteSession``'s connections: a small pool used from worker threads, each call bounded by a deadline.

sqlite3 connections block, so every call runs in a worker thread
(``asyncio.to_thread``), never on the event loop. A connection is used by one
thread at a time: a call takes an idle one from the pool (or opens one) and
gives it back after, so a few connections serve any number of tasks, and none is
shared by two threads at once. Connections are opened in autocommit mode
(transactions are begun by the statements: ``BEGIN IMMEDIATE`` for writes,
which takes the database's write lock at once, so a compare-and-set never waits
for a lock halfway), in WAL mode (readers never wait for the writer) with
``synchronous=FULL`` (a save that returned survives a power cut, as a file save does).

A call's deadline bounds it whole: a thread that starts late fails at once,
the lock wait is SQLite's busy timeout set to what is left, and a statement
still running at the deadline is interrupted (its transaction rolled back). A
forked child never uses its parent's connections: it opens its own.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from statekit.errors import BackendUnavailableError, SessionError, StatekitError
from statekit.session._sqlite_sql import (
    RAISE_VERSION,
    RECORD_VERSION,
    SCHEMA_DDL,
    SCHEMA_VERSION,
    TABLE_EXISTS,
    VERSION,
    Statements,
)

R = TypeVar("R")

MAX_IDLE = 32
"""Idle connections kept for the next calls (as many as the default executor has threads: none is
closed and opened again while every worker thread makes calls); more are closed when given back."""

PROGRESS_STEPS = 1000
"""SQLite virtual-machine steps between two looks at the deadline."""

SLACK_MS = 50
"""A connection's busy timeout is set again only when it is further than this from what the call has left."""

MIN_SQLITE = (3, 35, 0)
"""The oldest SQLite library that has everything used here (``RETURNING``, upserts, JSON functions)."""


class _Connection(sqlite3.Connection):
    """A connection that remembers its busy timeout (milliseconds), to set it only when it must change."""

    busy_ms = -1


class Connections:
    """The connections of one ``SQLiteSession`` to its database file.

    Args:
        path: The database file.
        statements: The statements of its sessions table (for the schema).
        timeout: Seconds a call may take in all (for messages).
    """

    def __init__(self, path: Path, statements: Statements, timeout: float) -> None:
        self.path = path
        self.statements = statements
        self.timeout = timeout
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._ready = False  # the schema was found (or made) at our version

    def run(self, work: Callable[[sqlite3.Connection], R], deadline: float) -> R:
        """Run ``work`` on a connection of this thread's own, by ``deadline`` (``time.monotonic()``).

        ``work`` begins and commits its transaction itself; one left open (an
        error) is rolled back here. A ``StatekitError`` it raises (a write the
        lease's fence refused) leaves the connection fit for the next call.

        Raises:
            BackendUnavailableError: The database stayed locked, or the call did not end, by the deadline.
            SessionError: The session is closed, the file cannot be used, or SQLite refused.
        """
        connection = self._take(deadline)
        healthy = False
        try:
            _bound_wait(connection, deadline)
            connection.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
            if not self._ready:
                self._ensure_schema(connection)
            result = work(connection)
            healthy = True
            return result
        except sqlite3.Error as err:
            raise self._told(err) from err
        except StatekitError:
            healthy = True
            raise
        finally:
            healthy = _rolled_back(connection) and healthy
            self._give_back(connection, healthy)

    def close(self) -> None:
        """Close the idle connections; those in use close when they are given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take(self, deadline: float) -> _Connection:
        with self._lock:
            if self._closed:
                raise SessionError(f"SQLite database {self.path}: this session is closed")
            if self._pid != os.getpid():  # a forked child: its parent's connections are not its own to use or close
                self._idle, self._pid = [], os.getpid()
            if time.monotonic() > deadline:  # the call waited for a worker thread past its deadline: it does nothing
                raise self._late()
            if self._idle:
                return self._idle.pop()
        return self._open(deadline)

    def _open(self, deadline: float) -> _Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _make_private(self.path)
        except OSError as err:
            raise SessionError(f"cannot make SQLite database {self.path}: {err.strerror or err}") from err
        try:
            connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, factory=_Connection
            )
        except sqlite3.Error as err:
            raise self._told(err) from err
        connection.text_factory = bytes  # documents come back as their bytes, not decoded and encoded again
        try:
            _bound_wait(connection, deadline)
            _into_wal(connection, deadline)
            connection.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as err:
            connection.close()
            raise self._told(err) from err
        return connection

    def _give_back(self, connection: _Connection, healthy: bool) -> None:
        connection.set_progress_handler(None, 0)
        with self._lock:
            if healthy and not self._closed and self._pid == os.getpid() and len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
                return
        if self._pid == os.getpid():
            connection.close()

    def _ensure_schema(self, connection: sqlite3.Connection) -> None:
        """Find the sessions table at this statekit's schema version, or make it (the first use of the file).

        Raises:
            SessionError: The table was written by a newer statekit, or is not statekit's.
        """
        table = self.statements.table
        version = _version(connection, table)
        if version is None:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(SCHEMA_DDL)
            version = _version(connection, table)
            if version is None:
                if connection.execute(TABLE_EXISTS, {"table": table}).fetchone() is not None:
                    raise SessionError(
                        f"SQLite database {self.path} has a table {table!r} that statekit did not make (it has no "
                        f"row in statekit_schema): give SQLiteSession another table= name"
                    )
                for statement in self.statements.tables_ddl:
                    connection.execute(statement)
                connection.execute(RECORD_VERSION, {"table": table, "version": SCHEMA_VERSION})
                version = SCHEMA_VERSION
            connection.execute("COMMIT")
        if version < SCHEMA_VERSION:
            version = self._upgrade(connection, table)
        if version > SCHEMA_VERSION:
            raise SessionError(
                f"SQLite database {self.path}: table {table!r} has schema version {version}, written by a newer "
                f"statekit; this one knows versions up to {SCHEMA_VERSION}: upgrade statekit to use it "
                "(nothing was changed)"
            )
        self._ready = True

    def _upgrade(self, connection: sqlite3.Connection, table: str) -> int:
        """Bring the tables of an older schema version up to this one, in place, in one transaction
        (the version read again under the write lock: another process may have done it). The version now."""
        connection.execute("BEGIN IMMEDIATE")
        version = _version(connection, table)
        if version is not None and version < SCHEMA_VERSION:
            for step in range(version, SCHEMA_VERSION):
                for statement in self.statements.upgrades[step]:
                    connection.execute(statement)
            connection.execute(RAISE_VERSION, {"table": table, "version": SCHEMA_VERSION})
            version = SCHEMA_VERSION
        connection.execute("COMMIT")
        return SCHEMA_VERSION if version is None else version

    def _late(self) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"SQLite database {self.path} is unavailable: the call did not end within timeout={self.timeout:g} s"
        )

    def _told(self, err: sqlite3.Error) -> StatekitError:
        """sqlite3's error as statekit's, naming the database (never raw)."""
        message = str(err)
        if isinstance(err, sqlite3.OperationalError) and ("locked" in message or "busy" in message):
            return BackendUnavailableError(
                f"SQLite database {self.path} is busy: another connection held its lock for longer than "
                f"timeout={self.timeout:g} s ({message})"
            )
        if isinstance(err, sqlite3.OperationalError) and "interrupted" in message:
            return self._late()
        if isinstance(err, sqlite3.OperationalError) and "unable to open" in message:
            return BackendUnavailableError(f"cannot open SQLite database {self.path}: {message}")
        return SessionError(f"SQLite database {self.path} refused: {message}")


def _version(connection: sqlite3.Connection, table: str) -> int | None:
    try:
        row = connection.execute(VERSION, {"table": table}).fetchone()
    except sqlite3.OperationalError as err:
        if "no such table" not in str(err):
            raise
        return None
    return None if row is None else int(row[0])


def _into_wal(connection: sqlite3.Connection, deadline: float) -> None:
    """Put the database in WAL mode (once per file; a no-op after). Changing the mode may answer
    "locked" at once, without the busy handler, while another process makes the same change: tried again."""
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


def commit(connection: sqlite3.Connection) -> None:
    """Commit, no longer interrupted by the deadline: a commit that started is let finish, so that
    a write's outcome is always known (written, or an error and nothing written)."""
    connection.set_progress_handler(None, 0)
    connection.execute("COMMIT")


def rollback(connection: sqlite3.Connection) -> None:
    """Roll back, no longer interrupted by the deadline (a write that found its condition false: nothing kept)."""
    connection.set_progress_handler(None, 0)
    connection.execute("ROLLBACK")


def _make_private(path: Path) -> None:
    """Make the database file, readable by its owner only, unless it exists: SQLite gives its ``-wal`` and
    ``-shm`` files the same mode (as session files are private, mode 0600)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        return
    os.close(fd)


def _bound_wait(connection: _Connection, deadline: float) -> None:
    """Make SQLite wait for another writer's lock no longer than the call has left (give or take :data:`SLACK_MS`)."""
    left = max(int((deadline - time.monotonic()) * 1000), 1)
    if abs(connection.busy_ms - left) > SLACK_MS:
        connection.execute(f"PRAGMA busy_timeout = {left}")
        connection.busy_ms = left


def _rolled_back(connection: sqlite3.Connection) -> bool:
    """End a transaction a failed call left open; whether the connection is fit to use again."""
    if not connection.in_transaction:
        return True
    connection.set_progress_handler(None, 0)
    try:
        connection.execute("ROLLBACK")
    except sqlite3.Error:
        return False
    return True


def check_library() -> None:
    """Refuse an SQLite library too old for these statements.

    Raises:
        SessionError: Naming the version found and the one needed.
    """
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        needed = ".".join(map(str, MIN_SQLITE))
        raise SessionError(f"SQLiteSession needs SQLite {needed} or newer; this Python has {sqlite3.sqlite_version}")
