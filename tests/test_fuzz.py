"""CI's share of the fuzz test: a bounded Hypothesis run in a child process (``python -m tests.fuzz`` for more)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz import SEEDS, check_all, run_in_child

CI_EXAMPLES = 300


@pytest.mark.slow
def test_mutated_files_load_or_fail_cleanly_and_never_crash() -> None:
    done = run_in_child(CI_EXAMPLES, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"fuzz: {CI_EXAMPLES} mutated files" in done.stdout


def test_the_seeds_themselves_round_trip(tmp_path: Path) -> None:
    assert len(SEEDS) == 4  # JSON and YAML, session and config
    for raw in SEEDS:
        check_all(raw, tmp_path, None)
