"""SQLite sessions (issue 28): statekit's ``SQLiteSession`` against the same work written by hand with sqlite3 + orjson.

``python benchmarks/bench_sqlite.py [--quick] [--sizes 1000,10000] [--turn-size 100000]``

- save/load of 1,000 / 10,000 messages. "by hand" does what a save and a load
  must do with nothing general about it: the no-copy floor dict, ``orjson.dumps``,
  then a compare-and-set ``UPDATE ... WHERE revision = ?`` (its SHA-1 computed)
  in ``BEGIN IMMEDIATE`` on a connection in WAL mode with ``synchronous=FULL``
  (as statekit's); a load is ``SELECT`` + ``orjson.loads`` + direct
  constructors. It runs on the calling thread (statekit hops to a worker
  thread, off the event loop). Interleaved, medians, ratios to by hand.
- 64 asyncio tasks saving and loading a 20-message session each, statekit
  against the same by hand (each call in a worker thread, one connection per thread).
- an append-only turn (one message appended to a memory of 100,000) against a
  full save of the same memory (target: at most 2%).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import Agent, floor_document, floor_load_fresh, make_agent  # noqa: E402
from _timing import Work, interleaved, interleaved_rates, table  # noqa: E402
from bench_appends import Memory, Messages  # noqa: E402

from statekit.session.sqlite import SQLiteSession  # noqa: E402

STATEKIT = "statekit SQLiteSession"
HAND = "by hand (sqlite3 + orjson)"
TURNS_PER_ROUND = 5

_HAND_TABLE = """CREATE TABLE IF NOT EXISTS hand (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, document TEXT NOT NULL, revision TEXT,
    PRIMARY KEY (user_id, session_id))"""


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
    connection.text_factory = bytes
    if connection.execute("PRAGMA journal_mode").fetchone()[0] != b"wal":  # a file's mode, set once: switching
        connection.execute("PRAGMA journal_mode = WAL")  # it takes the file whole, without waiting for others
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute(_HAND_TABLE)
    return connection


class ByHand:
    """One session's save and load, by hand: the least work that writes the same JSON with a compare-and-set."""

    def __init__(self, connection: sqlite3.Connection, session_id: str) -> None:
        self.connection, self.session_id, self.revision = connection, session_id, ""

    def save(self, agent: Agent) -> None:
        """Encode, then ``UPDATE`` only over the revision last seen (``INSERT`` the first time)."""
        data = orjson.dumps(floor_document(agent))
        revision = hashlib.sha1(data, usedforsecurity=False).hexdigest()
        where = ("", self.session_id)
        self.connection.execute("BEGIN IMMEDIATE")
        if self.revision:
            sql = "UPDATE hand SET document = CAST(? AS TEXT), revision = ? WHERE user_id = ? AND session_id = ? AND revision = ?"
            written = self.connection.execute(sql, (data, revision, *where, self.revision)).rowcount
        else:
            sql = "INSERT INTO hand VALUES (?, ?, CAST(? AS TEXT), ?) ON CONFLICT DO NOTHING"
            written = self.connection.execute(sql, (*where, data, revision)).rowcount
        self.connection.execute("COMMIT")
        assert written == 1, "the by-hand compare-and-set conflicted"
        self.revision = revision

    def load(self, agent: Agent) -> None:
        """``SELECT``, decode, build."""
        row = self.connection.execute(
            "SELECT document, revision FROM hand WHERE user_id = ? AND session_id = ?", ("", self.session_id)
        ).fetchone()
        floor_load_fresh(agent, orjson.loads(row[0])["agent"])
        self.revision = row[1].decode()


def run_save_load(sizes: list[int], runs: int) -> dict[int, dict[str, dict[str, float]]]:
    """Print the save/load tables; return ``{size: {column: {impl: ratio}}}``."""
    out = {}
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory() as folder:
        session = SQLiteSession(Path(folder) / "statekit.db")
        connection = _connect(Path(folder) / "hand.db")
        for n in sizes:
            agent = make_agent(n)
            hand = ByHand(connection, f"bench-{n}")
            saves: dict[str, Work] = {
                HAND: lambda: hand.save(agent),
                STATEKIT: lambda: loop.run_until_complete(session.asave(f"bench-{n}", agent=agent)),
            }
            loads: dict[str, Work] = {
                HAND: lambda: hand.load(agent),
                STATEKIT: lambda: loop.run_until_complete(session.aload(f"bench-{n}", agent=agent)),
            }
            columns = {"save": interleaved(saves, runs), "load": interleaved(loads, runs)}
            out[n] = table(f"SQLite session, {n:,} messages", columns, floor=HAND)
        loop.run_until_complete(session.aclose())
        connection.close()
    loop.close()
    return out


