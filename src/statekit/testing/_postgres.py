"""A throw-away PostgreSQL server on a free loopback port, for tests and benchmarks.

Public through :mod:`statekit.testing`: :func:`local_postgres_server`. It makes a
cluster with ``initdb`` in a temporary folder, starts it with ``pg_ctl`` on a
free loopback port (no Unix socket outside that folder), and stops it and
removes the folder when the ``with`` block ends. As root, both run as the
``postgres`` system user (``runuser -u postgres --``): ``initdb`` refuses root.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence

import attrs

from statekit.testing._servers import free_port

SYSTEM_USER = "postgres"
"""The system user the server runs as when the caller is root."""

BIN_GLOB = "/usr/lib/postgresql/*/bin"
"""Where Debian installs the server binaries (not on ``PATH``)."""


@attrs.frozen
class PostgresServer:
    """Where a :func:`local_postgres_server` listens, and how to reach it."""

    host: str
    port: int
    user: str
    password: str = attrs.field(repr=False)
    database: str
    data_dir: str
    """The cluster's folder (``PGDATA``)."""

    @property
    def dsn(self) -> str:
        """A ``postgresql://`` URL with the password (for :meth:`PostgresSession.from_url`)."""
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"


def postgres_bin(name: str) -> str:
    """The path of a PostgreSQL server program: ``PATH`` first, then Debian's newest version folder.

    Raises:
        RuntimeError: It is not installed (saying how to install it).
    """
    found = shutil.which(name)
    if found is not None:
        return found
    folders = sorted(glob.glob(BIN_GLOB), key=_version_key, reverse=True)
    for folder in folders:
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    raise RuntimeError(f"{name} is not installed (Debian: apt-get install postgresql; looked on PATH and in {BIN_GLOB})")


def _version_key(folder: str) -> tuple[int, ...]:
    version = os.path.basename(os.path.dirname(folder))
    return tuple(int(part) for part in version.split(".") if part.isdigit())


@contextlib.contextmanager
def local_postgres_server(
    timeout: float = 120.0, *, password: str = "statekit-test", options: Sequence[str] = ()
) -> Iterator[PostgresServer]:
    """Run a private PostgreSQL server on a free loopback port, in a temporary cluster.

    The superuser ``postgres`` logs in with ``password`` (``scram-sha-256`` over
    TCP, so a wrong password is refused as on a real server); the database is
    ``postgres``. ``fsync`` is off: the data is thrown away anyway.

    Args:
        timeout: Seconds to wait for ``initdb`` and for the server to start (a deadline).
        password: The superuser's password.
        options: More server settings, each ``"name=value"`` (``["max_connections=200"]``).

    Yields:
        Its address; the server is stopped (immediate shutdown) and its folder removed when the block ends.

    Raises:
        RuntimeError: The binaries are missing, or the server did not start (with its log's tail).
    """
    initdb, pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
    as_user = _as_postgres()
    with tempfile.TemporaryDirectory(prefix="statekit-pg-") as folder:
        os.chmod(folder, 0o755)
        data, log = os.path.join(folder, "data"), os.path.join(folder, "server.log")
        secret = os.path.join(folder, "pw")
        with open(secret, "w", encoding="utf-8") as out:
            out.write(password + "\n")
        if as_user:
            shutil.chown(folder, SYSTEM_USER)
            shutil.chown(secret, SYSTEM_USER)
        os.chmod(secret, 0o600)
        init = [initdb, "-D", data, "-U", SYSTEM_USER, "--pwfile", secret, "--auth", "scram-sha-256", "-E", "UTF8"]
        _run([*as_user, *init, "--no-sync", "--locale", "C"], timeout)
        port = free_port()
        settings = ["listen_addresses=127.0.0.1", f"port={port}", f"unix_socket_directories={folder}", "fsync=off"]
        settings += ["full_page_writes=off", "synchronous_commit=off", *options]
        flags = " ".join(f"-c {setting}" for setting in settings)
        start = [pg_ctl, "-D", data, "-l", log, "-w", "-t", str(int(timeout)), "-o", flags, "start"]
        try:
            _run([*as_user, *start], timeout + 10, log)
            yield PostgresServer("127.0.0.1", port, SYSTEM_USER, password, "postgres", data)
        finally:
            with contextlib.suppress(Exception):
                _run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], 60)


def _as_postgres() -> list[str]:
    """The prefix that runs a command as the ``postgres`` system user when we are root (else none)."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise RuntimeError("running as root, and runuser is missing: initdb refuses to run as root")
    return [runuser, "-u", SYSTEM_USER, "--"]


def _run(command: list[str], timeout: float, log: str | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, cwd="/")
    if done.returncode != 0:
        tail = ""
        if log is not None and os.path.exists(log):
            with open(log, encoding="utf-8", errors="replace") as file:
                tail = file.read()[-1500:]
        raise RuntimeError(f"{os.path.basename(command[0])} failed: {done.stdout[-800:]}{done.stderr[-800:]}{tail}")
