"""Worker processes for the proof tests: :func:`run_forked` runs code in several processes at once.

One fresh interpreter runs the code's imports once, then forks the workers,
which start together: each is its own process with its own sessions and
connections, as if started alone, without paying for the imports each time.
:func:`run_workers` increments one session's counter through ``update``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

FORKS = """
import json
import os
import sys
import traceback

sys.path.insert(0, sys.argv[1])  # the tests' folder, for their model modules
exec(compile(sys.argv[2], "<worker>", "exec"))  # imports, then defines work(*args)
workers = []
for args in json.loads(sys.argv[3]):
    pid = os.fork()
    if pid == 0:  # a worker: never returns into the loop
        status = 0
        try:
            work(*args)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            sys.stderr.flush()
            os._exit(status)
    workers.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in workers]
if any(statuses):
    sys.exit(f"worker wait statuses: {statuses}")
"""


def run_forked(code: str, runs: Sequence[Sequence[str]], timeout: float = 600) -> None:
    """Run ``work(*args)`` for every ``args`` of ``runs`` at once, each in its own process; all must succeed.

    Args:
        code: Python source that imports what the workers need and defines ``work``
            (run once, before the fork; the tests' folder is on ``sys.path``).
        runs: The string arguments of each worker.
        timeout: Seconds for all of them (a deadline: a loaded machine is slow).
    """
    args = [sys.executable, "-c", FORKS, str(Path(__file__).parent), code, json.dumps([list(run) for run in runs])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


WORKER = """
from statekit.testing import Counter

RETRIES = 100  # 8 writers on one session, on a shared CI machine: the default 10 can run out


def open_session(kind, where, prefix):
    if kind == "redis":
        from statekit.session.redis import RedisSession
        return RedisSession.from_url(where, key_prefix=prefix, timeout=60)  # a loaded machine can stall past 5 s
    if kind == "postgres":
        from statekit.session.postgres import PostgresSession
        return PostgresSession.from_url(where, table=prefix, timeout=60)
    if kind == "sqlite":
        from statekit.session.sqlite import SQLiteSession
        return SQLiteSession(where, timeout=60)  # 8 writers' turns at the lock, on a loaded machine
    from statekit.session import JSONSession, YAMLSession
    return (JSONSession if kind == "json" else YAMLSession)(where)


def work(kind, where, prefix, count):
    session, counter = open_session(kind, where, prefix), Counter()

    def bump():
        counter.count += 1

    with session:
        for _ in range(int(count)):
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
    backend = {"redis": "redis", "postgres": "postgres", "sqlite": "sqlite"}.get(kind)
    imports = f"import statekit.session.{backend}\n" if backend else ""  # before the fork, once
    run_forked(imports + WORKER, [[kind, where, prefix, str(increments)]] * processes)