def run_tasks(runs: int, rounds: int, tasks: int = 64) -> dict[str, float]:
    """Print and return save+load pairs per second of ``tasks`` tasks on 20-message sessions."""
    with tempfile.TemporaryDirectory() as folder:
        rates = asyncio.run(_measure_tasks(Path(folder), tasks, rounds, runs))
    hand = rates[HAND]
    print(f"\nSQLite, {tasks} tasks, 20-message sessions (save+load pairs per second, GC on)")
    for name, rate in rates.items():
        print(f"  {name:<28} | {rate:9.0f} /s | {rate / hand:6.0%} of by hand")
    return rates


async def _measure_tasks(folder: Path, tasks: int, rounds: int, runs: int) -> dict[str, float]:
    session = SQLiteSession(folder / "statekit.db", timeout=60)
    agents = [make_agent(20, seed=index) for index in range(tasks)]
    local = threading.local()
    made: list[sqlite3.Connection] = [_connect(folder / "hand.db")]  # the file made in WAL mode before the threads open it

    def own(index: int) -> ByHand:
        """This thread's connection (one per thread, as sqlite3 wants), for session ``index``."""
        if not hasattr(local, "connection"):
            local.connection = _connect(folder / "hand.db")
            made.append(local.connection)
        hand = ByHand(local.connection, f"s{index}")
        hand.revision = revisions.get(index, "")
        return hand

    revisions: dict[int, str] = {}

    def hand_pair(index: int) -> None:
        hand = own(index)
        hand.save(agents[index])
        hand.load(agents[index])
        revisions[index] = hand.revision

    async def by_hand(index: int) -> None:
        await asyncio.to_thread(hand_pair, index)

    async def statekit(index: int) -> None:
        await session.asave(f"s{index}", agent=agents[index])
        await session.aload(f"s{index}", agent=agents[index])

    jobs = {HAND: by_hand, STATEKIT: statekit}
    rates = await interleaved_rates(jobs, tasks, rounds, runs)
    await session.aclose()
    for connection in made:
        connection.close()
    return rates



def run_turn(size: int, runs: int) -> dict[str, float]:
    """Median seconds of a full save and of an append-only turn (one message) at ``size`` messages; print them."""
    messages = Messages()
    with tempfile.TemporaryDirectory() as folder:
        full = SQLiteSession(Path(folder) / "full.db")
        turned = SQLiteSession(Path(folder) / "turns.db")
        full_memory = Memory(content=messages.take(size))
        turn_memory = Memory(content=list(full_memory.content))
        full.save("chat", memory=full_memory)
        turned.save("chat", memory=turn_memory)

        def full_save() -> None:
            full_memory.note = str(time.perf_counter())  # not an append: the whole document is written
            full.save("chat", memory=full_memory)

        def turns() -> None:
            for _ in range(TURNS_PER_ROUND):
                turn_memory.content.append(messages.take(1)[0])
                turned.save("chat", memory=turn_memory)

        times = interleaved({"full": full_save, "turn": turns}, runs)
        times["turn"] /= TURNS_PER_ROUND
        full.close()
        turned.close()
    ratio = times["turn"] / times["full"]
    print(
        f"\nSQLite append-only turn at {size:,} messages: full save {times['full'] * 1e3:.1f} ms, "
        f"turn (one message appended) {times['turn'] * 1e3:.2f} ms = {ratio:.2%} of a full save (target <= 2%)"
    )
    return {**times, "ratio": ratio}


def main() -> int:
    """Run every SQLite benchmark; exit 1 when the append target is missed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 messages, 3 runs, a turn at 10,000")
    parser.add_argument("--runs", type=int, default=None, help="interleaved runs per figure (default 7; 3 with --quick)")
    parser.add_argument("--sizes", default=None, help="comma-separated message counts (default 1000,10000)")
    parser.add_argument("--turn-size", type=int, default=None, help="messages in the append-only turn (default 100000)")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 7)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [1_000] if args.quick else [1_000, 10_000]
    run_save_load(sizes, runs)
    run_tasks(runs, 5 if args.quick else 20)
    turn = run_turn(args.turn_size or (10_000 if args.quick else 100_000), runs)
    return 0 if turn["ratio"] <= 0.02 or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
