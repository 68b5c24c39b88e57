"""What the revision check costs on a save: with it, and without it (``overwrite=True``).

Run: ``python benchmarks/bench_revisions.py [--quick]``. Issue 8's target: the
check costs at most 10% on

- the 10,000-message JSON save (with the check: lock, read the stored file,
  hash it, compare, write; without: lock, write), and
- the Redis small-session benchmark (20-message sessions, 64 concurrent tasks,
  save + load; with the check a save is a Lua compare-and-set, without a ``SET``).

Calls alternate (check, no check, no check, check...) and the medians are
compared; the machine is shared and noisy, so read the ratio, not the
milliseconds, and run it twice.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import Agent, make_agent  # noqa: E402

from statekit.session import JSONSession, revision_of  # noqa: E402
from statekit.session.redis import RedisSession  # noqa: E402
from statekit.testing import local_redis_server  # noqa: E402

TARGET = 1.10
"""The most the check may cost: 10%."""


async def _timed(work: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def _compare(
    with_check: Callable[[], Awaitable[object]], without: Callable[[], Awaitable[object]], repeat: int
) -> tuple[float, float]:
    """Median seconds of both sides, call by call, alternating which goes first."""
    await with_check(), await without()
    checked, plain = [], []
    for index in range(repeat):
        if index % 2:
            checked.append(await _timed(with_check))
            plain.append(await _timed(without))
        else:
            plain.append(await _timed(without))
            checked.append(await _timed(with_check))
    return statistics.median(checked), statistics.median(plain)


async def json_save(messages: int, repeat: int) -> float:
    """The 10,000-message JSON save, with and without the check."""
    agent = make_agent(messages)
    with tempfile.TemporaryDirectory() as folder:
        session = JSONSession(folder)
        await session.asave("bench", agent=agent)  # the session now knows its revision
        checked, plain = await _compare(
            lambda: session.asave("bench", agent=agent),
            lambda: session.asave("bench", overwrite=True, agent=agent),
            repeat,
        )
        raw = session.session_path("bench").read_bytes()
        hashed = statistics.median([await _timed(lambda: asyncio.sleep(0, revision_of(raw))) for _ in range(9)])
    _print(f"json save, {messages:,} messages", checked, plain)
    print(f"  (hashing the {len(raw) / 1e6:.1f} MB document alone: {hashed * 1e3:.2f} ms)")
    return checked / plain


async def redis_small(port: int, tasks: int, rounds: int, repeat: int) -> float:
    """64 tasks saving and loading 20-message sessions, with and without the check."""
    agents: list[Agent] = [make_agent(20, seed=index) for index in range(tasks)]
    async with RedisSession("127.0.0.1", port, key_prefix="bench-rev:", max_connections=tasks) as session:

        def batch(overwrite: bool) -> Callable[[], Awaitable[object]]:
            async def one(index: int) -> None:
                await session.asave(f"s{index}", overwrite=overwrite, agent=agents[index])
                await session.aload(f"s{index}", agent=agents[index])

            async def run() -> None:
                for _ in range(rounds):
                    await asyncio.gather(*(one(index) for index in range(tasks)))

            return run

        checked, plain = await _compare(batch(False), batch(True), repeat)
    per_op = tasks * rounds
    print(f"  redis save+load, 20 messages, {tasks} tasks: with the check {per_op / checked:8.0f} /s   "
          f"without {per_op / plain:8.0f} /s   cost {checked / plain - 1:+6.1%}  "
          f"{'ok' if checked / plain <= TARGET else 'MISSED'} (target <= +10%)")
    return checked / plain


def _print(label: str, checked: float, plain: float) -> None:
    verdict = "ok" if checked / plain <= TARGET else "MISSED"
    print(f"  {label}: with the check {checked * 1e3:8.2f} ms   without {plain * 1e3:8.2f} ms   "
          f"cost {checked / plain - 1:+6.1%}  {verdict} (target <= +10%)")


def main() -> int:
    """Measure both and print the costs."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    print("revision check: cost on a save (medians of interleaved calls)")
    asyncio.run(json_save(10_000, 11 if args.quick else 41))
    with local_redis_server() as server:
        asyncio.run(redis_small(server.port, 64, 5, 11 if args.quick else 41))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
