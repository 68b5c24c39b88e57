"""What keeping history costs: saves with keep_history=20 against the same saves with history off, and history() of a long one.

JSON files: one object saves a 10,000-message agent over and over (a small
field changed before each save, so each save is a new revision of the same size), with ``keep_history=0`` and with
``keep_history=20`` (the old head kept by a hard link in the save's own step,
the 21st pruned in it). Redis: 64 concurrent tasks each save and load their
own 20-message session, with and without history. ``history()`` of a JSON
session holding 1,000 kept revisions (it reads the head only). An append-only
turn at 100,000 messages with ``keep_history=20`` (one delta line naming its
revision) against a full save with history on, and its bytes.

Rounds alternate between the settings; figures are medians, GC on. Redis
needs ``redis-server`` on ``PATH``. Run alone with ``[--quick]`` or through
``benchmarks/run.py --only history``.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import make_agent  # noqa: E402
from bench_appends import compare_saves  # noqa: E402
from _timing import Job, interleaved, interleaved_rates  # noqa: E402

from statekit.session import JSONSession  # noqa: E402
from statekit.session.redis import RedisSession  # noqa: E402
from statekit.testing import local_redis_server  # noqa: E402

KEEP = 20
SAVES = 3
"""Saves per round of the JSON rows."""
OFF = "keep_history=0"
ON = f"keep_history={KEEP}"


def run_file_history(messages: int, runs: int) -> dict[str, float]:
    """Print and return the median seconds of a JSON save with and without history."""
    agents = {OFF: make_agent(messages, seed=1), ON: make_agent(messages, seed=1)}
    with tempfile.TemporaryDirectory() as folder:
        sessions = {OFF: JSONSession(folder, keep_history=0), ON: JSONSession(folder, keep_history=20)}

        def saver(name: str) -> Callable[[], None]:
            session, agent, turns = sessions[name], agents[name], itertools.count()

            def save() -> None:  # three saves a round: the first after the other setting's pays for its caches
                for _ in range(SAVES):
                    agent.active_groups = [f"turn {next(turns)}"]  # a new revision each save, the same size
                    session.save(name.replace("=", "-"), agent=agent)

            return save

        times = {name: seconds / SAVES for name, seconds in interleaved({name: saver(name) for name in sessions}, runs).items()}
        for session in sessions.values():
            session.close()
    print(f"\nJSON files, {messages:,} messages (one save; median, GC on)")
    for name, seconds in times.items():
        print(f"  {name:<18} | {seconds * 1e3:8.2f} ms | {seconds / times[OFF]:5.2f}x")
    return times


async def _redis_rates(port: int, tasks: int, rounds: int, runs: int, walks: dict[str, int]) -> dict[str, float]:
    async with (
        RedisSession("127.0.0.1", port, key_prefix="bench-history:", max_connections=tasks) as off,
        RedisSession("127.0.0.1", port, key_prefix="bench-history:", max_connections=tasks, keep_history=KEEP) as on,
    ):
        agents = [make_agent(20, seed=index) for index in range(tasks)]
        turns = [0] * tasks

        def turn(session: RedisSession, prefix: str) -> Job:
            async def run(index: int) -> None:
                agents[index].active_groups = [f"turn {turns[index]}"]  # a new revision each turn, the same size
                turns[index] += 1
                await session.asave(f"{prefix}{index}", agent=agents[index])
                await session.aload(f"{prefix}{index}", agent=agents[index])

            return run

        jobs: dict[str, Job] = {OFF: turn(off, "off"), ON: turn(on, "on")}
        return await interleaved_rates(jobs, tasks, rounds, runs, warm_up=3, collections=walks)


def run_redis_history(runs: int, rounds: int, tasks: int = 64) -> dict[str, float]:
    """Print and return turns per second with and without history on Redis, and how often the cyclic
    collector ran in each (a part of the gap, and of its swing from run to run: BENCHMARKS.md, "History")."""
    walks: dict[str, int] = {}
    with local_redis_server() as server:
        rates = asyncio.run(_redis_rates(server.port, tasks, rounds, runs, walks))
    print(f"\nRedis, {tasks} tasks, 20-message sessions (turns per second: save + load, GC on)")
    turns = tasks * rounds * runs
    for name, rate in rates.items():
        print(
            f"  {name:<18} | {rate:9.0f} /s | {rate / rates[OFF]:6.0%} of history off | "
            f"{walks[name] * 1000 / turns:5.1f} gen-0 collections per 1,000 turns"
        )
    return rates


def run_history_listing(revisions: int, runs: int) -> float:
    """Print and return the median seconds of history() of a JSON session with ``revisions`` kept revisions."""
    agent = make_agent(20, seed=3)
    with tempfile.TemporaryDirectory() as folder:
        session = JSONSession(folder, keep_history=None)
        for turn in range(revisions + 1):
            agent.active_groups = [f"turn {turn}"]
            session.save("long", agent=agent)
        assert len(session.history("long")) == revisions + 1
        seconds = []
        for _ in range(runs):
            start = time.perf_counter()
            session.history("long")
            seconds.append(time.perf_counter() - start)
        session.close()
    median = sorted(seconds)[len(seconds) // 2]
    print(f"\nhistory() of a JSON session with {revisions:,} kept revisions: {median * 1e3:.1f} ms (median, target < 50 ms)")
    return median


def run_history_turns(size: int, runs: int) -> dict[str, float]:
    """Print and return an append-only turn's share of a full save, both keeping 20 revisions, and its bytes."""
    saves = compare_saves(size, runs, keep_history=KEEP)
    share = saves["delta"] / saves["full"]
    print(
        f"\nAppend-only turn with {ON}, {size:,} messages ({saves['document'] / 1e6:.1f} MB): full save "
        f"{saves['full'] * 1e3:.2f} ms, a turn {saves['delta'] * 1e3:.2f} ms = {share:.2%} (target <= 2%), "
        f"{saves['bytes']:,.0f} bytes written (target <= 16 KB)"
    )
    return {**saves, "share": share}


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    run_file_history(10_000, 5 if quick else 21)
    run_redis_history(3 if quick else 7, 5 if quick else 20)
    run_history_listing(200 if quick else 1_000, 5 if quick else 11)
    run_history_turns(10_000 if quick else 100_000, 3 if quick else 7)
