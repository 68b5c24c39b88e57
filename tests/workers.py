"""Worker processes that increment one session's counter through ``update``, for the proof tests.

One fresh interpreter imports statekit and the backend once, then forks the
workers, which start together: each is its own process with its own session
and connections, as if started alone, without paying for the imports eight
times over.
"""

from __future__ import annotations

import subprocess
import sys

WORKER = """
import os
import sys
import traceback

from statekit.testing import Counter

kind, where, prefix, count, processes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
RETRIES = 100  # 8 writers on one session, on a shared CI machine: the default 10 can run out
if kind == "redis":
    from statekit.session.redis import RedisSession
elif kind == "postgres":
    from statekit.session.postgres import PostgresSession
elif kind == "sqlite":
    from statekit.session.sqlite import SQLiteSession
else:
    from statekit.session import JSONSession, YAMLSession


def open_session():
    if kind == "redis":
        return RedisSession.from_url(where, key_prefix=prefix, timeout=60)  # a loaded machine can stall past 5 s
    if kind == "postgres":
        return PostgresSession.from_url(where, table=prefix, timeout=60)
    if kind == "sqlite":
        return SQLiteSession(where, timeout=60)  # 8 writers' turns at the lock, on a loaded machine
    return (JSONSession if kind == "json" else YAMLSession)(where)


def work():
    session, counter = open_session(), Counter()

    def bump():
        counter.count += 1

    with session:
        for _ in range(count):
            session.update("shared", bump, user_id="u", retries=RETRIES, counter=counter)


workers = []
for _ in range(processes):
    pid = os.fork()
    if pid == 0:  # a worker: never returns into the loop
        status = 0
        try:
            work()
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            sys.stderr.flush()
            os._exit(status)
    workers.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in workers]
if statuses != [0] * processes:
    sys.exit(f"worker wait statuses: {statuses}")
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
    args = [sys.executable, "-c", WORKER, kind, where, prefix, str(increments), str(processes)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)  # a deadline: a loaded machine is slow
    assert done.returncode == 0, done.stderr[-3000:]
