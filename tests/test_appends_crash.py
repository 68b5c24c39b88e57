"""SIGKILL during delta saves and compactions: a load always gives the last completed save or the one in flight."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from append_models import Agent
from statekit.session import JSONSession

WORKER = """
import sys
sys.path.insert(0, sys.argv[2])
from append_models import Agent, Msg
from statekit.session import JSONSession, _appends

_appends.COMPACT_MIN_BYTES = 3_000  # compact every ~60 saves: kills land in compactions too
session, agent = JSONSession(sys.argv[1]), Agent()
session.load("chat", agent=agent)
count = len(agent.memory.content)
print("ready", flush=True)
while True:
    agent.memory.content.append(Msg("user", str(count)))
    count += 1
    if count % 170 == 0:
        agent.memory.note = str(count)  # a full rewrite now and then
    session.save("chat", agent=agent)
    print(count, flush=True)
"""

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")


def _check(folder: Path, completed: int) -> int:
    agent = Agent()
    JSONSession(folder).load("chat", agent=agent)
    count = len(agent.memory.content)
    assert count in (completed, completed + 1), (count, completed)
    assert [m.text for m in agent.memory.content] == [str(index) for index in range(count)]
    assert agent.memory.note == (str(count // 170 * 170) if count >= 170 else "")
    return count


@pytest.mark.slow
def test_kills_never_lose_or_tear_a_save(tmp_path: Path) -> None:
    session, agent = JSONSession(tmp_path), Agent()
    session.save("chat", agent=agent)
    tests = str(Path(__file__).parent)
    rng = random.Random(12)
    completed, kills = 0, 0
    # at least 15 kills, and on until the saves went past two full rewrites and many compactions:
    # a loaded machine completes fewer saves per kill, so it takes more kills, never a failure
    while kills < 15 or completed <= 300:
        assert kills < 300, f"{kills} kills and only {completed} saves completed"
        child = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), tests], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(child.pid, signal.SIGKILL)
        output, _ = child.communicate(timeout=30)
        printed = [int(line) for line in output.split()]
        completed = printed[-1] if printed else completed
        completed = _check(tmp_path, completed)
        kills += 1
