"""Peak extra memory of one session save and one load (tracemalloc).

Each figure is the peak of memory traced during the call minus what was in use
before it: for a save, the bytes and temporaries; for a load, the decoded data
and the new objects (the old ones are freed only when replaced).

Run through ``python benchmarks/run.py``, or alone with ``[--quick]``.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import make_agent  # noqa: E402
from _timing import Work  # noqa: E402
from bench_sessions import json_pairs  # noqa: E402

MIB = 1 << 20


def peak_mib(work: Work) -> float:
    """The peak extra traced memory of one call, in MiB."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        work()
        return (tracemalloc.get_traced_memory()[1] - before) / MIB
    finally:
        tracemalloc.stop()


def run_memory(n: int, rivals: bool = True) -> dict[str, tuple[float, float]]:
    """Print and return ``{impl: (save MiB, load MiB)}`` for a session of ``n`` messages."""
    with tempfile.TemporaryDirectory() as folder:
        pairs = json_pairs(Path(folder), make_agent(n), rivals)
        for save, _ in pairs.values():
            save()
        size = (Path(folder) / "floor.json").stat().st_size / MIB
        print(f"\nPeak extra memory, JSON session of {n:,} messages ({size:.0f} MiB file; tracemalloc)")
        out = {name: (peak_mib(save), peak_mib(load)) for name, (save, load) in pairs.items()}
    for name, (save_mib, load_mib) in out.items():
        print(f"  {name:<30} | save {save_mib:8.1f} MiB | load {load_mib:8.1f} MiB")
    return out


if __name__ == "__main__":
    run_memory(10_000 if "--quick" in sys.argv else 100_000)
