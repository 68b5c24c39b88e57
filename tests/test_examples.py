"""The examples run as written, each in a subprocess in a fresh directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from statekit.state.config import from_config
from statekit.state.schema import json_schema
from statekit.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str, cwd: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    """Run an example; return its output lines (it must succeed, quietly on stderr)."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def test_seed_from_config_builds_then_restores_and_seeds(tmp_path: Path) -> None:
    first = run("seed_from_config.py", tmp_path, "Hello!")
    assert first == [
        "new agent from agent.yaml: Friday, tool groups ['web', 'math']",
        "Friday: You said 'Hello!'. I remember 0 earlier messages.",
        "a typo is caught: line 15: active_gruops: unknown key; did you mean 'active_groups'?",
    ]
    second = run("seed_from_config.py", tmp_path, "Still there?")
    assert second[0] == "restored Friday from the session; agent.yaml applied, kept from the session: memory, turns"
    assert second[1] == "Friday: You said 'Still there?'. I remember 2 earlier messages."
    saved = orjson.loads((tmp_path / "sessions" / "seeded.json").read_bytes())["agent"]
    assert saved["sys_prompt"] == "You are Friday, a helpful echo.\nKeep your answers short.\n"
    assert (saved["turns"], len(saved["memory"]["content"])) == (2, 4)


def test_edit_yaml_session_fixes_the_empty_turn(tmp_path: Path) -> None:
    lines = run("edit_yaml_session.py", tmp_path)
    assert lines == [
        "the model crashed: the model did not answer",
        "cannot load: sessions/chat.yaml:4:3: memory.turns: turn 3 is an empty assistant turn: "
        "delete it or write its content",
        "deleting from chat.yaml:",
        "  - role: assistant",
        "    content: ''",
        "loaded after the fix: 3 turns, the last by user",
    ]
    fixed = yaml.safe_load((tmp_path / "sessions" / "chat.yaml").read_text(encoding="utf-8"))
    assert [turn["role"] for turn in fixed["memory"]["turns"]] == ["user", "assistant", "user"]


@pytest.mark.redis
def test_redis_session_example(tmp_path: Path, redis_server: Any) -> None:
    env = {"STATEKIT_REDIS_HOST": redis_server.host, "STATEKIT_REDIS_PORT": str(redis_server.port)}
    lines = run("redis_session.py", tmp_path, "Hello from A", env=env)
    assert lines == [
        "Friday: You said 'Hello from A'. I remember 0 earlier messages.",
        "saved under statekit-example:user_id:alice:session:chat:state",
        "loaded elsewhere: Friday, turn 1, 2 messages",
        "alice's sessions: ['chat']",
        "deleted; alice's sessions: []",
    ]


def test_agent_yaml_is_a_valid_config(capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"{EXAMPLES / 'typed_agent.py'}:EchoAgent"
    assert main(["validate", str(EXAMPLES / "agent.yaml"), "--class", spec]) == 0
    assert capsys.readouterr().out.endswith("agent.yaml: valid EchoAgent\n")


def test_agent_schema_json_is_up_to_date() -> None:
    """examples/agent.schema.json is what `statekit schema` gives for EchoAgent today."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        from typed_agent import EchoAgent
    finally:
        sys.path.remove(str(EXAMPLES))
    written = orjson.loads((EXAMPLES / "agent.schema.json").read_bytes())
    assert written == json_schema(EchoAgent), (
        "regenerate: statekit schema examples/typed_agent.py:EchoAgent -o examples/agent.schema.json"
    )
    assert from_config(EchoAgent, EXAMPLES / "agent.yaml").name == "Friday"


def test_versions_story_every_old_session_loads(tmp_path: Path) -> None:
    """docs/versions.md: one agent through three versions, then version 1 meets newer data."""
    assert run("versions_v1.py", tmp_path)[0].startswith("saved chat and archived: {'name': 'Friday', 'turns': 4")
    assert run("versions_v2.py", tmp_path)[0] == "loaded version 1: 4 turns with Ada Lovelace"
    third = run("versions_v3.py", tmp_path)
    assert third[:2] == [
        "chat: 5 turns, Ada, tools ['search'], notes ['likes tea', 'lives in London']",
        "archived: 1 turns, Alan, tools [], notes []",
    ]
    saved = orjson.loads((tmp_path / "sessions" / "chat.json").read_bytes())["agent"]
    assert (saved["__version__"], saved["memory"]["__version__"], saved["memory"]["notes"][0]) == (
        3,
        2,
        {"__version__": 2, "body": "likes tea"},
    )
    assert run("versions_v1.py", tmp_path, "load") == [
        "version 1 refuses: sessions/chat.json: agent: the data is version 3 but Agent is version 1: "
        "it was saved by newer code; nothing was loaded"
    ]
