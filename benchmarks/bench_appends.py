"""Long memories (issue 12): a save after appending costs the new messages, not the history.

``python benchmarks/bench_appends.py [--sizes 10000,100000] [--runs 7] [--turns 1000] [--clock cpu]``

For each size: a memory of that many messages (frozen records in an
``append_only`` list, the shape of benchmarks/_agents.py) in a JSON session.
Interleaved run by run, medians, GC on:

- full save: the note changes, so the whole document is rewritten;
- delta save: one message appended, so one companion line is written (per
  save, over 5 saves in a row, as turns make them; also printed: one delta
  save right after a full save, which pays for the file system's clean-up of
  that rewrite).

And loading that many messages saved with the flag against the same data
saved without it (a plain ``list`` field): both take the typed load.

Then, at the largest size: loading with a companion of 10,000 items (1,000
saves of 10) against loading the same state compacted; and 1,000 turns of one
message each appended to the memory: ms and bytes per turn, against a full
rewrite per turn. Targets: delta <= 2% of full at 100,000 (<= 5% at 10,000),
<= 16 KB written; a delta save at the largest size within 1.3x of one at the
smallest, both timed side by side (issue 27: a turn costs the same however
many messages are held);
load with the flag <= 1.1x without it; load with a companion <= 1.1x.
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import make_message  # noqa: E402
import _timing  # noqa: E402
from _timing import interleaved  # noqa: E402

from statekit import StateModule, state_field, stateful  # noqa: E402
from statekit.session import JSONSession  # noqa: E402


@stateful(frozen=True)
class Msg:
    """One message, immutable (benchmarks/_agents.py's shape)."""

    id: str
    name: str
    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] | None
    timestamp: str


@stateful
class Memory(StateModule):
    """A long memory: the messages only grow; the note changes now and then."""

    content: list[Msg] = state_field(factory=list, append_only=True)
    note: str = state_field(default="")


@stateful
class PlainMemory(StateModule):
    """:class:`Memory` without the flag: the same data, saved whole every time."""

    content: list[Msg] = state_field(factory=list)
    note: str = state_field(default="")


class Messages:
    """An endless supply of messages."""

    def __init__(self) -> None:
        self.rng, self.index = random.Random(7), 0

    def take(self, count: int) -> list[Msg]:
        """The next ``count`` messages."""
        out = []
        for _ in range(count):
            m = make_message(self.rng, self.index)
            out.append(Msg(m.id, m.name, m.role, m.content, m.metadata, m.timestamp))
            self.index += 1
        return out


def _companion_size(folder: Path) -> int:
    log = folder / "chat.json.log"
    return log.stat().st_size if log.exists() else 0


TURNS_PER_ROUND = 5
"""Delta saves timed back to back in each round, as a conversation makes them."""


def compare_saves(size: int, runs: int, keep_history: int = 0) -> dict[str, float]:
    """Median ms of a full save and of a delta save at ``size`` messages, and a delta's bytes
    (``keep_history``: both sessions keep that many past revisions, see bench_history.py).

    ``delta`` is the time per save over :data:`TURNS_PER_ROUND` saves in a row
    (one appended message each); ``delta after full`` is one delta save timed
    alone, right after a full save of the same size on the same disk, which
    pays for the file system's clean-up of that rewrite (ext4 frees the old
    file's blocks in the journal commit the delta's fsync waits for).
    """
    messages = Messages()
    with tempfile.TemporaryDirectory() as full_dir, tempfile.TemporaryDirectory() as delta_dir:
        full, full_memory = JSONSession(full_dir, keep_history=keep_history), Memory(content=messages.take(size))
        delta, delta_memory = JSONSession(delta_dir, keep_history=keep_history), Memory(content=list(full_memory.content))
        full.save("chat", memory=full_memory)
        delta.save("chat", memory=delta_memory)
        written: list[int] = []

        def full_save() -> None:
            full_memory.note = str(time.perf_counter())
            full.save("chat", memory=full_memory)

        def delta_save() -> None:
            before = _companion_size(Path(delta_dir))
            delta_memory.content.append(messages.take(1)[0])
            delta.save("chat", memory=delta_memory)
            written.append(_companion_size(Path(delta_dir)) - before)

        def delta_saves() -> None:
            for _ in range(TURNS_PER_ROUND):
                delta_save()

        impls = {"full": full_save, "delta": delta_saves, "delta after full": delta_save}
        times = interleaved(impls, runs)
        times["delta"] /= TURNS_PER_ROUND
        document = (Path(full_dir) / "chat.json").stat().st_size
    return {**times, "bytes": float(max(written[1:])), "document": float(document)}


def compare_turns(small: int, large: int, runs: int) -> dict[int, float]:
    """Median ms per delta save at ``small`` and at ``large`` messages, timed side by side
    (interleaved round by round, so that the machine's load weighs on both alike)."""
    messages = Messages()
    with tempfile.TemporaryDirectory() as small_dir, tempfile.TemporaryDirectory() as large_dir:
        held = {}
        for size, folder in ((small, small_dir), (large, large_dir)):
            session, memory = JSONSession(folder), Memory(content=messages.take(size))
            session.save("chat", memory=memory)
            held[size] = session, memory

        def turns_at(size: int) -> None:
            session, memory = held[size]
            for _ in range(TURNS_PER_ROUND):
                memory.content.append(messages.take(1)[0])
                session.save("chat", memory=memory)

        times = interleaved({str(size): functools.partial(turns_at, size) for size in (small, large)}, runs)
    return {size: times[str(size)] / TURNS_PER_ROUND for size in (small, large)}


