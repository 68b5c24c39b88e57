"""mypy --strict accepts typed agents and rejects misuse (issue 2, typing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TYPING = ROOT / "typing_tests"

pytestmark = pytest.mark.slow


def run_mypy(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", str(ROOT / "mypy.ini"), str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_typed_agents_pass_strict_mypy() -> None:
    result = run_mypy(TYPING / "pass_agents.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_every_marked_misuse_is_reported_and_nothing_else() -> None:
    source = (TYPING / "fail_agents.py").read_text(encoding="utf-8").splitlines()
    marked = {number for number, line in enumerate(source, 1) if re.search(r"\S  # E: ", line)}
    result = run_mypy(TYPING / "fail_agents.py")
    reported = {int(m) for m in re.findall(r"fail_agents\.py:(\d+): error", result.stdout)}
    assert len(marked) >= 7
    assert reported == marked, result.stdout
