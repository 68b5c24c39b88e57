"""CI's share of the crash test: 50 SIGKILLs per file backend, 300 on SQLite (``python -m tests.crash`` for more).

Each run forks its savers from a fresh interpreter (:func:`crash.run_in_fresh_process`), not from the test runner.
"""

from __future__ import annotations

import pytest

from crash import run_in_fresh_process


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["json", "yaml", "json-appends"])
def test_fifty_kills_mid_save_lose_nothing_and_leave_nothing(backend: str) -> None:
    report = run_in_fresh_process(backend, kills=50, seed=50)
    assert report.kills == 50
    assert report.lost == 0, "a kill left the session neither the last save nor the one in flight"
    assert report.leftovers == 0, "a temporary or lock file survived the next save"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "sqlite-appends"])
def test_three_hundred_kills_mid_save_on_sqlite(backend: str) -> None:
    """Issue 28's proof: 300 SIGKILLs of a saving process, whole documents and deltas, on one SQLite file."""
    report = run_in_fresh_process(backend, kills=300, seed=28)
    assert report.kills == 300
    assert report.damaged == 0, "SQLite's integrity_check found the database damaged after a kill"
    assert report.lost == 0, "a kill left the session neither the last save nor the one in flight"
    assert report.leftovers == 0, "a file other than the database, its -wal and -shm survived the next save"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["json-history", "json-appends-history", "sqlite-history", "sqlite-appends-history"])
def test_kills_mid_save_leave_every_listed_revision_loadable(backend: str) -> None:
    """Issue 30's proof: with history on, a kill never leaves a listed revision that does not load, nor misses one."""
    report = run_in_fresh_process(backend, kills=50, seed=30)
    assert report.kills == 50
    assert report.lost == 0, "a kill left the session neither the last save nor the one in flight"
    assert report.history == 0, "history() listed a revision that does not load as saved, or missed one"
    assert report.leftovers == 0, "a temporary or lock file survived the next save"
