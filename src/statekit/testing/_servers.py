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
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import attrs

T = TypeVar("T")

CLUSTER_MASTERS = 3
"""Masters of a :func:`local_redis_cluster` (the fewest Redis Cluster accepts)."""

CLUSTER_NODE_TIMEOUT_MS = 15_000
"""``cluster-node-timeout``: how long a node may go unanswered before the others call it
failing; long, so that a node slowed by a loaded machine is never taken for a dead one."""

STARTS = 3
"""Attempts at starting a server or cluster whose port another program took meanwhile."""


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
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback TCP ports nothing listens on (at the time of asking).

    All are held open together until every one is chosen, so the system cannot
    hand out the same port twice.
    """
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


class _PortTaken(RuntimeError):
    """A server exited at once: most likely another program took its port after we chose it."""


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


def _started(attempt: Callable[[], T]) -> T:
    """``attempt()``, again with fresh ports (up to :data:`STARTS` times) while a server exits at once."""
    for _ in range(STARTS - 1):
        with contextlib.suppress(_PortTaken):
            return attempt()
    return attempt()


@contextlib.contextmanager
def local_redis_server(
    executable: str = "redis-server", timeout: float = 60.0, options: Sequence[str] = ()
) -> Iterator[RedisServer]:
    """Run a private ``redis-server`` on a free loopback port, persistence off.

    Args:
        executable: The server binary (looked up on ``PATH``).
        timeout: Seconds to wait for it to answer ``PING`` (a deadline, not a
            wait: it answers in milliseconds on an idle machine).
        options: More ``redis-server`` arguments (``["--requirepass", "s3cret"]``).

    Yields:
        Its address; the server is stopped when the block ends.

    Raises:
        RuntimeError: The binary is missing or the server did not answer.
    """
    _binary(executable)
    with tempfile.TemporaryDirectory() as folder:

        def start() -> tuple[int, subprocess.Popen[bytes]]:
            port = free_port()
            return port, _start(folder, port, options, timeout, executable)

        port, process = _started(start)
        try:
            yield RedisServer("127.0.0.1", port, process.pid)
        finally:
            _stop(process)


@contextlib.contextmanager
def local_redis_cluster(timeout: float = 120.0) -> Iterator[RedisCluster]:
    """Run a private Redis Cluster of three masters (no replicas) on free loopback ports.

    The nodes keep serving their own slots when another one is down
    (``cluster-require-full-coverage no``), so that a test can stop one. Every
    port (the nodes' and their cluster bus ports) is distinct; a node that
    cannot start because another program took its port meanwhile is started
    again, with the whole cluster, on fresh ports.

    Args:
        timeout: Seconds to wait for the nodes to start and the cluster to be
            ready (a deadline: on an idle machine it takes about a second).

    Yields:
        The cluster; every node is stopped when the block ends.

    Raises:
        RuntimeError: ``redis-server``/``redis-cli`` are missing, or the cluster did not form.
    """
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:

        def start() -> tuple[list[int], list[subprocess.Popen[bytes]]]:
            ports = free_ports(2 * CLUSTER_MASTERS)  # each node's port, then its cluster bus port
            nodes, buses = ports[:CLUSTER_MASTERS], ports[CLUSTER_MASTERS:]
            processes = []
            with contextlib.ExitStack() as started:
                for port, bus in zip(nodes, buses, strict=True):
                    node_folder = tempfile.mkdtemp(prefix=f"{port}-", dir=folder)  # its own, whatever attempt
                    process = _start(node_folder, port, _cluster_options(bus), timeout)
                    started.callback(_stop, process)
                    processes.append(process)
                started.pop_all()  # all up: they are stopped when the outer block ends
            return nodes, processes

        ports, processes = _started(start)
        for process in processes:
            stack.callback(_stop, process)
        _create_cluster(ports, timeout)
        yield RedisCluster("127.0.0.1", ports, processes)


def _cluster_options(bus_port: int) -> list[str]:
    return [
        "--cluster-enabled", "yes",
        "--cluster-port", str(bus_port),
        "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS),
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
    if process.poll() is not None:
        raise _PortTaken(f"redis-server exited at once on port {port} (status {process.returncode}): is the port taken?")
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
