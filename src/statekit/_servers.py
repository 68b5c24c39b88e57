"""Throw-away Redis servers and clusters on free loopback ports, for tests and benchmarks.

Public through :mod:`statekit.testing`: :func:`local_redis_server` and
:func:`local_redis_cluster`. Persistence is off; everything is stopped (and
its folder removed) when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

CLUSTER_MASTERS = 3
"""Masters of a :func:`local_redis_cluster` (the fewest Redis Cluster accepts)."""


@attrs.frozen
class RedisServer:
    """Where a :func:`local_redis_server` listens."""

    host: str
    port: int
    pid: int
    """The server's process id (to pause it with ``SIGSTOP`` in a test, say)."""


class RedisCluster:
    """A running :func:`local_redis_cluster`: its masters' ports, and a way to stop one."""

    def __init__(self, host: str, ports: Sequence[int], processes: Sequence[subprocess.Popen[bytes]]) -> None:
        self.host = host
        self.ports = tuple(ports)
        self._processes = dict(zip(self.ports, processes, strict=True))

    @property
    def url(self) -> str:
        """A ``redis+cluster://`` URL for :meth:`statekit.session.redis.RedisSession.from_url`."""
        return f"redis+cluster://{self.host}:{self.ports[0]}"

    def pid(self, port: int) -> int:
        """The process id of the master on ``port`` (to pause it with ``SIGSTOP`` in a test, say)."""
        return self._processes[port].pid

    def stop_node(self, port: int) -> None:
        """Stop one master (its slots become unavailable; the others keep serving theirs)."""
        _stop(self._processes[port])


def free_port() -> int:
    """A loopback TCP port nothing listens on (at the time of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed (Debian: apt-get install redis-server)")
    return found


def _start(
    folder: str, port: int, options: Sequence[str], timeout: float, executable: str = "redis-server"
) -> subprocess.Popen[bytes]:
    args = [_binary(executable), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += ["--dir", folder, *options]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_pong(process, port, timeout)
    except BaseException:
        _stop(process)
        raise
    return process


@contextlib.contextmanager
def local_redis_server(
    executable: str = "redis-server", timeout: float = 10.0, options: Sequence[str] = ()
) -> Iterator[RedisServer]:
    """Run a private ``redis-server`` on a free loopback port, persistence off.

    Args:
        executable: The server binary (looked up on ``PATH``).
        timeout: Seconds to wait for it to answer ``PING``.
        options: More ``redis-server`` arguments (``["--requirepass", "s3cret"]``).

    Yields:
        Its address; the server is stopped when the block ends.

    Raises:
        RuntimeError: The binary is missing or the server did not answer.
    """
    _binary(executable)
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        process = _start(folder, port, options, timeout, executable)
        try:
            yield RedisServer("127.0.0.1", port, process.pid)
        finally:
            _stop(process)


@contextlib.contextmanager
def local_redis_cluster(timeout: float = 20.0) -> Iterator[RedisCluster]:
    """Run a private Redis Cluster of three masters (no replicas) on free loopback ports.

    The nodes keep serving their own slots when another one is down
    (``cluster-require-full-coverage no``), so that a test can stop one.

    Args:
        timeout: Seconds to wait for the nodes to start and the cluster to be ready.

    Yields:
        The cluster; every node is stopped when the block ends.

    Raises:
        RuntimeError: ``redis-server``/``redis-cli`` are missing, or the cluster did not form.
    """
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        ports = [free_port() for _ in range(CLUSTER_MASTERS)]
        processes = []
        for port in ports:
            node_folder = Path(folder, str(port))
            node_folder.mkdir()
            process = _start(str(node_folder), port, _cluster_options(), timeout)
            stack.callback(_stop, process)
            processes.append(process)
        _create_cluster(ports, timeout)
        yield RedisCluster("127.0.0.1", ports, processes)


def _cluster_options() -> list[str]:
    return [
        "--cluster-enabled", "yes",
        "--cluster-port", str(free_port()),
        "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", "1000",
        "--cluster-require-full-coverage", "no",
    ]  # fmt: skip


def _create_cluster(ports: Sequence[int], timeout: float) -> None:
    nodes = [f"127.0.0.1:{port}" for port in ports]
    command = [_binary("redis-cli"), "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-500:]}{done.stderr[-500:]}")
    deadline = time.monotonic() + timeout
    while not all(_cluster_ok(port) for port in ports):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Redis Cluster on ports {list(ports)} did not become ready within {timeout} s")
        time.sleep(0.1)


def _cluster_ok(port: int) -> bool:
    return b"cluster_state:ok" in _ask(port, b"CLUSTER INFO\r\n", 4096)


def _wait_for_pong(process: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if _ask(port, b"PING\r\n", 16).startswith((b"+PONG", b"-NOAUTH")):  # up (and maybe password-protected)
            return
        time.sleep(0.05)
    raise RuntimeError(f"redis-server did not answer on port {port} within {timeout} s")


def _ask(port: int, command: bytes, size: int) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(command)
            return conn.recv(size)
    except OSError:
        return b""


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGCONT)  # a paused server would not act on SIGTERM
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
