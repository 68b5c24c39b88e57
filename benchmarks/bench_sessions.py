"""JSON and YAML session files: statekit against the no-copy floor and other libraries.

Run through ``python benchmarks/run.py`` (or alone: ``python benchmarks/bench_sessions.py
[--quick]``). The JSON floor builds the document's dicts by hand without copying
anything and calls ``orjson.dumps`` (pretty, as statekit writes) and the same
atomic, fsync'd write; its load reads, ``orjson.loads`` and calls the
constructors directly. The guarantee-equivalent floor (``_guarantee.py``) keeps
every promise statekit makes for this agent, by hand; each JSON table prints
statekit's ratio to it. The YAML floor is the same with raw libyaml classes.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import Agent, floor_document, floor_load, floor_load_fresh, floor_state_dict, floor_write, make_agent  # noqa: E402
from _guarantee import GuaranteeFloor  # noqa: E402
from _rivals import Pair, agentscope_pair, msgspec_pair, pydantic_pair  # noqa: E402
from _timing import Work, interleaved, table  # noqa: E402

from statekit.session import JSONSession, SessionBase, YAMLSession  # noqa: E402

LOOP = asyncio.new_event_loop()
PRETTY = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
STATEKIT_COLD = "statekit, load by new object"
GUARANTEE = "guarantee floor (by hand)"
STATEKIT = "statekit JSONSession"


def json_floor(path: Path, agent: Agent) -> Pair:
    """The no-copy hand-written floor for a JSON session file."""

    def save() -> None:
        floor_write(path, orjson.dumps(floor_document(agent), option=PRETTY))

    def load() -> None:
        floor_load_fresh(agent, orjson.loads(path.read_bytes())["agent"])

    return save, load


def yaml_floor(path: Path, agent: Agent) -> Pair:
    """The same with raw libyaml ``CSafeDumper`` / ``CSafeLoader`` (copying, as YAML loads do)."""

    def save() -> None:
        document = {"agent": floor_state_dict(agent)}
        floor_write(path, yaml.dump(document, Dumper=yaml.CSafeDumper, allow_unicode=True, sort_keys=False, encoding="utf-8"))

    def load() -> None:
        floor_load(agent, yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)["agent"])  # noqa: S506

    return save, load


def guarantee_pair(path: Path, agent: Agent) -> Pair:
    """The guarantee-equivalent floor (benchmarks/_guarantee.py), on the same event loop."""
    floor = GuaranteeFloor(path)
    return (
        lambda: LOOP.run_until_complete(floor.asave(agent)),
        lambda: LOOP.run_until_complete(floor.aload(agent)),
    )


def statekit_pair(session: SessionBase, agent: Agent) -> Pair:
    """statekit's ``asave`` / ``aload``, on one event loop, as an async app calls them."""
    return (
        lambda: LOOP.run_until_complete(session.asave("bench", agent=agent)),
        lambda: LOOP.run_until_complete(session.aload("bench", agent=agent)),
    )


def statekit_cold_pair(folder: Path, agent: Agent) -> Pair:
    """The same save; each load by a new session object, as another process or a
    restart loads: it has not seen the bytes, so it checks their depth (see BENCHMARKS.md)."""
    writer = JSONSession(folder)
    return (
        lambda: LOOP.run_until_complete(writer.asave("cold", agent=agent)),
        lambda: LOOP.run_until_complete(JSONSession(folder).aload("cold", agent=agent)),
    )


def json_pairs(folder: Path, agent: Agent, rivals: bool) -> dict[str, Pair]:
    """Every implementation of a JSON session save/load that is installed."""
    pairs = {"floor (no copy, orjson)": json_floor(folder / "floor.json", agent)}
    pairs[GUARANTEE] = guarantee_pair(folder / "guarantee.json", agent)
    pairs[STATEKIT] = statekit_pair(JSONSession(folder), agent)
    pairs[STATEKIT_COLD] = statekit_cold_pair(folder, agent)
    if rivals:
        found = {
            "msgspec (same objects)": msgspec_pair(folder / "msgspec.json", agent),
            "pydantic v2 (strict)": pydantic_pair(folder / "pydantic.json", agent),
            "AgentScope 1.0.21": agentscope_pair(folder, agent, LOOP),
        }
        pairs.update({name: pair for name, pair in found.items() if pair is not None})
    return pairs


def run_json(sizes: list[int], runs: int, *, gc_off: bool, rivals: bool = True) -> dict[int, dict[str, dict[str, float]]]:
    """Print the JSON table at every size; return ``{size: {column: {impl: ratio}}}``."""
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            here = Path(folder) / str(n)  # each size saves new files: the floors' first saves expect none
            here.mkdir()
            pairs = json_pairs(here, make_agent(n), rivals)
            out[n] = _columns(f"JSON session, {n:,} messages", pairs, runs, gc_off)
            print("  statekit / guarantee floor: " + ", ".join(f"{col} {ratio[STATEKIT] / ratio[GUARANTEE]:.2f}x" for col, ratio in out[n].items()))
    return out


def run_yaml(sizes: list[int], runs: int) -> dict[int, dict[str, dict[str, float]]]:
    """Print the YAML table (statekit against raw libyaml) at every size."""
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            agent = make_agent(n)
            pairs = {"floor (raw libyaml C)": yaml_floor(Path(folder) / "floor.yaml", agent)}
            pairs["statekit YAMLSession"] = statekit_pair(YAMLSession(folder), agent)
            out[n] = _columns(f"YAML session, {n:,} messages", pairs, runs, gc_off=False)
    return out


def _columns(title: str, pairs: dict[str, Pair], runs: int, gc_off: bool) -> dict[str, dict[str, float]]:
    for save, _ in pairs.values():
        save()  # every file exists before the first load
    columns = {"save": interleaved(_works(pairs, 0), runs), "load": interleaved(_works(pairs, 1), runs)}
    if gc_off:
        columns["save, GC off"] = interleaved(_works(pairs, 0), runs, gc_off=True)
        columns["load, GC off"] = interleaved(_works(pairs, 1), runs, gc_off=True)
    return table(title, columns, floor=next(iter(pairs)))


def _works(pairs: dict[str, Pair], index: int) -> dict[str, Work]:
    return {name: pair[index] for name, pair in pairs.items()}


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    run_json([1_000] if quick else [1_000, 10_000], 3 if quick else 7, gc_off=not quick)
    run_yaml([1_000] if quick else [1_000, 10_000], 3 if quick else 7)
