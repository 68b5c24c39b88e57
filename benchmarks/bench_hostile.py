"""What statekit's checks against hostile YAML cost, next to raw libyaml.

Run: ``python benchmarks/bench_hostile.py [--runs N]``. Issue 9's target: the
YAML codec's depth pre-check (and its duplicate-key and key-type checks) keep
``YAML.loads`` within 1.2x of a raw ``yaml.load(raw, Loader=CSafeLoader)`` on
the 10,000-message session. Two documents: the benchmark agent (no brackets,
so the indentation scan decides) and the same agent whose messages quote code
full of brackets (the parser's events are counted instead, the slow path).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import floor_state_dict, make_agent  # noqa: E402
from _timing import interleaved  # noqa: E402

from statekit.codecs import YAML  # noqa: E402
from statekit.codecs import yaml as yaml_codec  # noqa: E402

TARGET = 1.2


def documents(messages: int) -> dict[str, bytes]:
    """The plain benchmark session, and one whose texts hold many brackets."""
    state = floor_state_dict(make_agent(messages))
    coded: dict[str, Any] = floor_state_dict(make_agent(messages))
    for message in coded["memory"]["content"]:
        if isinstance(message["content"], str):
            message["content"] += "\nprint({'k': [1, 2]}[0])"
    return {"plain": YAML.dumps({"agent": state}), "with brackets": YAML.dumps({"agent": coded})}


def main() -> int:
    """Print the ratios; exit 1 when one misses the target."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    missed = False
    for name, raw in documents(args.messages).items():
        times = interleaved(
            {
                "raw libyaml": partial(yaml.load, raw, Loader=yaml.CSafeLoader),
                "statekit YAML.loads": partial(YAML.loads, raw, None),
                "depth pre-check alone": partial(yaml_codec.check_depth, raw, None),
            },
            args.runs,
        )
        floor = times["raw libyaml"]
        ratio = times["statekit YAML.loads"] / floor
        missed |= ratio > TARGET
        print(f"{name} ({len(raw) / 1e6:.1f} MB):")
        for label, seconds in times.items():
            print(f"  {label:<22} {seconds * 1e3:9.1f} ms  {seconds / floor:5.2f}x")
    print(f"target: YAML.loads <= {TARGET}x raw libyaml: {'MISSED' if missed else 'ok'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
