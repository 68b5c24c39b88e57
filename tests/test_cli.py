"""The ``statekit`` command: output, exit statuses and messages, no tracebacks."""

from __future__ import annotations

import importlib.metadata
import os
import socket
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import orjson
import pytest
import redis
import yaml

from statekit.cli import main
from statekit.errors import DocumentError, StatekitError
from statekit.session import JSONSession, YAMLSession, _proofs
from statekit.session.redis import RedisSession

AGENTS = """\
from __future__ import annotations

import attrs

from statekit import StateModule, state_field, stateful


@stateful
class Message:
    role: str
    content: str


@stateful
class Memory(StateModule):
    content: list[Message] = state_field(factory=list)


@stateful
class Agent(StateModule):
    '''A small agent.'''

    name: str = state_field()
    turns: int = state_field(default=0)
    memory: Memory = state_field(factory=Memory)


class NotStateful:
    pass
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary current directory holding ``agents.py``; sys.path is restored."""
    (tmp_path / "agents.py").write_text(AGENTS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def agent_class(workdir: Path) -> Any:
    """The ``Agent`` class of ``agents.py``, imported the way the command does."""
    from statekit.cli._classes import load_class

    return load_class("agents.py:Agent")


def saved_session(workdir: Path, session_type: type[JSONSession] | type[YAMLSession] = JSONSession) -> Path:
    agents = sys.modules[agent_class(workdir).__module__]
    agent = agents.Agent(name="Friday", turns=2)
    agent.memory.content += [agents.Message("user", "Hello!\nTwo lines."), agents.Message("assistant", "Hi.")]
    with session_type(workdir / "sessions") as session:
        session.save("chat-1", agent=agent)
        return session.session_path("chat-1")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def test_help_lists_commands_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--help")
    assert status == 0
    for command in ("show", "validate", "convert", "schema", "list", "delete"):
        assert f"    {command}" in out
    assert "examples:\n  statekit show sessions/chat-1.json" in out
    assert "exit status: 0 ok, 1 invalid data or a failed operation, 2 usage error." in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys)[0] == 2
    status, _, err = run(capsys, "frobnicate")
    assert status == 2
    assert "invalid choice: 'frobnicate'" in err


def test_show_prints_a_session_file_as_yaml_without_metadata(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "show", str(saved_session(workdir)))
    assert status == 0
    assert out.startswith("agent:\n  name: Friday\n  turns: 2\n")
    assert "    - role: user\n      content: |-\n        Hello!\n        Two lines.\n" in out
    assert "__statekit__" not in out


