"""Every ```python block of README.md and docs/*.md runs as written.

The blocks of one file share one namespace and run in order, in a fresh
temporary working directory. Each block is its own test (``sessions.md:3``),
which replays the blocks before it, so any one can run alone. A block with a
top-level ``await`` runs on an event loop the file's blocks share; the others
run outside any loop, as in a plain script. An error points at the line of the
Markdown file. A block after the line ``<!-- docs: skip -->`` is not run.

What a page takes from the reader's own program (an agent, a config file) is
given by ``SETUP``. A block that ends ``name = ...`` and a comment holding
a Python literal shows name's value, which is checked; ``CHECKS`` checks the
other output and behaviour the pages show, each on the block holding a text
(some run a page's ```sh commands, as the page shows them).

Every ``statekit`` command of a ```sh block must parse as the command line
would parse it, and every link between the pages must reach a file and, with
``#``, one of its headings.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import logging
import os
import re
import runpy
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_models import Plan

from statekit import JSONSession, StateLoadError, generate_secret_key, json_schema
from statekit.cli import build_parser, main
from statekit.testing import check_backend

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = "<!-- docs: skip -->"
SHOWN = re.compile(r"^(?P<name>\w+) = .*\n(?P<comment>(?:#.*\n?)+)\Z", re.MULTILINE)

Namespace = dict[str, Any]


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, whether the doc skips it."""

    doc: Path
    number: int
    line: int
    code: str
    skip: bool

    @property
    def name(self) -> str:
        """The test id: file name and the block's number in the file, from 1."""
        return f"{self.doc.name}:{self.number}"


