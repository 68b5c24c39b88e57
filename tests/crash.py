"""Crash test: SIGKILL a process in the middle of saving, again and again.

A forked child saves a growing session in a loop (save ``n`` holds ``n``
entries) and reports each completed save on a pipe; the parent kills it with
SIGKILL at a random moment. After every kill the session must load strictly
and equal the last completed save or the one in flight, and once the next save
has succeeded no temporary or lock file may remain beside it.

``json-appends`` does the same with an append-only list (issue 12): each save
appends one entry, so most saves write a delta to the companion file, and the
child compacts every ~40 saves, so kills land in deltas and compactions alike.

``json-history``, ``json-appends-history``, ``sqlite-history`` and
``sqlite-appends-history`` keep 3 past revisions (issue 30; with append-only
lists most of them are delta lines naming their revisions): after every kill,
each revision ``history()`` lists must load as the save that made it, and none
a completed save made may be missing.

``sqlite`` and ``sqlite-appends`` run the same two loops on a SQLite file
(issue 28); after every kill the database must also pass SQLite's
``integrity_check``, and only the file and its ``-wal``/``-shm`` may lie in
the folder once the next save is done.

CI runs 50 kills per file backend (tests/test_crash.py), each run in a fresh
interpreter (:func:`run_in_fresh_process`): a fork of a small process costs a
fraction of a fork of the test runner, grown big by the time the test runs. The
long run::

    python -m tests.crash --kills 300            # every backend
    python -m tests.crash --kills 300 --backend sqlite-appends
    python -m tests.crash --kills 1000 --backend yaml --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

import sqlite3

import attrs

from statekit import StateModule, state_field, stateful
from statekit.session import JSONSession, SessionBase, YAMLSession
from statekit.session import _appends
from statekit.session._companion import companion
from statekit.session._files import FileSession
from statekit.session.sqlite import SQLiteSession

DATABASE = "sessions.db"
"""The SQLite backends' file, in the run's folder."""


def _sqlite(folder: Path) -> SQLiteSession:
    return SQLiteSession(folder / DATABASE)


KEPT = 3
"""How many past revisions the ``-history`` runs keep."""


BACKENDS: dict[str, Callable[[Path], SessionBase]] = {
    "json": JSONSession,
    "yaml": YAMLSession,
    "json-appends": JSONSession,
    "sqlite": _sqlite,
    "sqlite-appends": _sqlite,
    "json-history": lambda folder: JSONSession(folder, keep_history=KEPT),
    "json-appends-history": lambda folder: JSONSession(folder, keep_history=KEPT),
    "sqlite-history": lambda folder: SQLiteSession(folder / DATABASE, keep_history=KEPT),
    "sqlite-appends-history": lambda folder: SQLiteSession(folder / DATABASE, keep_history=KEPT),
}
SESSION_ID = "crash"
COMPACT_BYTES = 3_000
"""The appends child's compaction threshold: small, so that kills land in compactions too."""


@stateful
class Log(StateModule):
    """The growing state: ``n`` entries after save ``n``."""

    entries: list[str] = state_field(factory=list)
    count: int = state_field(default=0)


def entry(index: int) -> str:
    """Entry number ``index``."""
    return f"entry {index}: " + "x" * (index % 97) + " é😀"


def expected(count: int) -> Log:
    """The state of save number ``count``."""
    log = Log(count=count)
    log.entries = [entry(i) for i in range(count)]
    return log


@stateful
class AppendLog(StateModule):
    """The growing state of ``json-appends``: save ``n`` holds ``n`` entries, appended one a save."""

    entries: list[str] = state_field(factory=list, append_only=True)


@attrs.define
class Report:
    """What a run saw."""

    kills: int = 0
    torn_saves: int = 0
    """Kills that left a temporary file behind (the save was cut mid-write)."""
    lost: int = 0
    """Kills after which the session was neither the last save nor the one in flight."""
    leftovers: int = 0
    """Temporary or lock files still there after the next save."""
    damaged: int = 0
    """Kills after which SQLite's ``integrity_check`` found the database damaged."""
    history: int = 0
    """Kills after which history() listed a revision that does not load as saved, or missed one a completed save made."""


def _child(make: Callable[[Path], SessionBase], folder: Path, start: int, progress: int, appends: bool) -> None:
    async def loop() -> None:
        session = make(folder)
        count = start
        while True:
            count += 1
            await session.asave(SESSION_ID, log=expected(count))
            os.write(progress, f"{count}\n".encode())

    async def append_loop() -> None:
        _appends.COMPACT_MIN_BYTES = COMPACT_BYTES
        session, log = make(folder), AppendLog()
        await session.aload(SESSION_ID, log=log)
        while True:
            log.entries.append(entry(len(log.entries)))
            await session.asave(SESSION_ID, log=log)
            os.write(progress, f"{len(log.entries)}\n".encode())

    asyncio.run(append_loop() if appends else loop())