def test_show_a_stored_session_one_module_as_json(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved_session(workdir, YAMLSession)
    status, out, _ = run(capsys, "show", "--dir", "sessions", "--yaml", "chat-1", "--module", "agent", "--json")
    assert status == 0
    assert orjson.loads(out)["memory"]["content"][1] == {"role": "assistant", "content": "Hi."}


def test_show_missing_things_exit_1(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = saved_session(workdir)
    status, _, err = run(capsys, "show", str(path), "--module", "toolkit")
    assert (status, err) == (1, f"{path}: no module 'toolkit' in this session (modules: agent)\n")
    status, _, err = run(capsys, "show", "--dir", "sessions", "--user", "bob", "chat-1")
    assert status == 1
    assert "no session 'chat-1' of user 'bob'" in err
    status, _, err = run(capsys, "show", "nowhere.yaml")
    assert (status, err) == (1, "nowhere.yaml: cannot read the file: No such file or directory\n")


def test_validate_a_good_config_and_session(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "agent.yaml").write_text("# seed\nname: Friday\n", encoding="utf-8")
    assert run(capsys, "validate", "agent.yaml", "--class", "agents:Agent") == (0, "agent.yaml: valid Agent\n", "")
    path = str(saved_session(workdir))
    status, out, _ = run(capsys, "validate", path, "--module", "agent=agents:Agent")
    assert (status, out) == (0, f"{path}: valid session (agent)\n")


def test_validate_reports_every_problem_with_its_position(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "name: Friday\ntunrs: 3\nmemory:\n  content:\n    - role: user\n"
    (workdir / "agent.yaml").write_text(text, encoding="utf-8")
    status, out, err = run(capsys, "validate", "agent.yaml", "--class", "agents:Agent")
    assert (status, out) == (1, "")
    assert err.splitlines() == [
        "cannot load state: 2 problems",
        "  agent.yaml:2:1: tunrs: unknown key; did you mean 'turns'?",
        "  agent.yaml:5:7: memory.content[0].content: required key is missing",
    ]
    status, _, _ = run(capsys, "validate", "agent.yaml", "--class", "agents:Agent", "--lenient")
    assert status == 1  # the missing required content is still a problem


def test_validate_a_broken_session_names_the_module(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = saved_session(workdir)
    path.write_text(path.read_text(encoding="utf-8").replace('"turns": 2', '"turns": "2"'), encoding="utf-8")
    status, _, err = run(capsys, "validate", str(path), "--module", "agent=agents:Agent")
    assert status == 1
    assert f"{path}:" in err
    assert ": agent.turns: expected an integer, got a string" in err


def test_validate_a_session_with_class_gives_a_hint(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = saved_session(workdir)
    status, _, err = run(capsys, "validate", str(path), "--class", "agents:Agent")
    assert status == 2
    assert "is a session file (it has '__statekit__'): check its modules with --module NAME=MODULE:CLASS" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("agents", "'agents' is not a class spec: write package.module:Class"),
        ("agents:Missing", "agents has no attribute 'Missing'"),
        ("agents:NotStateful", "is not a @stateful class"),
        ("no_such_module:Agent", "cannot import 'no_such_module': ModuleNotFoundError"),
        ("missing.py:Agent", "cannot import 'missing.py': no such file"),
    ],
)
def test_bad_class_specs_are_usage_errors(workdir: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str) -> None:
    (workdir / "agent.yaml").write_text("name: Friday\n", encoding="utf-8")
    status, _, err = run(capsys, "validate", "agent.yaml", "--class", spec)
    assert status == 2
    assert err.startswith("statekit validate: error: ")
    assert message in err


def test_convert_json_to_yaml_and_back(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = saved_session(workdir)
    assert run(capsys, "convert", str(source), "chat.yaml") == (0, "wrote chat.yaml\n", "")
    assert yaml.safe_load((workdir / "chat.yaml").read_text(encoding="utf-8")) == orjson.loads(source.read_bytes())
    assert run(capsys, "convert", "chat.yaml", "chat.json")[0] == 0
    assert (workdir / "chat.json").read_bytes() == source.read_bytes()


def test_convert_refuses_to_overwrite_and_unknown_suffixes(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(saved_session(workdir))
    (workdir / "chat.yaml").write_text("keep: me\n", encoding="utf-8")
    status, _, err = run(capsys, "convert", source, "chat.yaml")
    assert (status, err) == (2, "statekit convert: error: chat.yaml exists; add --force to replace it\n")
    assert run(capsys, "convert", source, "chat.yaml", "--force")[0] == 0
    status, _, err = run(capsys, "convert", source, "chat.toml")
    assert status == 2
    assert "cannot tell the format from '.toml': use one of .json, .yaml, .yml" in err


def test_convert_a_broken_file_names_the_line(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "bad.yaml").write_text("a: 1\nb: [2\n", encoding="utf-8")
    status, _, err = run(capsys, "convert", "bad.yaml", "bad.json")
    assert status == 1
    assert err.startswith("bad.yaml:2:4: invalid YAML: a '[' list that is never closed")
    assert not (workdir / "bad.json").exists()


def test_schema_of_a_class_validates_what_statekit_wrote(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "schema", "agents:Agent")
    assert status == 0
    schema = orjson.loads(out)
    assert (schema["title"], schema["required"]) == ("Agent", ["name"])
    state = orjson.loads(saved_session(workdir).read_bytes())["agent"]
    jsonschema.Draft202012Validator(schema).validate(state)


def test_schema_of_a_session_to_a_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "schema", "--module", "agent=agents:Agent", "-o", "session.schema.json") == (0, "", "")
    schema = orjson.loads((workdir / "session.schema.json").read_bytes())
    document = orjson.loads(saved_session(workdir).read_bytes())
    jsonschema.Draft202012Validator(schema).validate(document)
    status, _, err = run(capsys, "schema")
    assert status == 2
    assert "give one class (MODULE:CLASS) or session modules" in err


def test_list_and_delete_in_a_folder(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved_session(workdir)
    assert run(capsys, "list", "--dir", "sessions") == (0, "chat-1\n", "")
    status, out, err = run(capsys, "delete", "--dir", "sessions", "chat-1", "chat-2")
    assert (status, out) == (1, "deleted chat-1\n")
    assert err == "statekit delete: no session 'chat-2' of user ''\n"
    assert run(capsys, "list", "--dir", "sessions") == (0, "", "")


def test_delete_goes_on_past_a_session_it_cannot_delete(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved_session(workdir)
    (workdir / "sessions" / "linked.json").symlink_to(workdir / "sessions" / "chat-1.json")
    status, out, err = run(capsys, "delete", "--dir", "sessions", "linked", "chat-1")
    assert (status, out) == (1, "deleted chat-1\n")
    assert err.startswith("statekit delete: ") and "linked.json is a symbolic link" in err
    assert run(capsys, "list", "--dir", "sessions") == (0, "", "")


def test_store_commands_need_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "list")
    assert status == 2
    assert "say where the sessions are: --dir DIR, or --redis-url URL / --host / --port" in err
    status, _, err = run(capsys, "list", "--dir", "x", "--host", "localhost")
    assert (status, err) == (2, "statekit list: error: give either --dir or a Redis server, not both\n")


def test_store_url_on_the_commands_that_take_a_store(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--store`` takes what statekit.session.open takes: a folder path (``--yaml`` applies) or a URL (issue 28)."""
    path = saved_session(workdir, YAMLSession)
    url = f"file://{workdir}/sessions?format=yaml"
    assert run(capsys, "list", "--store", url) == (0, "chat-1\n", "")
    assert run(capsys, "list", "--store", "sessions", "--yaml") == (0, "chat-1\n", "")
    assert run(capsys, "list", "--store", "sessions") == (1, "", "no sessions of user '' in sessions; found 1 YAML session of user '' (add --yaml)\n")
    status, out, _ = run(capsys, "show", "--store", url, "chat-1", "--module", "agent", "--json")
    assert (status, orjson.loads(out)["name"]) == (0, "Friday")
    status, out, _ = run(capsys, "compact", "--store", url)
    assert (status, out.splitlines()[-1]) == (0, "compacted 0, unchanged 1, failed 0")
    assert run(capsys, "delete", "--store", url, "chat-1") == (0, "deleted chat-1\n", "")
    assert not path.exists()


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["--store", "sessions", "--dir", "sessions"], 2, "statekit list: error: give one store: --store URL, --dir DIR or a Redis server (--redis-url, --host, --port)\n"),
        (["--store", "redis://localhost:6379/0", "--host", "localhost"], 2, "statekit list: error: give one store: --store URL"),
        (["--store", "file:///srv/sessions", "--yaml"], 2, "statekit list: error: --yaml goes with a folder; a file: URL says it as file:///abs/dir?format=yaml\n"),
        (["--store", "file:///srv/sessions", "--key-prefix", "app:"], 2, "statekit list: error: --key-prefix goes with a Redis store, not with this --store\n"),
        (["--store", "mysql://admin:s3cret@db/app"], 2, "statekit list: error: --store: a store URL of scheme 'mysql' is not one statekit opens; accepted: "),
        (["--store", "missing"], 1, "--store 'missing': there is no such folder\n"),
        (["--store", "file:///no/such/folder"], 1, "--store '/no/such/folder': there is no such folder\n"),
        (["--store", "sqlite:///missing.db"], 1, "--store 'missing.db': there is no such database file\n"),
    ],
)
def test_a_store_url_the_command_cannot_use(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], status: int, message: str
) -> None:
    found, out, err = run(capsys, "list", *argv)
    assert (found, out) == (status, "")
    assert err.startswith(message) and len(err.splitlines()) == 1
    assert "s3cret" not in err
    assert not (workdir / "missing.db").exists()


@pytest.mark.redis
def test_a_redis_store_url_takes_the_key_prefix(workdir: Path, redis_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    agents = sys.modules[agent_class(workdir).__module__]
    prefix = f"cli-{uuid.uuid4().hex}:"
    with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        session.save("chat-1", "alice", agent=agents.Agent(name="Friday"))
    url = f"redis://{redis_server.host}:{redis_server.port}/0"
    assert run(capsys, "list", "--store", url, "--key-prefix", prefix, "--user", "alice") == (0, "chat-1\n", "")


def test_redis_that_is_down_exits_1_quickly(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status, _, err = run(capsys, "list", "--host", "127.0.0.1", "--port", str(port))
    assert status == 1
    assert "is unavailable" in err


@pytest.mark.redis
def test_show_list_delete_on_redis(
    workdir: Path, redis_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = sys.modules[agent_class(workdir).__module__]
    prefix = f"cli-{uuid.uuid4().hex}:"
    with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        session.save("chat-1", "alice", agent=agents.Agent(name="Friday"))
        session.save("chat-2", "alice", agent=agents.Agent(name="Saturday"))
        session.save("chat-2", "alice", agent=agents.Agent(name="Saturday"))  # a compare-and-set: a write id beside it
    url = f"redis://{redis_server.host}:{redis_server.port}/0"
    where = ["--redis-url", url, "--key-prefix", prefix, "--user", "alice"]
    assert run(capsys, "list", *where) == (0, "chat-1\nchat-2\n", "")
    status, out, _ = run(capsys, "show", *where, "chat-2", "--module", "agent")
    assert (status, out) == (0, "name: Saturday\nturns: 0\nmemory:\n  content: []\n")
    by_host = ["--host", redis_server.host, "--port", str(redis_server.port), "--key-prefix", prefix]
    assert run(capsys, "delete", *by_host, "--user", "alice", "chat-1") == (0, "deleted chat-1\n", "")
    assert run(capsys, "list", *where) == (0, "chat-2\n", "")


def test_console_script_entry_point_runs(workdir: Path) -> None:
    (workdir / "agent.yaml").write_text("name: Friday\nturns: lots\n", encoding="utf-8")
    command = [sys.executable, "-m", "statekit.cli", "validate", "agent.yaml", "--class", "agents:Agent"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=workdir, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr == textwrap.dedent("""\
        cannot load state: 1 problem
          agent.yaml:2:1: turns: expected an integer, got a string
        """)


# --- issue 9, item 12: what docs/cli.md promises --------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--redis-url", "redis://:x@[bad"], "not a usable Redis URL 'redis://:***@[bad': Invalid IPv6 URL"),
        (["--redis-url", "http://localhost"], "not a usable Redis URL 'http://localhost': Redis URL must specify one of"),
        (["--host", "localhost", "--port", "99999"], "Port out of range"),
    ],
)
def test_a_bad_redis_address_is_a_usage_error_without_a_traceback(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, _, err = run(capsys, "list", *argv)
    assert status == 2
    assert err.startswith("statekit list: error: ") and message in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/x?password=TOPSECRET",  # redis-py reads a password from the query too
        "redis://localhost:6379/x?db=0&pass%77ord=TOPSECRET",
        "redis://:TOP/SECRET@localhost:6379/0",
        "redis://:TOP@SECRET@localhost:x/0",  # redis-py takes the last '@'
        "redis://:TOPSECRET?x@localhost:6379/0",  # redis-py's own message quotes 'TOPSECRET' as the port
        "redis://:TOP#SECRET@localhost:6379/x",
        "redis://TOPSECRET@localhost:6379/x",  # a lone user info may well be a password
        "redis:TOPSECRET@localhost",
        "redis:user:TOPSECRET@localhost/0?x=//",  # a '//' past the scheme is not where the user info starts
    ],
)
def test_a_bad_redis_url_never_shows_its_password(capsys: pytest.CaptureFixture[str], url: str) -> None:
    status, _, err = run(capsys, "list", "--redis-url", url)
    assert status == 2
    assert err.startswith("statekit list: error: not a usable Redis URL ") and len(err.splitlines()) == 1
    assert "SECRET" not in err and "TOP" not in err, err


def test_version_on_the_command_line_and_in_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    import statekit

    assert statekit.__version__ == importlib.metadata.version("statekit")
    assert run(capsys, "--version") == (0, f"statekit {statekit.__version__}\n", "")


def test_python_dash_m_statekit_runs_the_command(workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "statekit", "--version"], capture_output=True, text=True, cwd=workdir, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.startswith("statekit "), done.stderr) == (0, True, "")
    done = subprocess.run([sys.executable, "-m", "statekit", "nope"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "invalid choice: 'nope'" in done.stderr


def test_schema_to_an_existing_file_needs_force(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = workdir / "agent.schema.json"
    target.write_text("keep me", encoding="utf-8")
    status, _, err = run(capsys, "schema", "agents:Agent", "-o", str(target))
    assert (status, err) == (2, f"statekit schema: error: {target} exists; add --force to replace it\n")
    assert target.read_text(encoding="utf-8") == "keep me"
    assert run(capsys, "schema", "agents:Agent", "-o", str(target), "--force") == (0, "", "")
    assert orjson.loads(target.read_bytes())["title"] == "Agent"


def test_list_of_a_missing_folder_is_an_error(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "list", "--dir", "no-such-folder")
    assert (status, out, err) == (1, "", "--dir 'no-such-folder': there is no such folder\n")
    assert not (workdir / "no-such-folder").exists()


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_convert_keeps_the_source_permissions(workdir: Path, capsys: pytest.CaptureFixture[str], mode: int) -> None:
    source = saved_session(workdir)
    source.chmod(mode)
    (workdir / "chat.yaml").write_text("old: 1\n", encoding="utf-8")
    (workdir / "chat.yaml").chmod(0o644)
    assert run(capsys, "convert", str(source), "chat.yaml", "--force")[0] == 0
    assert stat.S_IMODE((workdir / "chat.yaml").stat().st_mode) == mode
    assert run(capsys, "convert", str(source), "fresh.yaml")[0] == 0
    assert stat.S_IMODE((workdir / "fresh.yaml").stat().st_mode) == mode


def test_convert_into_a_missing_folder_names_the_folder(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = saved_session(workdir)
    status, _, err = run(capsys, "convert", str(source), "out/chat.yaml")
    assert (status, err) == (1, "cannot write out/chat.yaml: there is no folder 'out'\n")
    assert not (workdir / "out").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("command", [["show", "chat.json"], ["convert", "chat.json", "out.yaml"], ["validate", "chat.json", "--class", "agents:Agent"]])
def test_a_fifo_given_as_a_file_is_refused_at_once(workdir: Path, command: list[str]) -> None:
    os.mkfifo(workdir / "chat.json")  # reading it would wait for a writer forever
    done = subprocess.run([sys.executable, "-m", "statekit", *command], capture_output=True, text=True, cwd=workdir, timeout=30, check=False)
    assert done.returncode == 1
    assert done.stderr == "chat.json: cannot read the file: not a regular file\n"
    assert not (workdir / "out.yaml").exists()


@pytest.mark.parametrize("command", [["convert", "s.yaml", "s.json"], ["show", "s.yaml", "--json"]], ids=["convert", "show-json"])
def test_json_output_refuses_nan_and_infinities_instead_of_writing_null(
    workdir: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    (workdir / "s.yaml").write_text("agent:\n  temperature: .nan\n  costs: [1.5, -.inf]\n", encoding="utf-8")
    status, out, err = run(capsys, *command)
    assert (status, out) == (1, "")
    assert err == textwrap.dedent("""\
        cannot dump state: 2 problems
          agent.temperature: nan (not a finite number) is not JSON data
          agent.costs[1]: -inf (not a finite number) is not JSON data
        """)
    assert not (workdir / "s.json").exists()
    status, out, _ = run(capsys, "show", "s.yaml")  # YAML holds them
    assert (status, out) == (0, "agent:\n  temperature: .nan\n  costs:\n  - 1.5\n  - -.inf\n")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda doc: doc["agent"].pop("turns"), ": agent.turns: required key is missing"),
        (lambda doc: doc["agent"].update(turns={"__secret__": "v1:zz"}), ": agent.turns: expected an integer, got an object"),
        (lambda doc: doc["__statekit__"].update(format=99), "written in session format 99 by a newer statekit"),
    ],
    ids=["missing-key", "sealed-value-in-a-plain-field", "newer-format"],
)
def test_validate_refuses_what_a_session_load_refuses(
    workdir: Path, capsys: pytest.CaptureFixture[str], edit: Any, expected: str
) -> None:
    path = saved_session(workdir)
    document = orjson.loads(path.read_bytes())
    edit(document)
    path.write_bytes(orjson.dumps(document))
    with pytest.raises(StatekitError) as loading:
        JSONSession(workdir / "sessions").load("chat-1", agent=agent_class(workdir)(name="x"))
    assert expected in str(loading.value)
    status, _, err = run(capsys, "validate", str(path), "--module", "agent=agents:Agent")
    assert status == 1
    assert expected in err


@pytest.mark.parametrize("text", ["[1, 2]\n", '"agent"\n'])
def test_validate_of_a_session_that_is_not_a_mapping_says_so_as_a_load_does(
    workdir: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = saved_session(workdir)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DocumentError, match="a session document maps module names to states; this one is") as loading:
        JSONSession(workdir / "sessions").load("chat-1", agent=agent_class(workdir)(name="x"))
    status, _, err = run(capsys, "validate", str(path), "--module", "agent=agents:Agent")
    assert (status, err) == (1, f"{loading.value}\n")


TTL_MODELS = """
from typing import Any
from statekit import StateModule, state_field, stateful

@stateful(frozen=True)
class Line:
    text: str

@stateful
class Log(StateModule):
    content: list[Line] = state_field(factory=list, append_only=True)

def _up(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "note": ""}

@stateful(version=2, migrations={1: _up})
class LogV2(StateModule):
    content: list[Line] = state_field(factory=list, append_only=True)
    note: str = state_field(default="")
"""


@pytest.mark.redis
def test_compact_and_migrate_keep_a_redis_keys_expiry(workdir: Path, redis_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "ttlmodels.py").write_text(TTL_MODELS, encoding="utf-8")
    from statekit.cli._classes import load_class

    ttlmodels = sys.modules[load_class("ttlmodels.py:Log").__module__]

    prefix = f"cli-{uuid.uuid4().hex}:"
    where = ["--redis-url", f"redis://{redis_server.host}:{redis_server.port}/0", "--key-prefix", prefix]
    client = redis.Redis(redis_server.host, redis_server.port)
    with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix, key_ttl=3600) as session:
        log = ttlmodels.Log()
        for text in ("one", "two"):
            log.content.append(ttlmodels.Line(text))
            session.save("c", history=log)  # the second save appends a delta
        key = session.session_key("c")
        assert b'"log"' in client.get(key)  # type: ignore[operator]
        assert run(capsys, "compact", *where, "c")[0] == 0
        assert b'"log"' not in client.get(key) and 3000 < client.ttl(key) <= 3600  # type: ignore[operator]
        assert run(capsys, "migrate", *where, "--module", "history=ttlmodels:LogV2", "c")[0] == 0
        assert b'"__version__":2' in client.get(key) and 3000 < client.ttl(key) <= 3600  # type: ignore[operator]
    client.close()



def test_validate_and_migrate_take_the_state_a_module_registers(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workdir / "sessions" / "c.json"
    path.parent.mkdir()
    path.write_bytes(orjson.dumps({"__statekit__": {"format": 1}, "counted": {"name": "b", "counter": 3, "scratch": {"content": [], "summary": ""}}}))
    assert run(capsys, "validate", str(path), "--module", "counted=agent_models:Counted")[0] == 0
    before = path.read_bytes()
    status, _, err = run(capsys, "migrate", "c", "--dir", str(path.parent), "--module", "counted=agent_models:Counted")
    assert (status, path.read_bytes()) == (0, before), err  # up to date: nothing to rewrite
    path.write_bytes(orjson.dumps({"__statekit__": {"format": 1}, "counted": {"name": "b", "countr": 3, "scratch": {"content": [], "summary": ""}}}))
    status, _, err = run(capsys, "validate", str(path), "--module", "counted=agent_models:Counted")
    assert status == 1
    assert "counted.countr: unknown key; did you mean 'counter'?" in err
    assert "counted.counter: required key is missing" in err


def test_compact_reports_every_session_and_goes_past_one_it_cannot_read(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "ttlmodels.py").write_text(TTL_MODELS, encoding="utf-8")
    from statekit.cli._classes import load_class

    ttlmodels = sys.modules[load_class("ttlmodels.py:Log").__module__]
    folder = workdir / "sessions"
    with JSONSession(folder) as session:
        for session_id in ("a", "b", "c"):
            log = ttlmodels.Log()
            for text in ("one", "two"):
                log.content.append(ttlmodels.Line(text))
                session.save(session_id, history=log)  # the second save appends a delta
        session.save("d", history=ttlmodels.Log())
    (folder / "b.json").write_bytes(b"{ not json")
    status, out, err = run(capsys, "compact", "--dir", str(folder))
    assert status == 1
    assert out.splitlines() == [
        f"a: compacted into {folder / 'a.json'}",
        f"c: compacted into {folder / 'c.json'}",
        "d: nothing appended to fold in",
        "compacted 2, unchanged 1, failed 1",
    ]
    assert err == f"b: not compacted: {folder / 'b.json'}:1:3: invalid JSON: unexpected character, expected a string key\n"
    assert sorted(path.name for path in folder.iterdir()) == ["a.json", "b.json", "b.json.log", "c.json", "d.json"]
    status, out, err = run(capsys, "compact", "--dir", str(folder), "gone", "a")
    assert (status, out) == (1, "a: nothing appended to fold in\ncompacted 0, unchanged 1, failed 1\n")
    assert err == "gone: not compacted: no session 'gone' of user ''\n"


def _saved_log(workdir: Path, appended: bool) -> tuple[Any, Path]:
    """A JSON session ``c`` of a ``LogV2`` under module ``history``; ``appended``: with items in ``c.json.log``."""
    (workdir / "ttlmodels.py").write_text(TTL_MODELS, encoding="utf-8")
    from statekit.cli._classes import load_class

    ttlmodels = sys.modules[load_class("ttlmodels.py:LogV2").__module__]
    log = ttlmodels.LogV2()
    log.content.append(ttlmodels.Line("one"))
    with JSONSession(workdir / "sessions") as session:
        session.save("c", history=log)
        if appended:
            log.content.append(ttlmodels.Line("two"))
            session.save("c", history=log)
    return ttlmodels, workdir / "sessions" / "c.json"


@pytest.mark.parametrize("appended", [False, True], ids=["no-deltas", "deltas"])
def test_convert_of_a_json_session_to_yaml_writes_a_plain_document(
    workdir: Path, capsys: pytest.CaptureFixture[str], appended: bool
) -> None:
    ttlmodels, path = _saved_log(workdir, appended)
    assert b'"log"' in path.read_bytes()  # the token that ties the document to its companion
    assert run(capsys, "convert", str(path), str(workdir / "c.yaml"))[0] == 0
    assert yaml.safe_load((workdir / "c.yaml").read_text())["__statekit__"] == {"format": 1}
    loaded = ttlmodels.LogV2()
    YAMLSession(workdir).load("c", history=loaded)
    assert [line.text for line in loaded.content] == ["one", "two"][: 1 + appended]


def test_validate_of_a_json_session_with_appended_items_places_problems_in_the_file(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _saved_log(workdir, appended=True)
    document = orjson.loads(path.read_bytes())
    document["history"]["note"] = 5
    path.write_bytes(orjson.dumps(document))  # one line, the token still first: the companion still belongs
    text = path.read_text()
    status, _, err = run(capsys, "validate", str(path), "--module", "history=ttlmodels:LogV2")
    assert status == 1
    column = text.index('"note"') + 1
    assert err.splitlines()[1] == f"  {path}:1:{column}: history.note: expected a string, got an integer"


def test_validate_places_a_problem_in_an_appended_item_at_its_companion_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _saved_log(workdir, appended=True)
    log = path.with_name("c.json.log")
    lines = log.read_bytes().split(b"\n")[1:-1]  # a delta line of this document, made as a save makes it
    line, _ = _proofs.seal(b'[[["history","content"],[{"text":3}]]]', len(lines) + 1, _proofs.last(lines)[1])
    log.write_bytes(log.read_bytes() + line)
    status, _, err = run(capsys, "validate", str(path), "--module", "history=ttlmodels:LogV2")
    assert status == 1
    column = log.read_bytes().split(b"\n")[2].index(b'"text"') + 1
    assert err.splitlines()[1] == f"  {log}:3:{column}: history.content[2].text: expected a string, got an integer"


# --- issue 23: messages that send the user the right way --------------------------------


def test_validate_names_the_file_and_module_of_a_version_error(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    newer = {"__version__": 9, "name": "Friday"}
    (workdir / "agent.json").write_bytes(orjson.dumps(newer))
    status, _, err = run(capsys, "validate", "agent.json", "--class", "version_models:Agent")
    assert status == 1
    assert err == "agent.json: <root>: the data is version 9 but Agent is version 3: it was saved by newer code; nothing was loaded\n"
    note = {"__version__": 7, "body": "tea"}
    memory = {"__version__": 2, "notes": [note], "summary": ""}
    session = {"__statekit__": {"format": 1}, "agent": {"__version__": 3, "name": "F", "memory": memory}}
    (workdir / "chat.json").write_bytes(orjson.dumps(session))
    status, _, err = run(capsys, "validate", "chat.json", "--module", "agent=version_models:Agent")
    assert status == 1
    assert err.startswith("chat.json: agent.memory.notes[0]: the data is version 7 but Note is version 2")


def test_show_of_a_bare_id_or_a_companion_says_what_was_meant(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "show", "chat-1")
    assert status == 2
    assert err.startswith("statekit show: error: chat-1: cannot tell the format from no suffix")
    assert err.endswith("to show a stored session by its id, say where the sessions are: --dir DIR (add --yaml for YAML files) or --redis-url URL\n")
    status, _, err = run(capsys, "show", "sessions/chat-1.json.log")
    assert status == 2
    assert err.endswith(
        "sessions/chat-1.json.log is the companion of sessions/chat-1.json (the items appended to its append-only lists): "
        "show sessions/chat-1.json, which includes them\n"
    )
    status, _, err = run(capsys, "show", "notes.txt")
    assert (status, err) == (2, "statekit show: error: notes.txt: cannot tell the format from '.txt': use one of .json, .yaml, .yml\n")


def _spread_sessions(workdir: Path) -> Path:
    """A folder holding JSON sessions of users alice and bob, and a YAML session of no user."""
    agents = sys.modules[agent_class(workdir).__module__]
    folder = workdir / "sessions"
    with JSONSession(folder) as session:
        session.save("chat-1", "alice", agent=agents.Agent(name="Friday"))
        session.save("chat-2", "alice", agent=agents.Agent(name="Friday"))
        session.save("chat-1", "bob", agent=agents.Agent(name="Saturday"))
    with YAMLSession(folder) as session:
        session.save("notes", agent=agents.Agent(name="Sunday"))
    return folder


@pytest.mark.parametrize("command", ["list", "compact", "migrate"])
def test_a_batch_command_that_finds_nothing_says_what_it_found_instead(
    workdir: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    folder = _spread_sessions(workdir)
    more = ["--module", "agent=agents:Agent"] if command == "migrate" else []
    status, out, err = run(capsys, command, "--dir", str(folder), *more)
    assert (status, out) == (1, "")
    assert err == (
        f"no sessions of user '' in {folder}; found sessions of other users: 'alice' (2), 'bob' (1) "
        "(add --user USER_ID, or --all-users), and 1 YAML session of user '' (add --yaml)\n"
    )
    status, out, err = run(capsys, command, "--dir", str(folder), "--yaml", "--user", "alice", *more)
    assert (status, out) == (1, "")
    assert err == (
        f"no sessions of user 'alice' in {folder}; found 1 session of user '' (leave out --user, or --all-users), "
        "and 2 JSON sessions of user 'alice' (leave out --yaml)\n"
    )
    assert run(capsys, command, "--dir", str(folder), "--yaml", *more)[0] == 0
    shown = run(capsys, command, "--dir", "sessions", *more)[2]
    assert shown in (Path(__file__).parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")  # the page shows it
    (workdir / "empty").mkdir()
    assert run(capsys, command, "--dir", str(workdir / "empty"), *more)[2] == ""  # nothing anywhere: a first run


def test_all_users_goes_over_every_users_sessions(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _spread_sessions(workdir)
    assert run(capsys, "list", "--dir", str(folder), "--all-users") == (0, "alice\tchat-1\nalice\tchat-2\nbob\tchat-1\n", "")
    status, out, _ = run(capsys, "compact", "--dir", str(folder), "--all-users")
    assert (status, out.splitlines()) == (
        0,
        [
            "chat-1 (user 'alice'): nothing appended to fold in",
            "chat-2 (user 'alice'): nothing appended to fold in",
            "chat-1 (user 'bob'): nothing appended to fold in",
            "compacted 0, unchanged 3, failed 0",
        ],
    )
    status, out, _ = run(capsys, "migrate", "--dir", str(folder), "--all-users", "--module", "agent=agents:Agent")
    assert (status, out.splitlines()[-1]) == (0, "migrated 0, unchanged 3, failed 0")
    assert f"unchanged {folder / '@bob' / 'chat-1.json'}: already at the current version" in out
    assert run(capsys, "list", "--dir", str(folder), "--yaml", "--all-users") == (0, "\tnotes\n", "")
    for argv in (["list", "--user", "alice"], ["compact", "chat-1"]):
        status, _, err = run(capsys, *argv, "--dir", str(folder), "--all-users")
        assert status == 2
        assert err.endswith("--all-users goes over every session of every user: give no --user and no SESSION_ID\n")


@pytest.mark.redis
def test_a_redis_listing_of_the_default_user_names_the_users_it_found(
    workdir: Path, redis_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = sys.modules[agent_class(workdir).__module__]
    prefix = f"cli-{uuid.uuid4().hex}:"
    with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        session.save("chat:1", "ali:ce", agent=agents.Agent(name="Friday"))
    where = ["--redis-url", f"redis://{redis_server.host}:{redis_server.port}/0", "--key-prefix", prefix]
    status, _, err = run(capsys, "list", *where)
    assert status == 1
    assert err == (
        f"no sessions of user 'default_user' in {redis_server.host}:{redis_server.port}/0; "
        "found 1 session of user 'ali:ce' (add --user ali:ce, or --all-users)\n"
    )
    assert run(capsys, "list", *where, "--all-users") == (0, "ali:ce\tchat:1\n", "")
