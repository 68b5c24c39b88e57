"""Worker processes for the proof tests: increments through ``update``, turns under a lease, a lease holder to kill."""

from __future__ import annotations

import json
import subprocess
import sys

SESSION = """
import sys
from statekit.testing import Counter

kind, where, prefix, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "redis":
    from statekit.session.redis import RedisSession
    session = RedisSession.from_url(where, key_prefix=prefix, timeout=60)  # a loaded machine can stall past 5 s
elif kind == "postgres":
    from statekit.session.postgres import PostgresSession
    session = PostgresSession.from_url(where, table=prefix, timeout=60)
elif kind == "sqlite":
    from statekit.session.sqlite import SQLiteSession
    session = SQLiteSession(where, timeout=60)  # 8 writers' turns at the lock, on a loaded machine
else:
    from statekit.session import JSONSession, YAMLSession
    session = (JSONSession if kind == "json" else YAMLSession)(where)
counter = Counter()
"""
"""Makes ``session`` (the backend named by argv[1] at argv[2], prefix or table argv[3]) and a ``counter``."""

WORKER = SESSION + """
RETRIES = 100  # 8 writers on one session, on a shared CI machine: the default 10 can run out

def bump():
    counter.count += 1

with session:
    for _ in range(count):
        session.update("shared", bump, user_id="u", retries=RETRIES, counter=counter)
"""


def run_workers(kind: str, where: str, *, prefix: str = "", processes: int = 8, increments: int = 50) -> None:
    """Run ``processes`` workers at once, each doing ``increments`` updates; all must succeed.

    Args:
        kind: ``"json"``, ``"yaml"``, ``"redis"``, ``"sqlite"`` or ``"postgres"``.
        where: The folder, a Redis URL (``redis+cluster://`` for a cluster), a SQLite database file or a PostgreSQL URL.
        prefix: The Redis key prefix, or the PostgreSQL table.
        processes: How many worker processes.
        increments: Updates per worker.
    """
    args = [sys.executable, "-c", WORKER, kind, where, prefix, str(increments)]
    children = [subprocess.Popen(args, stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    failures = [child.communicate(timeout=600)[1] for child in children]  # a deadline: a loaded machine is slow
    assert [child.returncode for child in children] == [0] * processes, [f for f in failures if f][:1]


LEASE_WORKER = SESSION + """
import json, time
with session:
    for _ in range(count):
        with session.lease("leased", "u", ttl=60, wait=600) as lease:
            start = time.time()
            session.load("leased", "u", counter=counter)
            counter.count += 1
            session.save("leased", "u", counter=counter)  # a plain save: the lease alone keeps it exclusive
            print(json.dumps([lease.token, start, time.time()]), flush=True)
"""
"""Takes the lease (waiting for it), loads, increments, saves plainly and releases, ``count`` times;
prints ``[token, start, end]`` per turn."""

TURN_WORKER = SESSION + """
from statekit.errors import LeaseLostError
with session:
    lease = session.lease("turn", "u", ttl=float(sys.argv[5]))
    session.load("turn", "u", counter=counter)
    print("loaded", lease.token, flush=True)
    sys.stdin.readline()  # the test stops this process here, then lets it go on
    counter.count += 100
    try:
        session.save("turn", "u", counter=counter)
    except LeaseLostError:
        print("lost", flush=True)
    else:
        print("saved", flush=True)
    lease.release()
"""
"""One turn under a lease of ttl argv[5]: take it, load, say so, wait for a line, save, say how it went."""

HOLDER = SESSION + """
import time
lease = session.lease("held", "u", ttl=float(sys.argv[5]))
print("held", lease.token, flush=True)
time.sleep(3600)
"""
"""Takes the lease of ttl argv[5], says so and sleeps (to be killed)."""


def worker_args(script: str, kind: str, where: str, prefix: str, *extra: str) -> list[str]:
    """The command line of one worker process: ``count`` (argv[4]) is 1 unless ``extra`` says more."""
    count, *rest = extra or ("1",)
    return [sys.executable, "-c", script, kind, where, prefix, count, *rest]


def run_lease_workers(kind: str, where: str, *, prefix: str = "", processes: int = 8, turns: int = 50) -> list[list[float]]:
    """Run ``processes`` workers of :data:`LEASE_WORKER` at once; every ``[token, start, end]`` they printed."""
    args = worker_args(LEASE_WORKER, kind, where, prefix, str(turns))
    children = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    outputs = [child.communicate(timeout=900) for child in children]  # a deadline: a loaded machine is slow
    assert [child.returncode for child in children] == [0] * processes, [err for _, err in outputs if err][:1]
    return [json.loads(line) for out, _ in outputs for line in out.splitlines()]
