"""Time session saves and loads per backend against hand-written floors.

Run: ``python benchmarks/bench_sessions.py [--quick]``. Prints medians and
ratios; the machine is shared and noisy, so only ratios from one run mean
anything. Targets (issue 3):

- JSON, 10,000 messages: save <= 1.3x and load <= 1.5x the floor (a hand-written
  dict + ``orjson.dumps`` + atomic write; read + ``orjson.loads`` + direct
  constructors).
- YAML, 10,000 messages: within 1.2x of the same floor written with raw libyaml
  (``CSafeDumper`` / ``CSafeLoader``).
- Redis, 20-message sessions from 64 concurrent tasks: save+load throughput
  >= 70% of raw ``SET``/``GET`` of the same bytes with the same client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import Agent, floor_load, floor_state_dict, make_agent  # noqa: E402
from bench_state import median_seconds  # noqa: E402

from statekit.session import JSONSession, SessionBase, YAMLSession  # noqa: E402
from statekit.session.redis import RedisSession  # noqa: E402
from statekit.testing import local_redis_server  # noqa: E402

TARGETS = {"json save": 1.3, "json load": 1.5, "yaml save": 1.2, "yaml load": 1.2, "redis save+load": 1 / 0.7}
LOOP = asyncio.new_event_loop()


def floor_write(path: Path, data: bytes) -> None:
    """Atomic, durable replace, written out by hand."""
    temp = path.with_name(f".floor-{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    os.fsync(folder)
    os.close(folder)


def json_floor(path: Path, agent: Agent) -> tuple[Callable[[], object], Callable[[], object]]:
    """Floor save and load for JSON files."""
    options = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE

    def save() -> None:
        floor_write(path, orjson.dumps({"agent": floor_state_dict(agent)}, option=options))

    def load() -> None:
        floor_load(agent, orjson.loads(path.read_bytes())["agent"])

    return save, load


def yaml_floor(path: Path, agent: Agent) -> tuple[Callable[[], object], Callable[[], object]]:
    """Floor save and load for YAML files, with raw libyaml classes."""

    def save() -> None:
        document = {"agent": floor_state_dict(agent)}
        raw = yaml.dump(document, Dumper=yaml.CSafeDumper, allow_unicode=True, sort_keys=False, encoding="utf-8")
        floor_write(path, raw)

    def load() -> None:
        floor_load(agent, yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)["agent"])  # noqa: S506

    return save, load


def ours(session: SessionBase, agent: Agent) -> tuple[Callable[[], object], Callable[[], object]]:
    """statekit's save and load (async, on one event loop)."""
    return (
        lambda: LOOP.run_until_complete(session.asave("bench", agent=agent)),
        lambda: LOOP.run_until_complete(session.aload("bench", agent=agent)),
    )


def compare(label: str, mine: Callable[[], object], floor: Callable[[], object], repeat: int) -> float:
    """Time both sides interleaved; print and return the ratio."""
    mine(), floor()
    mine_s = min(median_seconds(mine, repeat) for _ in range(3))
    floor_s = min(median_seconds(floor, repeat) for _ in range(3))
    ratio = mine_s / floor_s
    print(f"  {label:<16} statekit {mine_s * 1e3:9.2f} ms   floor {floor_s * 1e3:9.2f} ms   ratio {ratio:5.2f}x")
    return ratio


def bench_files(messages: int, repeat: int, folder: Path) -> dict[str, float]:
    """JSON and YAML sessions against their floors."""
    agent = make_agent(messages)
    ratios = {}
    for name, session, floor in (("json", JSONSession(folder), json_floor), ("yaml", YAMLSession(folder), yaml_floor)):
        my_save, my_load = ours(session, agent)
        floor_save, floor_load_ = floor(folder / f"floor.{name}", agent)
        ratios[f"{name} save"] = compare(f"{name} save", my_save, floor_save, repeat)
        ratios[f"{name} load"] = compare(f"{name} load", my_load, floor_load_, repeat)
    return ratios


async def _throughput(work: Callable[[int], Any], tasks: int, rounds: int) -> float:
    async def worker(index: int) -> None:
        for _ in range(rounds):
            await work(index)

    started = time.perf_counter()
    await asyncio.gather(*(worker(index) for index in range(tasks)))
    return tasks * rounds / (time.perf_counter() - started)


async def _redis_ratio(port: int, tasks: int, rounds: int) -> float:
    async with RedisSession("127.0.0.1", port, key_prefix="bench:", max_connections=tasks) as session:
        agents = [make_agent(20, seed=index) for index in range(tasks)]
        client = session.get_client()
        blobs = [session.codec.dumps({"agent": agent.state_dict()}) for agent in agents]

        async def mine(index: int) -> None:
            await session.asave(f"s{index}", agent=agents[index])
            await session.aload(f"s{index}", agent=agents[index])

        async def raw(index: int) -> None:
            await client.set(f"bench:raw:{index}", blobs[index])
            await client.get(f"bench:raw:{index}")

        async def by_hand(index: int) -> None:
            # The same work written by hand, as a ceiling: what any library doing
            # it (dump, encode, SET; GET, decode, build) could reach at best.
            key = f"bench:hand:{index}"
            await client.set(key, orjson.dumps({"agent": floor_state_dict(agents[index])}))
            raw_bytes = await client.get(key)
            assert raw_bytes is not None
            floor_load(agents[index], orjson.loads(raw_bytes)["agent"])

        for work in (mine, raw, by_hand):
            await _throughput(work, tasks, 5)  # warm up: connections, generated hooks
        results = [[await _throughput(w, tasks, rounds) for w in (mine, raw, by_hand)] for _ in range(5)]
    mine_rate, raw_rate, hand_rate = (sorted(r[i] for r in results)[2] for i in range(3))
    ratio = raw_rate / mine_rate
    print(f"  {'redis save+load':<16} statekit {mine_rate:9.0f} /s   raw {raw_rate:9.0f} /s   "
          f"{mine_rate / raw_rate:5.0%} of raw (ratio {ratio:4.2f}x)")
    print(f"  {'(by hand)':<16} floor    {hand_rate:9.0f} /s   the same work written by hand reaches "
          f"{hand_rate / raw_rate:5.0%} of raw; statekit reaches {mine_rate / hand_rate:5.0%} of it")
    return ratio


def main() -> int:
    """Run every comparison and report the targets."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and rounds")
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for messages in (1_000, 10_000):
            print(f"{messages:,} messages")
            ratios = bench_files(messages, repeat, Path(folder))
    print("64 tasks, 20-message sessions")
    with local_redis_server() as server:
        ratios["redis save+load"] = LOOP.run_until_complete(_redis_ratio(server.port, 64, 10 if args.quick else 40))
    print("targets (10,000 messages for files):")
    for op, target in TARGETS.items():
        print(f"  {op:<16} {ratios[op]:5.2f}x (target <= {target:.2f}x): {'ok' if ratios[op] <= target else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
