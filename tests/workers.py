"""Worker processes that increment one session's counter through ``update``, for the proof tests."""

from __future__ import annotations

import subprocess
import sys

WORKER = """
import sys
from statekit.testing import Counter

kind, where, prefix, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
RETRIES = 100  # 8 writers on one session, on a shared CI machine: the default 10 can run out
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
