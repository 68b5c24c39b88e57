"""Worker processes for the proof tests: :func:`run_forked` runs code in several processes, at once or in turn.

One fresh interpreter runs the code's imports once, then forks the workers: each
is its own process with its own sessions and connections, as if started alone,
without paying for the imports each time (and a fork of a small interpreter
costs far less than one of the test runner).
:func:`run_workers` increments one session's counter through ``update``; :func:`run_lease_workers`
takes turns under a lease; :data:`TURN_WORKER` and :data:`HOLDER` hold a lease in a process a test signals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

FORKS = """
import json
import os
import sys
import tempfile
import traceback

sys.path.insert(0, sys.argv[1])  # the tests' folder, for their model modules
exec(compile(sys.argv[2], "<worker>", "exec"))  # imports, then defines work(*args)
runs, in_turn = json.loads(sys.argv[3]), sys.argv[4] == "in-turn"
with tempfile.TemporaryDirectory() as outputs:
    workers, statuses = [], []
    for index, args in enumerate(runs):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # a worker: never returns into the loop
            status = 0
            try:
                os.dup2(os.open(os.path.join(outputs, str(index)), os.O_WRONLY | os.O_CREAT, 0o600), 1)
                work(*args)
            except BaseException:
                traceback.print_exc()
                status = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        workers.append(pid)
        if in_turn:
            statuses.append(os.waitpid(pid, 0)[1])
            if statuses[-1]:
                break
    if not in_turn:
        statuses = [os.waitpid(pid, 0)[1] for pid in workers]
    if any(statuses):
        sys.exit(f"worker wait statuses: {statuses}")
    printed = []
    for index in range(len(runs)):
        with open(os.path.join(outputs, str(index)), encoding="utf-8") as output:
            printed.append(output.read())
print(json.dumps(printed))
"""


def run_forked(
    code: str, runs: Sequence[Sequence[str]], timeout: float = 600, *, in_turn: bool = False, cwd: Path | None = None
) -> list[str]:
    """Run ``work(*args)`` for every ``args`` of ``runs``, each in its own process; all must succeed.

    Args:
        code: Python source that imports what the workers need and defines ``work``
            (run once, before the forks; the tests' folder is on ``sys.path``).
        runs: The string arguments of each worker.
        timeout: Seconds for all of them (a deadline: a loaded machine is slow).
        in_turn: Run each worker after the last one ended (restarts of a program), instead of all at once.
        cwd: The workers' working folder.

    Returns:
        What each worker printed.
    """
    order = "in-turn" if in_turn else "at-once"
    args = [sys.executable, "-c", FORKS, str(Path(__file__).parent), code, json.dumps([list(run) for run in runs]), order]
    # a session of its own, so that a deadline passed stops the workers too, not only the process that forked them
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, start_new_session=True) as forks:
        try:
            stdout, stderr = forks.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(forks.pid, signal.SIGKILL)
            forks.communicate()
            raise
    assert forks.returncode == 0, stderr[-3000:]
    printed: list[str] = json.loads(stdout.splitlines()[-1])
    return printed


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


LEASE_WORKER = WORKER + """

def lease_turns(kind, where, prefix, count):
    import json, time

    session, counter = open_session(kind, where, prefix), Counter()
    with session:
        for _ in range(int(count)):
            with session.lease("leased", "u", ttl=60, wait=600) as lease:
                start = time.time()
                session.load("leased", "u", counter=counter)
                counter.count += 1
                session.save("leased", "u", counter=counter)  # a plain save: the lease alone keeps it exclusive
                print(json.dumps([lease.token, start, time.time()]), flush=True)


work = lease_turns
"""
"""``work`` takes the lease (waiting for it), loads, increments, saves plainly and releases, ``count`` times,
printing ``[token, start, end]`` per turn."""

_SCRIPT = WORKER + """
import sys

kind, where, prefix = sys.argv[1:4]
"""

TURN_WORKER = _SCRIPT + """
from statekit.errors import LeaseLostError

session, counter = open_session(kind, where, prefix), Counter()
with session:
    lease = session.lease("turn", "u", ttl=float(sys.argv[4]))
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
"""One turn under a lease of ttl argv[4]: take it, load, say so, wait for a line, save, say how it went."""

HOLDER = _SCRIPT + """
import time

session = open_session(kind, where, prefix)
lease = session.lease("held", "u", ttl=float(sys.argv[4]))
print("held", lease.token, flush=True)
time.sleep(3600)
"""
"""Takes the lease of ttl argv[4], says so and sleeps (to be killed)."""


def worker_args(script: str, kind: str, where: str, prefix: str, ttl: str) -> list[str]:
    """The command line of a worker of its own (one the test signals): a script above, the backend, a ttl."""
    return [sys.executable, "-c", script, kind, where, prefix, ttl]


def run_lease_workers(kind: str, where: str, *, prefix: str = "", processes: int = 8, turns: int = 50) -> list[list[float]]:
    """Run ``processes`` workers of :data:`LEASE_WORKER` at once; every ``[token, start, end]`` they printed."""
    backend = {"redis": "redis", "postgres": "postgres", "sqlite": "sqlite"}.get(kind)
    imports = f"import statekit.session.{backend}\n" if backend else ""  # before the fork, once
    printed = run_forked(imports + LEASE_WORKER, [[kind, where, prefix, str(turns)]] * processes, timeout=900)
    return [json.loads(line) for output in printed for line in output.splitlines()]


HISTORY_WORKER = WORKER + """
import json as _json
import time

from statekit.errors import ConflictError
from statekit.testing import Journal


def keeping(kind, where, prefix):
    session = open_session(kind, where, prefix)
    session.keep_history = None  # every object keeps every revision (the session records it too)
    return session


def append_turns(kind, where, prefix, name, count):
    session, journal = keeping(kind, where, prefix), Journal()

    def add(index):
        def change():
            journal.entries.append(f"{name}-{index}")
        return change

    with session:
        for index in range(int(count)):
            session.update("shared", add(index), user_id="u", retries=RETRIES, journal=journal)


def roll_back(kind, where, prefix, count):
    session, made = keeping(kind, where, prefix), []
    with session:
        while len(made) < int(count):
            listed = session.history("shared", "u")
            if len(listed) < 3:
                time.sleep(0.01)
                continue
            try:
                made.append(session.rollback("shared", listed[2].revision, user_id="u"))
            except ConflictError:
                continue
            time.sleep(0.02)  # let updates land after it
    print(_json.dumps(made))


def work(role, kind, where, prefix, name, count):
    if role == "rollback":
        roll_back(kind, where, prefix, count)
    else:
        append_turns(kind, where, prefix, name, count)
"""


def run_rollback_race(kind: str, where: str, *, prefix: str = "", processes: int = 8, turns: int = 20, rollbacks: int = 5) -> list[str]:
    """``processes`` workers append ``turns`` entries each through ``update`` while one more rolls the
    session back ``rollbacks`` times (to the revision two before the head); the rollbacks' revisions."""
    backend = {"redis": "redis", "postgres": "postgres", "sqlite": "sqlite"}.get(kind)
    imports = f"import statekit.session.{backend}\n" if backend else ""
    runs = [["update", kind, where, prefix, f"w{index}", str(turns)] for index in range(processes)]
    printed = run_forked(imports + HISTORY_WORKER, [*runs, ["rollback", kind, where, prefix, "r", str(rollbacks)]])
    made: list[str] = json.loads(printed[-1])
    return made
