"""Fuzz test: byte-level mutations of valid session and config files.

Every mutated file is loaded as a JSON and a YAML session (strict) and as a
config file. Each load must either succeed and round-trip (saving what was
loaded and loading it again gives the same state) or raise a
:class:`~statekit.errors.StatekitError` and leave the target unchanged. No
other exception may escape, and the process must not crash.

The parsers (libyaml is C) run in a child process, so that a crash is seen as
one: tests/test_fuzz.py runs ``python -m tests.fuzz`` with a bounded number of
cases and checks its exit status. The long run::

    python -m tests.fuzz --examples 10000           # Hypothesis, ~5 minutes here
    python -m tests.fuzz --atheris -atheris_runs=20000    # coverage-guided (pip install atheris), ~5 minutes

The input being parsed is written to ``--record`` before each case (when
given), so that a crash leaves it behind; the parent copies it into
tests/corpus/ as ``crash-<digest>.bin``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit import StateModule, state_field, stateful
from statekit.state.config import from_config
from statekit.errors import StatekitError
from statekit.session import JSONSession, YAMLSession
from statekit.session._files import FileSession

CORPUS = Path(__file__).resolve().parent / "corpus"


@stateful
class Msg:
    """A message."""

    role: str
    content: str | list[dict[str, Any]]
    meta: dict[str, Any] | None = None


@stateful
class Memory(StateModule):
    """A list of messages."""

    content: list[Msg] = state_field(factory=list)


@stateful
class Agent(StateModule):
    """A small agent with most kinds of fields."""

    name: str = state_field(default="")
    turns: int = state_field(default=0)
    temperature: float = state_field(default=0.5)
    tags: list[str] = state_field(factory=list)
    memory: Memory = state_field(factory=Memory)


def sample_agent() -> Agent:
    """The valid state every seed file holds."""
    agent = Agent(name="Friday é😀", turns=3, temperature=0.25, tags=["web", "files"])
    agent.memory.content = [
        Msg("user", "hello\nsecond line", {"turn": 1, "ok": True, "x": None}),
        Msg("assistant", [{"type": "tool_use", "input": {"query": "q", "top_k": 3}}, {"type": "text", "text": "a: b"}]),
    ]
    return agent


def seeds() -> list[bytes]:
    """Valid session files (JSON, YAML) and config files to mutate."""
    agent = sample_agent()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in (JSONSession, YAMLSession):
            with kind(tmp) as session:
                session.save("seed", agent=agent)
                out.append(session.session_path("seed").read_bytes())
                out.append(session.codec.dumps(agent.state_dict()))  # a config file
    return out


TOKENS = [
    b"\t", b"[", b"]", b"{", b"}", b":", b": ", b"- ", b",", b"&a ", b"*a", b"<<: ", b"? ", b"#", b"'", b'"',
    b"!!python/object/apply:os.system ", b"!!binary ", b"!!set ", b"!foo ", b"\xff", b"\xed\xa0\x80", b"\x00",
    b'"\\ud800"', b"9" * 4400, b"18446744073709551616", b"1e999", b"NaN", b".nan", b"null", b"~", b"true",
    b"__version__", b"__statekit__", b"---\n", b"...\n", b"%YAML 1.1\n", b"\xef\xbb\xbf", b"\n", b"  ", b"[" * 300,
    b"- " * 300, b"\\u0000", b"\r", b"\xc2\x85",
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A seed file with a few byte-level edits."""
    raw = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        edit = draw(st.sampled_from(["flip", "insert", "token", "delete", "repeat"]))
        if edit == "flip" and at < len(raw):
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif edit == "token":
            raw[at:at] = draw(st.sampled_from(TOKENS))
        elif edit == "delete":
            del raw[at : at + draw(st.integers(1, 40))]
        else:
            raw[at:at] = raw[at : at + draw(st.integers(1, 60))] * draw(st.integers(1, 3))
    return bytes(raw)


