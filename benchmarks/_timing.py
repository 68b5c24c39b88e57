"""Interleaved timing and the ratio tables every benchmark prints.

Implementations are timed in rounds: each round runs every one of them once,
in an order that rotates from round to round, so that a burst of load on the
shared machine hits all of them alike. Garbage collection stays on, as users
run (``gc_off=True`` times the same work with it off, for comparison).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping

Work = Callable[[], object]

CLOCK: Callable[[], float] = time.perf_counter
"""What the timings read: wall time (as users wait), or ``time.process_time``
(CPU time of every thread of this process) with ``run.py --clock cpu``, which
other jobs on a shared machine disturb far less; file-system waits are then
left out on both sides."""


def interleaved(impls: Mapping[str, Work], runs: int, *, gc_off: bool = False) -> dict[str, float]:
    """The median seconds of each implementation over ``runs`` interleaved rounds."""
    for work in impls.values():
        work()  # warm up: generated code, caches, the file system
    names = list(impls)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(_once(impls[name], gc_off))
    return {name: statistics.median(values) for name, values in times.items()}


def _once(work: Work, gc_off: bool) -> float:
    gc.collect()
    if gc_off:
        gc.disable()
    try:
        start = CLOCK()
        work()
        return CLOCK() - start
    finally:
        gc.enable()


def table(title: str, columns: Mapping[str, Mapping[str, float]], floor: str) -> dict[str, dict[str, float]]:
    """Print one table: a row per implementation, per column its time and ratio to ``floor``.

    Returns:
        ``{column: {implementation: ratio}}``.
    """
    ratios = {col: {name: t / times[floor] for name, t in times.items()} for col, times in columns.items()}
    names = list(next(iter(columns.values())))
    header = "".join(f" | {col:>22}" for col in columns)
    print(f"\n{title}\n  {'':<28}{header}")
    for name in names:
        cells = "".join(f" | {columns[c][name] * 1e3:10.2f} ms {ratios[c][name]:7.2f}x" for c in columns)
        print(f"  {name:<28}{cells}")
    return ratios


Job = Callable[[int], Awaitable[None]]
"""One task's unit of work in the many-task benchmarks (its argument: the task's index)."""


async def rate(job: Job, tasks: int, rounds: int) -> float:
    """Units of ``job`` per second of :data:`CLOCK` with ``tasks`` concurrent tasks doing ``rounds`` each
    (``--clock cpu``: per second of this process's CPU, the server's own work left out on every side)."""

    async def worker(index: int) -> None:
        for _ in range(rounds):
            await job(index)

    started = CLOCK()
    await asyncio.gather(*(worker(index) for index in range(tasks)))
    return tasks * rounds / (CLOCK() - started)


async def interleaved_rates(
    jobs: Mapping[str, Job], tasks: int, rounds: int, runs: int, *, warm_up: int = 2, collections: dict[str, int] | None = None
) -> dict[str, float]:
    """The median rate of each job over ``runs`` interleaved rounds (the order rotating), after a warm-up;
    ``collections`` (if given) gets how many times the cyclic collector walked the young objects during
    each job's rounds (``tasks * rounds * runs`` units each)."""
    for job in jobs.values():
        await rate(job, tasks, warm_up)  # connections, tables, generated code
    names = list(jobs)
    rates: dict[str, list[float]] = {name: [] for name in names}
    walks = dict.fromkeys(names, 0)
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            before = gc.get_stats()[0]["collections"]
            rates[name].append(await rate(jobs[name], tasks, rounds))
            walks[name] += gc.get_stats()[0]["collections"] - before
    if collections is not None:
        collections.update(walks)
    return {name: statistics.median(values) for name, values in rates.items()}
