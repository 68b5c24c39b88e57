"""What a lease adds to a turn: statekit against the same turn written by hand, with and without a lease.

Redis: 64 concurrent tasks each run turns on their own 20-message session, over
and over. A turn is a save and a load ("by hand": the no-copy floor dict +
``orjson.dumps`` + ``SET``; ``GET`` + ``orjson.loads`` + direct constructors, as
in bench_redis.py). Under a lease, by hand adds the least a lease can cost:
``SET lease token NX PX`` before and ``DEL lease`` after (two round trips, no
fencing token, no fence on the save); statekit adds ``alease`` and ``arelease``,
one script each, and its saves check the fence inside their own script.

JSON files: one object saves and loads a 1,000-message session, with and
without a lease around the turn (the lease record is read under the session's
lock by every save either way).

Rounds alternate between the implementations; figures are medians, GC on.
Needs ``redis-server`` on ``PATH``. Run alone with ``[--quick]`` or through
``benchmarks/run.py --only leases``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import make_agent  # noqa: E402
from _timing import Job, interleaved, interleaved_rates  # noqa: E402
from bench_redis import hand_turn  # noqa: E402

from statekit.session import JSONSession  # noqa: E402
from statekit.session.redis import RedisSession  # noqa: E402
from statekit.testing import local_redis_server  # noqa: E402

HAND = "by hand"
HAND_LEASED = "by hand, SET NX PX + DEL"
PLAIN = "statekit"
LEASED = "statekit under lease()"


async def _redis_rates(port: int, tasks: int, rounds: int, runs: int) -> dict[str, float]:
    async with RedisSession("127.0.0.1", port, key_prefix="bench-lease:", max_connections=tasks) as session:
        agents = [make_agent(20, seed=index) for index in range(tasks)]
        client = session.get_client()

        async def by_hand(index: int) -> None:
            await hand_turn(client, f"bench-lease:hand:{index}", agents[index])

        async def by_hand_leased(index: int) -> None:
            lease = f"bench-lease:hand-lease:{index}"
            assert await client.set(lease, b"1", nx=True, px=30_000)
            await by_hand(index)
            await client.delete(lease)

        async def plain(index: int) -> None:
            await session.asave(f"p{index}", agent=agents[index])
            await session.aload(f"p{index}", agent=agents[index])

        async def leased(index: int) -> None:
            async with session.alease(f"l{index}", ttl=30):
                await session.asave(f"l{index}", agent=agents[index])
                await session.aload(f"l{index}", agent=agents[index])

        jobs: dict[str, Job] = {HAND: by_hand, HAND_LEASED: by_hand_leased, PLAIN: plain, LEASED: leased}
        return await interleaved_rates(jobs, tasks, rounds, runs, warm_up=3)


def run_redis_leases(runs: int, rounds: int, tasks: int = 64) -> dict[str, float]:
    """Print and return turns per second for each implementation on Redis."""
    with local_redis_server() as server:
        rates = asyncio.run(_redis_rates(server.port, tasks, rounds, runs))
    print(f"\nRedis, {tasks} tasks, 20-message sessions (turns per second: save + load, GC on)")
    for name, rate in rates.items():
        print(f"  {name:<28} | {rate:9.0f} /s | {rate / rates[HAND]:6.0%} of by hand")
    print(f"  a lease keeps {rates[HAND_LEASED] / rates[HAND]:.0%} of the turns by hand, {rates[LEASED] / rates[PLAIN]:.0%} with statekit")
    return rates


def run_file_leases(messages: int, runs: int) -> dict[str, float]:
    """Print and return the median seconds of a JSON-file turn with and without a lease."""
    agent = make_agent(messages, seed=1)
    with tempfile.TemporaryDirectory() as folder:
        session = JSONSession(folder)

        def plain() -> None:
            session.save("plain", agent=agent)
            session.load("plain", agent=agent)

        def leased() -> None:
            with session.lease("leased", ttl=30):
                session.save("leased", agent=agent)
                session.load("leased", agent=agent)

        times = interleaved({PLAIN: plain, LEASED: leased}, runs)
        session.close()
    print(f"\nJSON files, {messages:,} messages (one turn: save + load; median, GC on)")
    for name, seconds in times.items():
        print(f"  {name:<28} | {seconds * 1e3:8.2f} ms | {seconds / times[PLAIN]:5.2f}x")
    return times


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    run_redis_leases(3 if quick else 7, 5 if quick else 20)
    run_file_leases(1_000, 5 if quick else 21)