def compare_loads(size: int, runs: int) -> dict[str, float]:
    """Median ms loading ``size`` messages + a 10,000-item companion, and the same state compacted."""
    messages = Messages()
    with tempfile.TemporaryDirectory() as log_dir, tempfile.TemporaryDirectory() as compact_dir:
        session, memory = JSONSession(log_dir), Memory(content=messages.take(size))
        session.save("chat", memory=memory)
        for _ in range(1_000):
            memory.content.extend(messages.take(10))
            session.save("chat", memory=memory)
        assert _companion_size(Path(log_dir)) > 0, "the deltas were compacted"
        JSONSession(compact_dir).save("chat", memory=memory)

        def load(folder: str) -> None:
            JSONSession(folder).load("chat", memory=Memory())

        times = interleaved({"with companion": lambda: load(log_dir), "compacted": lambda: load(compact_dir)}, runs)
    return times


def compare_flag(size: int, runs: int) -> dict[str, float]:
    """Median ms loading ``size`` messages saved with ``append_only`` and the same data saved without it."""
    content = Messages().take(size)
    with tempfile.TemporaryDirectory() as flag_dir, tempfile.TemporaryDirectory() as plain_dir:
        JSONSession(flag_dir).save("chat", memory=Memory(content=list(content)))
        JSONSession(plain_dir).save("chat", memory=PlainMemory(content=list(content)))
        del content

        def with_flag() -> None:
            JSONSession(flag_dir).load("chat", memory=Memory())

        def without() -> None:
            JSONSession(plain_dir).load("chat", memory=PlainMemory())

        return interleaved({"append_only": with_flag, "plain list": without}, runs)


def turns(size: int, count: int) -> dict[str, float]:
    """ms and bytes per turn over ``count`` turns of one message appended to ``size`` messages."""
    messages = Messages()
    with tempfile.TemporaryDirectory() as folder:
        session, memory = JSONSession(folder), Memory(content=messages.take(size))
        session.save("chat", memory=memory)
        document = (Path(folder) / "chat.json").stat().st_size
        written, start = 0, _timing.CLOCK()
        for _ in range(count):
            before = _companion_size(Path(folder))
            memory.content.append(messages.take(1)[0])
            session.save("chat", memory=memory)
            after = _companion_size(Path(folder))
            written += after - before if after >= before else (Path(folder) / "chat.json").stat().st_size
        elapsed = _timing.CLOCK() - start
    return {"ms": elapsed / count * 1e3, "bytes": written / count, "document": float(document)}


def run_appends(sizes: list[int], runs: int, turn_count: int) -> bool:
    """Print every figure; ``True`` when every target is met."""
    ok = True
    for size in sizes:
        saves = compare_saves(size, runs)
        ratio = saves["delta"] / saves["full"]
        target = 0.02 if size >= 100_000 else 0.05
        met = ratio <= target and saves["bytes"] <= 16 * 1024
        ok &= met
        print(
            f"{size:>7,} messages ({saves['document'] / 1e6:.1f} MB): full save {saves['full'] * 1e3:8.2f} ms, "
            f"save after one append {saves['delta'] * 1e3:6.2f} ms = {ratio:6.2%} (target <= {target:.0%}), "
            f"{saves['bytes']:,.0f} bytes written (<= 16 KB) {'ok' if met else 'MISSED'}; "
            f"right after a full save: {saves['delta after full'] * 1e3:.2f} ms = "
            f"{saves['delta after full'] / saves['full']:.2%}"
        )
        flag = compare_flag(size, runs)
        flag_ratio = flag["append_only"] / flag["plain list"]
        ok &= flag_ratio <= 1.1
        print(
            f"{size:>7,} messages: load with append_only {flag['append_only'] * 1e3:8.2f} ms, "
            f"the same data without it {flag['plain list'] * 1e3:8.2f} ms = {flag_ratio:.3f}x (target <= 1.1x) "
            f"{'ok' if flag_ratio <= 1.1 else 'MISSED'}"
        )
    largest, smallest = max(sizes), min(sizes)
    if largest != smallest:
        turn = compare_turns(smallest, largest, runs)
        growth = turn[largest] / turn[smallest]
        ok &= growth <= 1.3
        print(
            f"save after one append, side by side: {turn[smallest] * 1e3:.2f} ms at {smallest:,} messages, "
            f"{turn[largest] * 1e3:.2f} ms at {largest:,} = {growth:.2f}x (target <= 1.3x) "
            f"{'ok' if growth <= 1.3 else 'MISSED'}"
        )
    loads = compare_loads(largest, runs)
    load_ratio = loads["with companion"] / loads["compacted"]
    ok &= load_ratio <= 1.1
    print(
        f"load {largest:,} messages + a 10,000-item companion: {loads['with companion'] * 1e3:.1f} ms, "
        f"compacted: {loads['compacted'] * 1e3:.1f} ms = {load_ratio:.3f}x (target <= 1.1x)"
    )
    per_turn = turns(largest, turn_count)
    print(
        f"{turn_count:,} turns of one message on {largest:,} messages: {per_turn['ms']:.2f} ms and "
        f"{per_turn['bytes']:,.0f} bytes per turn (compactions included); a full rewrite per turn: "
        f"{saves['full'] * 1e3:.1f} ms and {per_turn['document']:,.0f} bytes"
    )
    return ok


def main() -> int:
    """Run the append benchmark."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated message counts")
    parser.add_argument("--runs", type=int, default=7, help="interleaved runs per figure")
    parser.add_argument("--turns", type=int, default=1000, help="turns appended to the largest memory")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="wall time, or this process's CPU time")
    args = parser.parse_args()
    if args.clock == "cpu":
        _timing.CLOCK = time.process_time
    sizes = [int(size) for size in args.sizes.split(",")]
    return 0 if run_appends(sizes, args.runs, args.turns) else 1


if __name__ == "__main__":
    sys.exit(main())
