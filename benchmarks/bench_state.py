"""Time ``state_dict()`` and ``load_state_dict()`` against the hand-written floor.

Run: ``python benchmarks/bench_state.py [--quick]``. Prints medians and the
ratio statekit/floor; the machine is shared and noisy, so only ratios from the
same run mean anything. Targets at 10,000 messages: state_dict <= 1.5x,
load_state_dict <= 2x.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import floor_load, floor_state_dict, make_agent  # noqa: E402

TARGETS = {"state_dict": 1.5, "load_state_dict": 2.0}


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``repeat`` calls, with the GC off while timing."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(times)


def compare(label: str, ours: Callable[[], object], floor: Callable[[], object], repeat: int) -> float:
    """Time both sides interleaved in one run and print the ratio."""
    ours(), floor()  # warm up: generated hooks, caches
    ours_s, floor_s = [], []
    for _ in range(3):
        ours_s.append(median_seconds(ours, repeat))
        floor_s.append(median_seconds(floor, repeat))
    mine, base = min(ours_s), min(floor_s)
    ratio = mine / base
    print(f"  {label:<16} statekit {mine * 1e3:9.2f} ms   floor {base * 1e3:9.2f} ms   ratio {ratio:5.2f}x")
    return ratio


def run(sizes: list[int], repeat: int) -> dict[tuple[str, int], float]:
    """Compare both operations at every size; return the ratios."""
    ratios = {}
    for n in sizes:
        print(f"{n:,} messages")
        agent = make_agent(n)
        state = agent.state_dict()
        ratios["state_dict", n] = compare("state_dict", agent.state_dict, lambda: floor_state_dict(agent), repeat)
        ratios["load_state_dict", n] = compare(
            "load_state_dict", lambda: agent.load_state_dict(state), lambda: floor_load(agent, state), repeat
        )
    return ratios


def main() -> int:
    """Run the benchmark and report the targets at 10,000 messages."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    ratios = run(sizes, repeat=3 if args.quick else 7)
    print("targets at 10,000 messages:")
    for op, target in TARGETS.items():
        ratio = ratios[op, 10_000]
        print(f"  {op:<16} {ratio:5.2f}x (target <= {target}x): {'ok' if ratio <= target else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
