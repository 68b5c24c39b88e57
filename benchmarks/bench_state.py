"""``state_dict()`` and ``load_state_dict()`` against their hand-written floors.

``state_dict()`` returns a snapshot that shares nothing with the live objects,
so its floor copies too: dict literals and a recursive copy of the JSON blocks
(``_agents.floor_state_dict``). The ``load_state_dict()`` floor calls the
constructors directly and copies the blocks the same way (the caller keeps
its dict). statekit also validates every value's type and, only when
something is wrong, names every problem with its path.

Run through ``python benchmarks/run.py``, or alone with ``[--quick]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import floor_load, floor_state_dict, make_agent  # noqa: E402
from _timing import interleaved, table  # noqa: E402


def run_state(sizes: list[int], runs: int) -> dict[int, dict[str, dict[str, float]]]:
    """Print the table at every size; return ``{size: {column: {impl: ratio}}}``."""
    out = {}
    for n in sizes:
        agent = make_agent(n)
        state = agent.state_dict()
        dump = interleaved({"floor (deep copy)": lambda: floor_state_dict(agent), "statekit": agent.state_dict}, runs)
        load = interleaved(
            {"floor (deep copy)": lambda: floor_load(agent, state), "statekit": lambda: agent.load_state_dict(state)},
            runs,
        )
        out[n] = table(f"state_dict / load_state_dict, {n:,} messages", {"state_dict": dump, "load_state_dict": load}, "floor (deep copy)")
    return out


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    run_state([1_000, 10_000] if quick else [1_000, 10_000, 100_000], 3 if quick else 7)
