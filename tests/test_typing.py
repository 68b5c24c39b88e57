"""mypy --strict and pyright accept typed agents and reject misuse with the pinned messages.

typing_tests/fail_agents.py marks each must-fail line with ``# E`` and pins,
in the comments just above it, what each checker must say there; a line that
fails for another reason, or an error on an unmarked line, fails the test.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TYPING = ROOT / "typing_tests"

pytestmark = pytest.mark.slow

Said = dict[int, list[str]]
"""Line number to what a checker says there, in its order."""


def run_mypy(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", str(ROOT / "mypy.ini"), str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def pyright_command() -> list[str]:
    """pyright from the dev extras (the PyPI wrapper; it fetches pyright for node on first use)."""
    found = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert found is not None, "pyright is missing: pip install -e '.[dev]'"
    return [found]


def run_pyright(path: Path) -> dict[str, object]:
    config = TYPING / "pyrightconfig.json"
    done = subprocess.run(
        [*pyright_command(), "--outputjson", "-p", str(config), "--pythonpath", sys.executable, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


def mypy_said(output: str) -> Said:
    said: Said = defaultdict(list)
    for number, message in re.findall(r"^[^:\n]+\.py:(\d+): error: (.*)$", output, re.MULTILINE):
        said[int(number)].append(message)
    return dict(said)


def pyright_said(report: dict[str, object]) -> Said:
    said: Said = defaultdict(list)
    diagnostics = report["generalDiagnostics"]
    assert isinstance(diagnostics, list)
    for item in diagnostics:
        if item["severity"] == "error":
            message = " ".join(item["message"].split())  # its lines indent with no-break spaces
            said[item["range"]["start"]["line"] + 1].append(f"{item.get('rule', '')}: {message}")
    return dict(said)


def pinned(checker: str) -> Said:
    """What fail_agents.py says ``checker`` must report on each ``# E`` line."""
    lines = (TYPING / "fail_agents.py").read_text(encoding="utf-8").splitlines()
    prefix = f"# {checker} says: "
    expected: Said = {}
    for number, line in enumerate(lines, 1):
        if line.rstrip().endswith("  # E"):
            above: list[str] = []
            for comment in reversed(lines[: number - 1]):
                if not comment.lstrip().startswith("# ") or " says: " not in comment:
                    break
                if comment.lstrip().startswith(prefix):
                    above.insert(0, comment.lstrip()[len(prefix) :])
            expected[number] = above
    return expected


def test_every_must_fail_line_pins_both_checkers() -> None:
    mypy, pyright = pinned("mypy"), pinned("pyright")
    assert len(mypy) >= 12
    assert all(mypy.values()) and all(pyright.values()), "a # E line without pinned messages"


def test_typed_agents_pass_strict_mypy() -> None:
    result = run_mypy(TYPING / "pass_agents.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_mypy_reports_each_marked_misuse_with_its_message_and_nothing_else() -> None:
    result = run_mypy(TYPING / "fail_agents.py")
    assert mypy_said(result.stdout) == pinned("mypy"), result.stdout


def test_typed_agents_pass_pyright() -> None:
    report = run_pyright(TYPING / "pass_agents.py")
    assert pyright_said(report) == {}, report
    summary = report["summary"]
    assert isinstance(summary, dict) and summary["filesAnalyzed"] == 1


def test_pyright_reports_each_marked_misuse_with_its_message_and_nothing_else() -> None:
    said = pyright_said(run_pyright(TYPING / "fail_agents.py"))
    expected = pinned("pyright")
    assert said.keys() == expected.keys(), said
    for number, wanted in expected.items():
        assert len(said[number]) == len(wanted), (number, said[number])
        for message, text in zip(said[number], wanted, strict=True):
            rule, _, fragment = text.partition(": ")
            assert message.startswith(f"{rule}: ") and fragment in message, (number, message, text)
