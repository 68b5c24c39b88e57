"""Shared fixtures: a real redis-server for the run, and every session backend.

The Redis server is started once per test run on a free loopback port with
persistence off, and stopped at the end. A missing ``redis-server`` fails the
Redis tests (``apt-get install redis-server``): they are never skipped.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from statekit.session import JSONSession, SessionBase, YAMLSession
from statekit.session.redis import RedisSession

START_TIMEOUT = 10.0


@attrs.frozen
class RedisServer:
    """Where the test redis-server listens."""

    host: str
    port: int


def free_port() -> int:
    """A loopback TCP port that nothing listens on (at the time of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.fail("redis-server is not installed: apt-get install redis-server")
    port = free_port()
    command = [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen([*command, "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        if _answers(port):
            return process, port
        time.sleep(0.05)
    process.kill()
    process.wait()
    pytest.fail(f"redis-server did not answer on port {port} within {START_TIMEOUT} s")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of our own for the whole run, on a free loopback port."""
    process, port = _start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield RedisServer("127.0.0.1", port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


SessionFactory = Callable[[], SessionBase]


@pytest.fixture(params=["json", "yaml", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> SessionFactory:
    """A factory of sessions of one backend, all sharing one fresh storage.

    A factory rather than a session, because a Redis client belongs to the
    event loop it first connects in.
    """
    if request.param == "json":
        return lambda: JSONSession(tmp_path)
    if request.param == "yaml":
        return lambda: YAMLSession(tmp_path)
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"test-{uuid.uuid4().hex}:"
    return lambda: RedisSession(server.host, server.port, key_prefix=prefix)