def check_session(kind: Callable[[Path], FileSession], folder: Path, raw: bytes) -> None:
    """Load ``raw`` as a session file: a round trip, or a StatekitError that changed nothing."""
    with kind(folder) as session:
        session.session_path("fuzz").write_bytes(raw)
        agent = sample_agent()
        before = agent.state_dict()
        try:
            session.load("fuzz", agent=agent)
        except StatekitError:
            assert agent.state_dict() == before, "a failed load changed the target"
            return
        loaded = agent.state_dict()
        try:
            session.save("again", agent=agent)
        except StatekitError:
            return  # loadable but not savable (e.g. a lone surrogate): refused clearly, nothing written
        again = Agent()
        session.load("again", agent=again)
        assert again.state_dict() == loaded, "what was loaded does not round-trip"


def check_config(suffix: str, folder: Path, raw: bytes) -> None:
    """Load ``raw`` as a config file: an agent, or a StatekitError."""
    path = folder / f"config{suffix}"
    path.write_bytes(raw)
    try:
        agent = from_config(Agent, path)
    except StatekitError:
        return
    assert from_config(Agent, agent.state_dict()).state_dict() == agent.state_dict()


def check_all(raw: bytes, folder: Path, record: Path | None) -> None:
    """Every target, one mutated input."""
    if record is not None:
        record.write_bytes(raw)
    check_session(JSONSession, folder, raw)
    check_session(YAMLSession, folder, raw)
    check_config(".json", folder, raw)
    check_config(".yaml", folder, raw)


SEEDS = seeds()


def run_hypothesis(examples: int, record: Path | None, seed: int | None) -> None:
    """Run ``examples`` Hypothesis cases (raises on the first failure, shrunk)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=seed is None,
            suppress_health_check=list(HealthCheck),
        )
        @given(mutated())
        def fuzz(raw: bytes) -> None:
            check_all(raw, folder, record)

        if seed is not None:
            fuzz = hypothesis.seed(seed)(fuzz)
        fuzz()


def run_atheris(argv: list[str], record: Path | None) -> None:  # pragma: no cover - long run only
    """Coverage-guided fuzzing with atheris (``pip install atheris``), seeded with the seeds."""
    atheris: Any = importlib.import_module("atheris")  # optional: not a dependency

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        seed_dir = Path(tmp) / "seeds"
        seed_dir.mkdir()
        for index, raw in enumerate(SEEDS):
            (seed_dir / f"seed-{index}").write_bytes(raw)
        atheris.instrument_all()
        atheris.Setup([sys.argv[0], *argv, str(seed_dir)], lambda raw: check_all(raw, folder, record))
        atheris.Fuzz()


def run_in_child(examples: int, seed: int | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the fuzzer in a child process; keep the input of a crash in tests/corpus/."""
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "last-input"
        argv = [sys.executable, "-m", "tests.fuzz", "--examples", str(examples), "--record", str(record)]
        if seed is not None:
            argv += ["--seed", str(seed)]
        root = Path(__file__).resolve().parent.parent
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=root, check=False)
        if done.returncode < 0 and record.exists():
            kept = CORPUS / f"crash-{hashlib.sha1(record.read_bytes()).hexdigest()[:12]}.bin"  # noqa: S324
            shutil.copyfile(record, kept)
            done.stderr += f"\nthe process crashed (signal {-done.returncode}); its input is kept in {kept}"
        return done


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m tests.fuzz --examples 20000``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=20_000, help="Hypothesis cases (default 20,000)")
    parser.add_argument("--seed", type=int, default=None, help="a random seed (default: derandomized)")
    parser.add_argument("--record", type=Path, default=None, help="write each input here before parsing it")
    parser.add_argument("--atheris", action="store_true", help="fuzz with atheris instead (extra args go to it)")
    args, rest = parser.parse_known_args(argv)
    if args.atheris:
        run_atheris(rest, args.record)
    else:
        run_hypothesis(args.examples, args.record, args.seed)
        print(f"fuzz: {args.examples} mutated files, each as a JSON and a YAML session and config: no other exception, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
