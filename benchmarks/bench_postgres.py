"""PostgresSession against the same work written by hand with psycopg, on one throw-away server.

``python benchmarks/bench_postgres.py [--quick]``

- save / load of one agent of 1,000 and 10,000 messages: statekit against "by
  hand": the no-copy floor dict, ``orjson.dumps``, and one ``execute`` of a
  compare-and-set (``INSERT ... ON CONFLICT DO UPDATE ... WHERE revision = %s``
  into a ``jsonb`` column); ``SELECT doc::text`` + ``orjson.loads`` + direct
  constructors to load. Interleaved rounds, medians, GC on.
- 64 tasks each saving and loading its own 20-message session, over and over
  (pairs per second), statekit against the same work by hand (a connection
  per task).
- an append-only turn (one message appended to a 100,000-message memory)
  against a full save of it: target at most 2%.

Needs Debian's ``postgresql`` (``initdb``/``pg_ctl``): a cluster is made in a
temporary folder, started on a free loopback port and removed at the end.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import Agent, floor_document, floor_load_fresh, make_agent  # noqa: E402
from _timing import Job, interleaved, interleaved_rates, table  # noqa: E402
from bench_appends import Memory, Messages  # noqa: E402

from statekit.session.postgres import PostgresSession  # noqa: E402
from statekit.testing import local_postgres_server  # noqa: E402

HAND_TABLE = """CREATE TABLE IF NOT EXISTS hand (
    id text PRIMARY KEY, revision text NOT NULL, doc jsonb NOT NULL)"""
HAND_SAVE = """INSERT INTO hand (id, revision, doc) VALUES (%(id)s, %(new)s, %(doc)s::jsonb)
ON CONFLICT (id) DO UPDATE SET revision = EXCLUDED.revision, doc = EXCLUDED.doc WHERE hand.revision = %(old)s"""
HAND_LOAD = "SELECT revision, doc::text FROM hand WHERE id = %(id)s"

Conn = psycopg.AsyncConnection[Any]


class ByHand:
    """Saving and loading an agent by hand: a compare-and-set on a revision, in one execute."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.revisions: dict[str, str] = {}

    async def save(self, key: str, agent: Agent) -> None:
        data = orjson.dumps(floor_document(agent))
        new = hashlib.sha1(data, usedforsecurity=False).hexdigest()
        params = {"id": key, "new": new, "doc": data.decode(), "old": self.revisions.get(key, "")}
        cursor = await self.conn.execute(HAND_SAVE, params)
        assert cursor.rowcount == 1, "a conflict: the benchmark has one writer per key"
        self.revisions[key] = new

    async def load(self, key: str, agent: Agent) -> None:
        cursor = await self.conn.execute(HAND_LOAD, {"id": key})
        row = await cursor.fetchone()
        assert row is not None
        self.revisions[key] = row[0]
        floor_load_fresh(agent, orjson.loads(row[1])["agent"])


def _sizes(runner: asyncio.Runner, dsn: str, sizes: list[int], runs: int) -> dict[int, dict[str, dict[str, float]]]:
    session = PostgresSession.from_url(dsn, table="bench_sessions", timeout=120)
    conn = runner.run(psycopg.AsyncConnection.connect(dsn, autocommit=True))
    runner.run(conn.execute(HAND_TABLE))
    hand = ByHand(conn)
    out = {}
    for n in sizes:
        agent = make_agent(n)
        loaded_s, loaded_h = make_agent(1), make_agent(1)
        saves: dict[str, Callable[[], object]] = {
            "by hand (psycopg + orjson)": lambda: runner.run(hand.save(f"a{n}", agent)),
            "statekit PostgresSession": lambda: runner.run(session.asave(f"a{n}", agent=agent)),
        }
        loads: dict[str, Callable[[], object]] = {
            "by hand (psycopg + orjson)": lambda: runner.run(hand.load(f"a{n}", loaded_h)),
            "statekit PostgresSession": lambda: runner.run(session.aload(f"a{n}", agent=loaded_s)),
        }
        times = {"save": interleaved(saves, runs), "load": interleaved(loads, runs)}
        assert loaded_s.memory.content == agent.memory.content == loaded_h.memory.content
        out[n] = table(f"PostgreSQL, one agent of {n:,} messages (ms, GC on)", times, "by hand (psycopg + orjson)")
    runner.run(session.aclose())
    runner.run(conn.close())
    return out





