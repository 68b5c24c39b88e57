"""mypy --strict and pyright accept typed agents and reject misuse with the pinned messages.

typing_tests/fail_agents.py marks each must-fail line with ``# E`` and pins,
in the comments just above it, what each checker must say there; a line that
fails for another reason, or an error on an unmarked line, fails the test.

Each checker runs once over both files (analysing statekit once), and each
test reads its file's part of the report: an error anywhere but in
fail_agents.py fails the passing file's test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TYPING = ROOT / "typing_tests"
PASSING, FAILING = TYPING / "pass_agents.py", TYPING / "fail_agents.py"

pytestmark = pytest.mark.slow

Said = dict[int, list[str]]
"""Line number to what a checker says there, in its order."""


def run_mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict from scratch, writing no cache (``--cache-dir`` the null device: a tenth less CPU, the same report)."""
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", f"--cache-dir={os.devnull}"]
    return subprocess.run(
        [*command, "--config-file", str(ROOT / "mypy.ini"), *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


@cache
def mypy_on_both() -> subprocess.CompletedProcess[str]:
    """mypy over the passing and the failing file, once for the module's tests."""
    return run_mypy(PASSING, FAILING)


def pyright_command() -> list[str]:
    """pyright from the dev extras (the PyPI wrapper; it fetches pyright for node on first use)."""
    found = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert found is not None, "pyright is missing: pip install -e '.[dev]'"
    return [found]


def run_pyright(*paths: Path) -> dict[str, object]:
    config = TYPING / "pyrightconfig.json"
    done = subprocess.run(
        [*pyright_command(), "--outputjson", "-p", str(config), "--pythonpath", sys.executable, *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


@cache
def pyright_on_both() -> dict[str, object]:
    """pyright's report on the passing and the failing file, once for the module's tests."""
    return run_pyright(PASSING, FAILING)


def mypy_said(output: str, path: Path | None = None) -> Said:
    """What mypy says on each line: of ``path`` only, or of every file but :data:`FAILING` (``None``)."""
    said: Said = defaultdict(list)
    for file, number, message in re.findall(r"^([^:\n]+\.py):(\d+): error: (.*)$", output, re.MULTILINE):
        if (ROOT / file).resolve() == path if path is not None else (ROOT / file).resolve() != FAILING:
            said[int(number)].append(message)
    return dict(said)


def pyright_said(report: dict[str, object], path: Path | None = None) -> Said:
    """What pyright says on each line: of ``path`` only, or of every file but :data:`FAILING` (``None``)."""
    said: Said = defaultdict(list)
    diagnostics = report["generalDiagnostics"]
    assert isinstance(diagnostics, list)
    for item in diagnostics:
        file = Path(item["file"]).resolve()
        if item["severity"] == "error" and (file == path if path is not None else file != FAILING):
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
    result = mypy_on_both()
    assert mypy_said(result.stdout) == {}, result.stdout + result.stderr  # no error but fail_agents.py's
    assert re.search(r"^Found \d+ errors? in 1 file \(checked 2 source files\)$", result.stdout, re.MULTILINE), result.stdout + result.stderr


def test_mypy_reports_each_marked_misuse_with_its_message_and_nothing_else() -> None:
    result = mypy_on_both()
    assert mypy_said(result.stdout, FAILING) == pinned("mypy"), result.stdout


def test_typed_agents_pass_pyright() -> None:
    report = pyright_on_both()
    assert pyright_said(report) == {}, report  # no error but fail_agents.py's
    summary = report["summary"]
    assert isinstance(summary, dict) and summary["filesAnalyzed"] == 2


def test_pyright_reports_each_marked_misuse_with_its_message_and_nothing_else() -> None:
    said = pyright_said(pyright_on_both(), FAILING)
    expected = pinned("pyright")
    assert said.keys() == expected.keys(), said
    for number, wanted in expected.items():
        assert len(said[number]) == len(wanted), (number, said[number])
        for message, text in zip(said[number], wanted, strict=True):
            rule, _, fragment = text.partition(": ")
            assert message.startswith(f"{rule}: ") and fragment in message, (number, message, text)
