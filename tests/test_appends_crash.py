"""SIGKILL during delta saves and compactions: a load always gives the last completed save or the one in flight."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from append_models import Agent, Msg
from statekit.session import JSONSession, _appends


def _saver(folder: Path, progress: int) -> None:
    """A forked child: save forever, one message more each time, and report every completed save on ``progress``."""
    _appends.COMPACT_MIN_BYTES = 3_000  # compact every ~60 saves: kills land in compactions too
    session, agent = JSONSession(folder), Agent()
    session.load("chat", agent=agent)
    count = len(agent.memory.content)
    os.write(progress, b"ready\n")
    while True:
        agent.memory.content.append(Msg("user", str(count)))
        count += 1
        if count % 170 == 0:
            agent.memory.note = str(count)  # a full rewrite now and then
        session.save("chat", agent=agent)
        os.write(progress, f"{count}\n".encode())


def _start_saver(folder: Path) -> tuple[int, int]:
    """Fork a :func:`_saver` (cheaper than a fresh interpreter, which imports statekit again): its pid, the pipe's read end."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test
        os.close(read_end)
        try:
            _saver(folder, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


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
    rng = random.Random(12)
    completed, kills = 0, 0
    # at least 15 kills, and on until the saves went past two full rewrites and many compactions:
    # a loaded machine completes fewer saves per kill, so it takes more kills, never a failure
    while kills < 15 or completed <= 300:
        assert kills < 300, f"{kills} kills and only {completed} saves completed"
        pid, read_end = _start_saver(tmp_path)
        with open(read_end, encoding="utf-8") as progress:
            assert progress.readline() == "ready\n"
            time.sleep(rng.uniform(0.0, 0.3))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            printed = [int(line) for line in progress.read().split()]
        completed = printed[-1] if printed else completed
        completed = _check(tmp_path, completed)
        kills += 1