async def _tasks(dsn: str, tasks: int, rounds: int, runs: int) -> dict[str, float]:
    conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(tasks)]
    await conns[0].execute(HAND_TABLE)
    hands = [ByHand(conn) for conn in conns]
    agents = [make_agent(20, seed=index) for index in range(tasks)]
    async with PostgresSession.from_url(dsn, table="bench_small", timeout=120, pool_size=tasks) as session:

        async def statekit(index: int) -> None:
            await session.asave(f"s{index}", agent=agents[index])
            await session.aload(f"s{index}", agent=agents[index])

        async def by_hand(index: int) -> None:
            await hands[index].save(f"s{index}", agents[index])
            await hands[index].load(f"s{index}", agents[index])

        jobs: dict[str, Job] = {"by hand (psycopg + orjson)": by_hand, "statekit PostgresSession": statekit}
        rates = await interleaved_rates(jobs, tasks, rounds, runs)
    for conn in conns:
        await conn.close()
    return rates


def _appends(runner: asyncio.Runner, dsn: str, size: int, runs: int) -> dict[str, float]:
    messages = Messages()
    full, delta = (PostgresSession.from_url(dsn, table=name, timeout=120) for name in ("bench_full", "bench_delta"))
    full_memory = Memory(content=messages.take(size))
    delta_memory = Memory(content=list(full_memory.content))
    runner.run(full.asave("chat", memory=full_memory))
    runner.run(delta.asave("chat", memory=delta_memory))

    def full_save() -> None:
        full_memory.note = str(time.perf_counter())
        runner.run(full.asave("chat", memory=full_memory))

    def delta_save() -> None:
        delta_memory.content.append(messages.take(1)[0])
        runner.run(delta.asave("chat", memory=delta_memory))

    times = interleaved({"full save": full_save, "append-only turn": delta_save}, runs)
    for session in (full, delta):
        runner.run(session.aclose())
    return times


def run_postgres(sizes: list[int], runs: int, rounds: int, append_size: int, tasks: int = 64) -> dict[str, float]:
    """Print every table; return the ratios the targets read."""
    with local_postgres_server(options=["max_connections=200"]) as server, asyncio.Runner() as runner:
        by_size = _sizes(runner, server.dsn, sizes, runs)
        rates = runner.run(_tasks(server.dsn, tasks, rounds, runs))
        turns = _appends(runner, server.dsn, append_size, runs)
    hand = rates["by hand (psycopg + orjson)"]
    print(f"\nPostgreSQL, {tasks} tasks, 20-message sessions (save+load pairs per second, GC on)")
    for name, rate in rates.items():
        print(f"  {name:<28} | {rate:9.0f} /s | {rate / hand:6.0%} of by hand")
    share = turns["append-only turn"] / turns["full save"]
    print(f"\nPostgreSQL, {append_size:,} messages: full save {turns['full save'] * 1e3:.1f} ms, "
          f"append-only turn {turns['append-only turn'] * 1e3:.2f} ms ({share:.2%} of a full save; target <= 2%)")
    out = {f"save {n}": ratios["save"]["statekit PostgresSession"] for n, ratios in by_size.items()}
    out |= {f"load {n}": ratios["load"]["statekit PostgresSession"] for n, ratios in by_size.items()}
    return out | {"tasks share": rates["statekit PostgresSession"] / hand, "turn share": share}


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    run_postgres([1_000, 10_000], 3 if quick else 7, 3 if quick else 10, 10_000 if quick else 100_000)
