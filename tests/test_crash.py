"""CI's share of the crash test: 50 SIGKILLs per file backend (``python -m tests.crash`` for more)."""

from __future__ import annotations

import pytest

from crash import run


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["json", "yaml", "json-appends"])
def test_fifty_kills_mid_save_lose_nothing_and_leave_nothing(backend: str) -> None:
    report = run(backend, kills=50, seed=50)
    assert report.kills == 50
    assert report.lost == 0, "a kill left the session neither the last save nor the one in flight"
    assert report.leftovers == 0, "a temporary or lock file survived the next save"
