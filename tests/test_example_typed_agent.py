"""The README's main example runs as written and remembers across runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "typed_agent.py"


def run(cwd: Path, text: str) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), text], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    )
    return result.stdout


def test_typed_agent_remembers_across_runs(tmp_path: Path) -> None:
    first = run(tmp_path, "Hello, agent!")
    second = run(tmp_path, "What did I say?")
    assert "I remember 0 earlier messages" in first
    assert "I remember 2 earlier messages" in second and "turn 2; 4 messages" in second
    (saved,) = (tmp_path / "sessions").rglob("*.json")
    agent = json.loads(saved.read_text(encoding="utf-8"))["agent"]
    assert agent["turns"] == 2
    assert [m["role"] for m in agent["memory"]["content"]] == ["user", "assistant"] * 2
    assert agent["memory"]["content"][2]["content"] == "What did I say?"
