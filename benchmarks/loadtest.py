"""Load test: many workers, one store, no lost updates and no torn reads.

Run: ``python benchmarks/loadtest.py [--seconds 30] [--backend redis|json|both]``.

64 workers (spread over a few processes, each worker with its own session
object) share 1,000 sessions for a bounded time: half of them ``update`` a
random session (a counter, plus text derived from it), half load a random
session and check that it is a whole document some writer wrote (its text
matches its counter) and that, for that reader, counters never go back. At the
end every session's stored counter must equal the number of updates that
returned successfully for it: 0 lost. Prints throughput and p50/p99 latency.

This is a script, not a test: figures depend on the machine (see README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import random
import statistics
import tempfile
import time
from collections import Counter as Tally
from collections.abc import Callable

import attrs

from statekit import ConflictError, StateModule, state_field, stateful
from statekit.errors import BackendUnavailableError
from statekit.session import JSONSession, SessionBase
from statekit.session.redis import RedisSession
from statekit.testing import local_redis_server


@stateful
class Shared(StateModule):
    """The state every session holds: a counter and text that must agree with it."""

    count: int = state_field(default=0)
    writer: str = state_field(default="")
    text: str = state_field(default="")


def expected_text(count: int, writer: str) -> str:
    """The text a writer stores with ``count``: any mix-up of two writes shows."""
    return f"{writer}:{count}:" + "x" * (200 + count % 50)


@attrs.define
class Plan:
    """What one process runs (picklable)."""

    backend: str
    where: str
    first_worker: int
    workers: int
    sessions: int
    seconds: float
    seed: int


@attrs.define
class Outcome:
    """What one process measured (picklable)."""

    updates: Tally[str] = attrs.field(factory=Tally)
    update_latency: list[float] = attrs.field(factory=list)
    read_latency: list[float] = attrs.field(factory=list)
    missing_reads: int = 0
    gave_up: int = 0
    unknown: int = 0
    bad_reads: list[str] = attrs.field(factory=list)

    def merge(self, other: Outcome) -> None:
        """Add another process's figures to these."""
        self.updates.update(other.updates)
        self.update_latency += other.update_latency
        self.read_latency += other.read_latency
        self.missing_reads += other.missing_reads
        self.gave_up += other.gave_up
        self.unknown += other.unknown
        self.bad_reads += other.bad_reads


def open_session(backend: str, where: str) -> SessionBase:
    """A session object on the store under test."""
    if backend == "json":
        return JSONSession(where)
    return RedisSession.from_url(where, key_prefix="load:", max_connections=64)


async def writer(plan: Plan, deadline: float, name: str, rng: random.Random, out: Outcome) -> None:
    """Update random sessions until the time is up."""
    state = Shared()

    def mutate() -> None:
        state.count += 1
        state.writer = name
        state.text = expected_text(state.count, name)

    async with open_session(plan.backend, plan.where) as session:
        while time.monotonic() < deadline:
            session_id = f"s{rng.randrange(plan.sessions)}"
            state.count = 0  # a session not created yet starts from zero, not from the last one updated
            started = time.perf_counter()
            try:
                await session.aupdate(session_id, mutate, retries=20, shared=state)
            except ConflictError:
                out.gave_up += 1
                continue
            except BackendUnavailableError:
                out.unknown += 1  # written or not: cannot tell
                continue
            out.update_latency.append(time.perf_counter() - started)
            out.updates[session_id] += 1


async def reader(plan: Plan, deadline: float, rng: random.Random, out: Outcome) -> None:
    """Load random sessions until the time is up, checking each is whole."""
    seen: dict[str, int] = {}
    async with open_session(plan.backend, plan.where) as session:
        while time.monotonic() < deadline:
            session_id = f"s{rng.randrange(plan.sessions)}"
            state = Shared()
            started = time.perf_counter()
            if not await session.aload(session_id, shared=state):
                out.missing_reads += 1
                continue
            out.read_latency.append(time.perf_counter() - started)
            problem = check_read(state, seen.get(session_id, 0))
            if problem:
                out.bad_reads.append(f"{session_id}: {problem}")
            seen[session_id] = state.count


def check_read(state: Shared, before: int) -> str:
    """Why a read is not a whole document some writer wrote ('' when it is)."""
    if state.text != expected_text(state.count, state.writer):
        return f"text does not match count {state.count} of {state.writer!r}"
    if state.count < before:
        return f"counter went back from {before} to {state.count}"
    return ""