def blocks(doc: Path, language: str = "python") -> list[Block]:
    """The fenced blocks of one language in a Markdown file, in order, dedented."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    fence = re.compile(rf"^(?P<indent> *)```{language}\s*$")
    found: list[Block] = []
    for start, line in enumerate(lines):
        if match := fence.match(line):
            end = lines.index(match["indent"] + "```", start + 1)
            code = textwrap.dedent("\n".join(lines[start + 1 : end]))
            skip = start > 0 and lines[start - 1].strip() == SKIP
            found.append(Block(doc, len(found) + 1, start + 2, code, skip))
    return found


def run(block: Block, namespace: Namespace, runner: asyncio.Runner) -> None:
    """Run a block in the namespace; on the runner's loop if it awaits."""
    source = "\n" * (block.line - 1) + block.code
    code = compile(source, str(block.doc), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # noqa: S307 - the repository's own docs
    if code.co_flags & inspect.CO_COROUTINE:
        runner.run(result)


def replay(earlier: list[Block], namespace: Namespace, runner: asyncio.Runner) -> Block | None:
    """Run the blocks before the one under test; return the first that fails."""
    for block in earlier:
        try:
            if not block.skip:
                run(block, namespace, runner)
        except Exception:  # noqa: BLE001 - reported as the block that fails
            return block
    return None


def readme(namespace: Namespace) -> None:
    """README saves a `plan` beside its agent: any module will do."""
    namespace["plan"] = Plan()


def sessions(namespace: Namespace) -> None:
    """The sessions page saves an `agent` and its `notes`, and upgrades data."""
    typed = runpy.run_path(str(EXAMPLES / "typed_agent.py"))
    namespace.update(agent=typed["EchoAgent"](name="Friday"), notes=Plan())
    namespace.update(Message=typed["Message"], upgrade=dict)


def config(namespace: Namespace) -> None:
    """The config page reads its agent.yaml (its first YAML block) into an EchoAgent."""
    config_file = blocks(ROOT / "docs" / "config-and-schema.md", "yaml")[0]
    Path("agent.yaml").write_text(config_file.code, encoding="utf-8")
    namespace["EchoAgent"] = runpy.run_path(str(EXAMPLES / "typed_agent.py"))["EchoAgent"]
    namespace["session"] = JSONSession("sessions")
    namespace["to_hex"] = lambda rgb: "#{:02x}{:02x}{:02x}".format(*rgb)
    namespace["from_hex"] = lambda text: tuple(bytes.fromhex(text[1:]))


SETUP: dict[str, Callable[[Namespace], None]] = {
    "README.md": readme,
    "sessions.md": sessions,
    "config-and-schema.md": config,
}


def check_shown(block: Block, namespace: Namespace) -> None:
    """A block that ends `name = ...` and a comment holding a literal shows name's value."""
    if match := SHOWN.search(block.code):
        comment = "".join(line.lstrip("#") for line in match["comment"].splitlines())
        assert namespace[match["name"]] == ast.literal_eval(comment)


def check_readme_migration(namespace: Namespace) -> None:
    """README's version 2 loads the version-1 state it migrates."""
    agent = namespace["Agent"](name="")
    agent.load_state_dict({"name": "Friday", "turns": 3})
    assert (agent.name, agent.turn_count) == ("Friday", 3)


def check_readme_load_error(namespace: Namespace) -> None:
    """The error README shows for a state with a bad value, a bad item and a typo, word for word."""
    shown = re.search(r"^( *statekit\.errors\.StateLoadError: .*?)\n *```", (ROOT / "README.md").read_text(), re.M | re.S)
    assert shown is not None
    agent = namespace["agent"]
    state = agent.state_dict()
    state["memory"]["content"] = [{"role": "user", "content": "Hello!"}] * 3 + [{"role": None, "content": "Hi"}]
    state["sys_prompt"] = ["You are helpful."]
    state["tunrs"] = state.pop("turns")
    with pytest.raises(StateLoadError) as failed:
        agent.load_state_dict(state)
    assert f"statekit.errors.StateLoadError: {failed.value}" == textwrap.dedent(shown[1])


def check_stored_document(namespace: Namespace) -> None:
    """The `StoredDocument` shown in the sessions page's comment."""
    stored = namespace["stored"]
    assert stored.source == "sessions/@alice/chat-1.json"
    assert re.fullmatch("[0-9a-f]{40}", stored.revision)


def check_seed(namespace: Namespace) -> None:
    """The keys `seed` reports in the config page's comments."""
    assert namespace["result"].missing_keys == ["memory", "turns"]
    assert namespace["result"].unexpected_keys == []


def check_schema_override(namespace: Namespace) -> None:
    """The "json_schema" metadata replaces the field's schema."""
    schema = json_schema(namespace["Palette"])
    assert schema["properties"]["color"] == {"type": "string", "pattern": "^#[0-9a-f]{6}$"}


def check_secret_hidden(namespace: Namespace) -> None:
    """`state_dict()` leaves the secret out and `repr()` shows `api_key=<secret>`."""
    client = namespace["Client"](api_key="sk-test")
    assert "api_key" not in client.state_dict()
    assert "api_key=<secret>" in repr(client) and "sk-test" not in repr(client)


def check_secret_sealed(namespace: Namespace) -> None:
    """The saved document holds `"api_key": {"__secret__": "v1:..."}`."""
    saved = orjson.loads(Path("sessions/chat-1.json").read_bytes())
    assert saved["client"]["api_key"]["__secret__"].startswith("v1:")


def check_version_3(namespace: Namespace) -> None:
    """Version 3 loads the version-1 JSON of the page, as the page says."""
    agent = namespace["Agent"]()
    agent.load_state_dict(orjson.loads(blocks(ROOT / "docs" / "versions.md", "json")[0].code))
    assert (agent.turn_count, agent.first_name, agent.tool_groups) == (4, "Ada", ["search"])
    assert [note.body for note in agent.memory.notes] == ["likes tea", "lives in London"]


def sh_commands(doc: str, program: str) -> list[str]:
    """The lines of a page's ```sh blocks that run ``program``, comments left out."""
    lines = [line for block in blocks(ROOT / "docs" / doc, "sh") for line in block.code.splitlines()]
    return [line for line in lines if line.split()[:1] == [program]]


def check_backup_copy(namespace: Namespace) -> None:
    """copy_sessions wrote whole documents; the page's `cp -a` copies companions too: both load every item."""
    assert not Path("backup/@alice/chat-1.json.log").exists() and Path("sessions/@alice/chat-1.json.log").exists()
    (command,) = sh_commands("backup.md", "cp")
    subprocess.run(["bash", "-c", command], check=True, timeout=60)
    assert Path("backup/@alice/chat-1.json.log").read_bytes() == Path("sessions/@alice/chat-1.json.log").read_bytes()
    memory = namespace["Memory"]()
    JSONSession("backup").load("chat-1", "alice", memory=memory)
    assert [message.text for message in memory.content] == ["hello", "how are you?", "fine"]


def check_rekey(namespace: Namespace) -> None:
    """The page's `statekit rekey` commands, as shown: the dry run writes nothing, then the new key alone opens all."""
    commands = [shlex.split(line, comments=True) for line in sh_commands("key-rotation.md", "statekit")]
    assert [words[-1] for words in commands] == ["--dry-run", "OLD_KEY"]
    files = sorted(Path("sessions").rglob("*.json"))
    before = [path.read_bytes() for path in files]
    saved = {name: os.environ.get(name) for name in ("NEW_KEY", "OLD_KEY")}
    os.environ.update(NEW_KEY=namespace["new_key"], OLD_KEY=namespace["old_key"])
    try:
        for words, last in zip(commands, ["would rekey 1, already on the new key 1", "rekeyed 1, already on the new key 1"], strict=True):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                assert main(words[1:]) == 0
            assert out.getvalue().splitlines()[-1].startswith(last), out.getvalue()
            if "--dry-run" in words:
                assert [path.read_bytes() for path in files] == before
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
    for session_id in ("chat-1", "chat-2"):
        client = namespace["Client"]()
        JSONSession("sessions", secret_key=namespace["new_key"]).load(session_id, client=client)
        assert client.api_key == "sk-..."
    shown = re.search(r"nothing changes:\n\n```\n(.*?)\n```", (ROOT / "docs" / "key-rotation.md").read_text(encoding="utf-8"), re.S)
    assert shown is not None
    with pytest.raises(StateLoadError) as caught:  # the problem the page shows, word for word
        JSONSession("sessions", secret_key=[generate_secret_key(), generate_secret_key()]).load("chat-1", client=client)
    assert [f"{problem.dotted}: {problem.message}" for problem in caught.value.problems] == [shown[1]]


def check_blocking_update(namespace: Namespace) -> None:
    """The blocking update takes the same turn on the same session (alice's) as the async one before it."""
    stored = namespace["session"].read_document("chat-1", "alice")
    assert stored is not None and stored.data["agent"]["turns"] == namespace["agent"].turns >= 2


def check_contract(namespace: Namespace) -> None:
    """The page's DictSession passes the contract it is told to run."""
    asyncio.run(check_backend(namespace["TestDictSession"]().make_session))


CHECKS: dict[tuple[str, str], Callable[[Namespace], None]] = {
    ("README.md", "def v1_to_v2"): check_readme_migration,
    ("README.md", "agent.memory.content.append"): check_readme_load_error,
    ("sessions.md", "aread_document"): check_stored_document,
    ("sessions.md", "class TestDictSession"): check_contract,
    ("sessions.md", "session.update(\"chat-1\""): check_blocking_update,
    ("config-and-schema.md", "seed(agent"): check_seed,
    ("config-and-schema.md", "class Palette"): check_schema_override,
    ("secrets.md", "class Client"): check_secret_hidden,
    ("secrets.md", "secret_key=key"): check_secret_sealed,
    ("versions.md", "group_to_groups"): check_version_3,
    ("backup.md", "def copy_sessions"): check_backup_copy,
    ("key-rotation.md", "secret_key=[new_key, old_key]"): check_rekey,
}


@pytest.fixture(autouse=True)
def statekit_log_level() -> Iterator[None]:
    """Put back the level of the `statekit` logger, which a page sets."""
    logger = logging.getLogger("statekit")
    level = logger.level
    yield
    logger.setLevel(level)


def check_all(block: Block, namespace: Namespace) -> None:
    """Check what a block shows: its literal comment, and its ``CHECKS``."""
    check_shown(block, namespace)
    for (doc, text), check in CHECKS.items():
        if doc == block.doc.name and text in block.code:
            check(namespace)


ALL = [block for doc in DOCS for block in blocks(doc)]
SKIPPED = pytest.mark.skip(reason=f"marked {SKIP} in its doc")
PARAMS = [pytest.param(b, id=b.name, marks=[SKIPPED] if b.skip else []) for b in ALL]


@pytest.mark.parametrize("block", PARAMS)
def test_doc_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block runs after the blocks before it and shows what it says."""
    monkeypatch.chdir(tmp_path)
    namespace: Namespace = {"__name__": f"docs_{block.doc.stem}"}
    if setup := SETUP.get(block.doc.name):
        setup(namespace)
    with asyncio.Runner() as runner:
        if failed := replay(blocks(block.doc)[: block.number - 1], namespace, runner):
            pytest.fail(f"{failed.name}, run before this block, fails", pytrace=False)
        run(block, namespace, runner)
    check_all(block, namespace)


@pytest.mark.slow
def test_the_versions_walkthrough_runs_as_written_from_an_empty_folder(tmp_path: Path) -> None:
    """versions.md's shell block, with the clone where the page says and `python` this interpreter."""
    script = blocks(ROOT / "docs" / "versions.md", "sh")[0].code
    script = re.sub(r"^STATEKIT=\S+", f"STATEKIT={shlex.quote(str(ROOT))}", script, flags=re.M)
    script = re.sub(r"^python ", f"{shlex.quote(sys.executable)} ", script, flags=re.M)
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("version 1 refuses: sessions/chat.json: agent: the data is version 3")
    assert sorted(path.name for path in (tmp_path / "try-versions" / "sessions").iterdir()) == ["archived.json", "chat.json"]


@pytest.mark.parametrize(("doc", "text"), list(CHECKS))
def test_each_check_has_one_block(doc: str, text: str) -> None:
    """A check finds its block: a text in exactly one block of its file."""
    assert [block.doc.name for block in ALL if text in block.code].count(doc) == 1


SH_COMMANDS = [
    pytest.param(line, id=f"{block.name}:{line.split()[1]}")
    for doc in DOCS
    for block in blocks(doc, "sh")
    for line in block.code.splitlines()
    if line.split()[:1] == ["statekit"]
]


@pytest.mark.parametrize("line", SH_COMMANDS)
def test_each_statekit_command_of_the_docs_parses(line: str) -> None:
    """A command as a page shows it (up to a shell operator: `>`, `|`, `&&`) is one the command line accepts."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    words = words[: next((i for i, word in enumerate(words) if word in {">", "|", "&&", ";", "<"}), len(words))]
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            build_parser().parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"{line!r}: {err.getvalue()}")


LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def anchors(doc: Path) -> set[str]:
    """The anchors a Markdown renderer makes of a page's headings (GitHub's way)."""
    headings = re.findall(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("doc", DOCS, ids=[doc.name for doc in DOCS])
def test_each_link_between_the_pages_reaches_its_file_and_heading(doc: Path) -> None:
    """A newcomer follows README's reading order through the links: none may lead nowhere."""
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for match in LINK.finditer(text):
        target = match["target"]
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        name, _, anchor = target.partition("#")
        path = (doc.parent / name).resolve() if name else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no such heading")
    assert broken == [], f"{doc.name}: {broken}"


def test_readme_starts_with_the_two_commands_ci_runs() -> None:
    """`.ci/run` runs the first two lines of README's first ```sh block word for word."""
    first = blocks(ROOT / "README.md", "sh")[0]
    assert first.code.splitlines()[0].startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'")
    assert first.code.splitlines()[1] == (
        "(command -v redis-server >/dev/null && ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1"
        " || (apt-get update -qq && apt-get install -y -qq redis-server postgresql)) && .venv/bin/python -m pytest"
    )  # the PostgreSQL tests need Debian's server binaries (not on PATH): installed when missing
    assert "HYPOTHESIS_PROFILE" not in first.code  # .ci/run exports it: README's commands stay what a newcomer types


def test_each_error_the_production_page_names_is_one_statekit_raises() -> None:
    """production.md's table of errors a worker should expect: each is a StatekitError of statekit.errors."""
    import statekit.errors

    page = (ROOT / "docs" / "production.md").read_text(encoding="utf-8")
    named = re.findall(r"^\| `(?:statekit\.errors\.)?(\w+)` \|", page, re.MULTILINE)
    assert len(named) == 9
    for name in named:
        error = getattr(statekit.errors, name)
        assert issubclass(error, statekit.errors.StatekitError), name