def _run_child(
    make: Callable[[Path], SessionBase], folder: Path, start: int, rng: random.Random, appends: bool = False
) -> int:
    """Fork a saver, kill it at a random moment; return the last save it reported."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        os.close(read_end)
        try:
            _child(make, folder, start, write_end, appends)
        finally:
            os._exit(0)
    os.close(write_end)
    time.sleep(rng.uniform(0.0, 0.04))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as pipe:
        reported = pipe.read().split()
    return int(reported[-1]) if reported else start


def _check(session: SessionBase, reported: int, report: Report, appends: bool = False) -> int:
    """Load strictly after a kill; return the save number found."""
    if isinstance(session, FileSession):
        path = session.session_path(SESSION_ID)
        if any(p.name.endswith(".tmp") for p in path.parent.iterdir()):
            report.torn_saves += 1
    elif isinstance(session, SQLiteSession):
        with sqlite3.connect(session.path) as database:
            if database.execute("PRAGMA integrity_check").fetchall() != [("ok",)]:
                report.damaged += 1
        database.close()
    if appends:
        appended = AppendLog()
        session.load(SESSION_ID, log=appended)
        count = len(appended.entries)
        found = Log(count=count, entries=appended.entries)
    else:
        found = Log()
        session.load(SESSION_ID, log=found)  # strict: raises on anything damaged
        count = found.count
    if count not in (reported, reported + 1) or found != expected(count):
        report.lost += 1
    return count


def _check_history(session: SessionBase, count: int, report: Report, appends: bool) -> None:
    """Every revision history() lists loads as the save that made it, and none a completed save made is missing."""
    listed = session.history(SESSION_ID)
    if len(listed) != min(KEPT + 1, count + 1):
        report.history += 1
        return
    for back, revision in enumerate(listed):
        try:
            if appends:
                appended = AppendLog()
                session.load_at(SESSION_ID, revision.revision, log=appended)
                found = Log(count=len(appended.entries), entries=appended.entries)
            else:
                found = Log()
                session.load_at(SESSION_ID, revision.revision, log=found)
        except Exception:  # noqa: BLE001 - any failure to load is what is counted
            report.history += 1
            return
        if found != expected(count - back):
            report.history += 1
            return


def _next_save_cleans(session: SessionBase, count: int, report: Report, appends: bool = False) -> None:
    if appends:  # load, then append: a delta save, which must also cut off a line a kill left unfinished
        log = AppendLog()
        session.load(SESSION_ID, log=log)
        log.entries.append(entry(len(log.entries)))
        session.save(SESSION_ID, log=log)
    else:
        session.save(SESSION_ID, log=expected(count))
    report.leftovers += len(_beside(session))
    if session.list_sessions() != [SESSION_ID]:
        report.leftovers += 1


def _beside(session: SessionBase) -> list[str]:
    """The files in the session's folder that the next save should have cleaned away."""
    if isinstance(session, SQLiteSession):
        folder, kept = session.path.parent, {DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm"}
        return [p.name for p in folder.iterdir() if p.name not in kept]
    assert isinstance(session, FileSession)
    path = session.session_path(SESSION_ID)
    return [p.name for p in path.parent.iterdir() if p not in (path, companion(path)) and ".history" not in p.name]


def run(backend: str, kills: int, seed: int = 0) -> Report:
    """Kill a saving child ``kills`` times on one backend.

    Args:
        backend: A key of :data:`BACKENDS`.
        kills: How many SIGKILLs.
        seed: For the random kill moments.

    Returns:
        What was seen; a good run has ``lost == leftovers == damaged == 0``.
    """
    rng = random.Random(seed)
    report = Report()
    make, appends = BACKENDS[backend], "-appends" in backend
    with TemporaryDirectory() as tmp:
        folder = Path(tmp)
        session = make(folder)
        session.save(SESSION_ID, log=AppendLog() if appends else expected(0))
        count = 0
        for _ in range(kills):
            reported = _run_child(make, folder, count, rng, appends)
            report.kills += 1
            found = _check(session, reported, report, appends)
            if backend.endswith("-history"):
                _check_history(session, found, report, appends)
            count = found + 1
            _next_save_cleans(session, count, report, appends)
        session.close()
    return report


RUN_CHILD = "import json, sys, attrs, crash; print(json.dumps(attrs.asdict(crash.run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))))"
"""Runs :func:`run` and prints its :class:`Report` as JSON."""


def run_in_fresh_process(backend: str, kills: int, seed: int = 0) -> Report:
    """:func:`run` in a fresh interpreter, which forks the savers: the same kills, far less CPU than from a big parent.

    Forking copies the parent's page tables, and the child then copies every
    page it touches: both grow with the parent, and a test runner that has run
    a thousand tests is ten times the size of a fresh interpreter.
    """
    command = [sys.executable, "-c", RUN_CHILD, backend, str(kills), str(seed)]
    done = subprocess.run(command, cwd=Path(__file__).parent, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the crash run on {backend} failed: {done.stderr[-2000:]}")
    return Report(**json.loads(done.stdout.splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m tests.crash --kills 300``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=300, help="SIGKILLs per backend (default 300)")
    parser.add_argument("--backend", choices=[*BACKENDS, "all"], default="all")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    failed = False
    for backend in BACKENDS if args.backend == "all" else [args.backend]:
        started = time.monotonic()
        report = run(backend, args.kills, args.seed)
        failed |= bool(report.lost or report.leftovers or report.damaged or report.history)
        print(
            f"{backend}: {report.kills} kills, {report.torn_saves} cut mid-save, "
            f"{report.lost} lost, {report.damaged} damaged, {report.history} histories wrong, "
            f"{report.leftovers} files left after the next save "
            f"({time.monotonic() - started:.0f} s)"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