def run_process(plan: Plan) -> Outcome:
    """One process: its share of workers, half writers and half readers."""
    out = Outcome()
    deadline = time.monotonic() + plan.seconds

    async def main() -> None:
        tasks = []
        for index in range(plan.first_worker, plan.first_worker + plan.workers):
            rng = random.Random(plan.seed * 1000 + index)
            work = writer(plan, deadline, f"w{index}", rng, out) if index % 2 == 0 else reader(plan, deadline, rng, out)
            tasks.append(work)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    return out


def stored_counts(backend: str, where: str, sessions: int) -> dict[str, int]:
    """Every session's stored counter, read back after the run."""
    counts = {}
    with open_session(backend, where) as session:
        for index in range(sessions):
            state = Shared()
            if session.load(f"s{index}", shared=state):
                counts[f"s{index}"] = state.count
    return counts


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (0 when empty), in milliseconds."""
    if len(values) < 2:
        return values[0] * 1e3 if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[round(share * 100) - 1] * 1e3


def run(backend: str, where: str, args: argparse.Namespace) -> bool:
    """Run the load on one store; print figures; ``True`` when nothing was lost or torn."""
    per_process = args.workers // args.processes
    plans = [
        Plan(backend, where, index * per_process, per_process, args.sessions, args.seconds, args.seed)
        for index in range(args.processes)
    ]
    total = Outcome()
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(args.processes) as pool:
        for outcome in pool.map(run_process, plans):
            total.merge(outcome)
    elapsed = time.perf_counter() - started
    counts = stored_counts(backend, where, args.sessions)
    lost = sum(total.updates[name] - counts.get(name, 0) for name in total.updates)
    extra = sum(counts.values()) - sum(total.updates.values())
    report(backend, total, elapsed, lost, extra)
    return lost == 0 and extra == total.unknown == 0 and not total.bad_reads


def report(backend: str, total: Outcome, elapsed: float, lost: int, extra: int) -> None:
    """Print one backend's figures."""
    updates, reads = len(total.update_latency), len(total.read_latency)
    print(f"{backend}: {elapsed:.1f} s, {updates:,} updates ({updates / elapsed:,.0f}/s), "
          f"{reads:,} reads ({reads / elapsed:,.0f}/s)")
    print(f"  update latency p50 {percentile(total.update_latency, 0.5):7.2f} ms   "
          f"p99 {percentile(total.update_latency, 0.99):7.2f} ms")
    print(f"  read   latency p50 {percentile(total.read_latency, 0.5):7.2f} ms   "
          f"p99 {percentile(total.read_latency, 0.99):7.2f} ms")
    print(f"  lost updates {lost}, unexplained extra {extra}, gave up after retries {total.gave_up}, "
          f"unknown outcome {total.unknown}, torn or stale reads {len(total.bad_reads)}, "
          f"reads of not-yet-created sessions {total.missing_reads}")
    for line in total.bad_reads[:5]:
        print(f"  BAD READ {line}")


def main() -> int:
    """Parse the options and run the load on each backend asked for."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each backend is loaded (default 30)")
    parser.add_argument("--backend", choices=["redis", "json", "both"], default="both")
    parser.add_argument("--workers", type=int, default=64, help="writers + readers (default 64)")
    parser.add_argument("--processes", type=int, default=4, help="processes the workers are spread over")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions shared by the workers")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    ok = True
    if args.backend in ("redis", "both"):
        ok = with_redis(lambda where: run("redis", where, args)) and ok
    if args.backend in ("json", "both"):
        ok = with_folder(lambda where: run("json", where, args)) and ok
    print("0 lost, 0 torn: ok" if ok else "FAILED: see above")
    return 0 if ok else 1


def with_redis(work: Callable[[str], bool]) -> bool:
    """Run ``work`` against a private redis-server."""
    with local_redis_server() as server:
        return work(f"redis://{server.host}:{server.port}/0")


def with_folder(work: Callable[[str], bool]) -> bool:
    """Run ``work`` against a fresh folder of JSON sessions."""
    with tempfile.TemporaryDirectory() as folder:
        return work(folder)

if __name__ == "__main__":
    raise SystemExit(main())
