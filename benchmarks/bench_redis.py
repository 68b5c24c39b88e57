"""Small Redis sessions from many tasks: statekit against the same work written by hand.

64 concurrent tasks each save and load a 20-message session, over and over.
"by hand" does the same work with the same client: the no-copy floor dict +
``orjson.dumps`` + ``SET``; ``GET`` + ``orjson.loads`` + direct constructors.
"raw" only moves the same bytes (``SET`` + ``GET``), as a ceiling nobody doing
the work reaches. Rounds alternate between the three; the figures are medians.

Needs ``redis-server`` on ``PATH``; started on a free loopback port and stopped
at the end. Run through ``python benchmarks/run.py``, or alone with ``[--quick]``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import floor_document, floor_load_fresh, make_agent  # noqa: E402
from _timing import Job, interleaved_rates  # noqa: E402

from statekit.session.redis import RedisSession  # noqa: E402
from statekit.testing import local_redis_server  # noqa: E402




async def hand_turn(client: Any, key: str, agent: Any) -> None:
    """The floor's save and load of one session, by hand with the same client: the no-copy document +
    ``orjson.dumps`` + ``SET``; ``GET`` + ``orjson.loads`` + direct constructors."""
    await client.set(key, orjson.dumps(floor_document(agent)))
    raw = await client.get(key)
    assert raw is not None
    floor_load_fresh(agent, orjson.loads(raw)["agent"])


async def _measure(port: int, tasks: int, rounds: int, runs: int) -> dict[str, float]:
    async with RedisSession("127.0.0.1", port, key_prefix="bench:", max_connections=tasks) as session:
        agents = [make_agent(20, seed=index) for index in range(tasks)]
        client = session.get_client()
        blobs = [orjson.dumps(floor_document(agent)) for agent in agents]

        async def statekit(index: int) -> None:
            await session.asave(f"s{index}", agent=agents[index])
            await session.aload(f"s{index}", agent=agents[index])

        async def by_hand(index: int) -> None:
            await hand_turn(client, f"bench:hand:{index}", agents[index])

        async def raw(index: int) -> None:
            await client.set(f"bench:raw:{index}", blobs[index])
            await client.get(f"bench:raw:{index}")

        jobs: dict[str, Job] = {"by hand (floor)": by_hand, "statekit RedisSession": statekit, "raw SET+GET": raw}
        return await interleaved_rates(jobs, tasks, rounds, runs, warm_up=3)



def run_redis(runs: int, rounds: int, tasks: int = 64) -> dict[str, float]:
    """Print and return save+load pairs per second for each implementation."""
    with local_redis_server() as server:
        rates = asyncio.run(_measure(server.port, tasks, rounds, runs))
    hand = rates["by hand (floor)"]
    print(f"\nRedis, {tasks} tasks, 20-message sessions (save+load pairs per second, GC on)")
    for name, rate in rates.items():
        print(f"  {name:<28} | {rate:9.0f} /s | {rate / hand:6.0%} of by hand")
    return rates


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    run_redis(3 if quick else 7, 5 if quick else 20)
