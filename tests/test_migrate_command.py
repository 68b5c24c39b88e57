"""``statekit migrate`` on JSON and YAML folders and a real Redis (issue 7)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from statekit import JSONSession, LoadResult, StateModule, YAMLSession, generate_secret_key, state_field, stateful
from statekit.cli import main
from statekit.session import SessionBase
from statekit.session.redis import RedisSession
from statekit.testing import RedisServer
from version_models import Agent, AgentV1, MemoryV1, NoteV1

AGENT = "--module=agent=version_models:Agent"


@attrs.frozen
class Store:
    """Sessions of one backend, and the command-line options that name the same place."""

    open: Callable[[], SessionBase]
    options: list[str]


@pytest.fixture(params=["json", "yaml", pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "json":
        return Store(lambda: JSONSession(tmp_path), ["--dir", str(tmp_path), "--user", "ada"])
    if request.param == "yaml":
        return Store(lambda: YAMLSession(tmp_path), ["--dir", str(tmp_path), "--yaml", "--user", "ada"])
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"test-{uuid.uuid4().hex}:"
    where = ["--host", server.host, "--port", str(server.port), "--key-prefix", prefix, "--user", "ada"]
    return Store(lambda: RedisSession(server.host, server.port, key_prefix=prefix), where)


@stateful
class Counter(StateModule):
    count: int = state_field(default=0)


def old_agent(turns: int) -> AgentV1:
    return AgentV1(turns=turns, user="Ada Lovelace", memory=MemoryV1([NoteV1("tea")]))


async def raw(store: Store, session_id: str) -> bytes:
    async with store.open() as session:
        stored = await session.aread_document(session_id, "ada")
    assert stored is not None
    return stored.raw


async def save_three(store: Store) -> None:
    async with store.open() as session:
        await session.asave("one", "ada", agent=old_agent(1), counter=Counter(count=9))
        await session.asave("two", "ada", agent=old_agent(2))
        await session.asave("broken", "ada", agent=Counter(count=3))  # no "turns": the migration raises


async def agent_data(store: Store, session_id: str) -> Any:
    async with store.open() as session:
        stored = await session.aread_document(session_id, "ada")
    assert stored is not None
    return stored.data["agent"]


async def raws(store: Store) -> dict[str, bytes]:
    return {sid: await raw(store, sid) for sid in ("one", "two", "broken")}


def test_dry_run_prints_a_diff_per_session_and_writes_nothing(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(save_three(store))
    before = asyncio.run(raws(store))
    assert main(["migrate", *store.options, AGENT, "--dry-run", "one", "two"]) == 0
    out = capsys.readouterr().out
    assert out.count("--- ") == 2 and out.count("(migrated)") == 2
    removed = [line for line in out.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in out.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert any('"turns"' in line or "turns:" in line for line in removed), out
    assert any('"turn_count"' in line or "turn_count:" in line for line in added), out
    assert out.splitlines()[-1] == "would migrate 2, unchanged 0, failed 0"
    assert asyncio.run(raws(store)) == before


def test_migrate_upgrades_every_session_but_the_one_that_fails(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(save_three(store))
    before = asyncio.run(raws(store))
    assert main(["migrate", *store.options, AGENT]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "migrated 2, unchanged 0, failed 1"
    assert "agent 1 -> 3" in captured.out
    [failure] = captured.err.splitlines()
    assert failure.startswith("failed ") and "broken" in failure
    assert "agent: cannot migrate the data of version 1" in failure and "raised KeyError: 'turns'" in failure
    after = asyncio.run(raws(store))
    assert after["broken"] == before["broken"] and after["one"] != before["one"]
    agent, counter = asyncio.run(load_one(store))
    assert (agent.turn_count, agent.last_name, agent.memory.notes[0].body, counter.count) == (1, "Lovelace", "tea", 9)
    assert asyncio.run(agent_data(store, "two"))["__version__"] == 3
    assert main(["migrate", *store.options, AGENT, "one", "two"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "migrated 0, unchanged 2, failed 0"


async def load_one(store: Store) -> tuple[Agent, Counter]:
    """Session "one", loaded strictly by the current classes."""
    agent, counter = Agent(), Counter()
    async with store.open() as session:
        results = await session.aload("one", "ada", agent=agent, counter=counter)
    assert results == {"agent": LoadResult(), "counter": LoadResult()}
    return agent, counter


def test_an_invalid_session_is_reported_with_its_path_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with YAMLSession(tmp_path) as session:
        session.save("typo", agent=old_agent(1))
    path = tmp_path / "typo.yaml"
    path.write_text(path.read_text().replace("turns: 1", "turns: many"))
    before = path.read_bytes()
    assert main(["migrate", "--dir", str(tmp_path), "--yaml", AGENT, "typo", "gone"]) == 1
    errors = capsys.readouterr().err.splitlines()
    assert errors[0] == f"failed {path}: cannot load state: 1 problem"
    assert errors[1].startswith(f"  {path}:") and errors[1].endswith(": agent.turn_count: expected an integer, got a string")
    assert errors[2] == f"failed {tmp_path / 'gone.yaml'}: no such session"
    assert path.read_bytes() == before


def test_a_missing_module_fails_and_a_record_class_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with JSONSession(tmp_path) as session:
        session.save("c", counter=Counter())
    assert main(["migrate", "--dir", str(tmp_path), AGENT]) == 1
    assert "agent: module is missing from the session" in capsys.readouterr().err
    assert main(["migrate", "--dir", str(tmp_path), "--module", "n=version_models:Note"]) == 2
    assert "Note is a value record" in capsys.readouterr().err


@stateful
class ToolV1(StateModule):
    token: str = state_field(default="", secret=True)
    host: str = state_field(default="")


def _rename_host(state: dict[str, Any]) -> dict[str, Any]:
    state["url"] = f"https://{state.pop('host')}"
    return state


@stateful(version=2, migrations={1: _rename_host})
class ToolV2(StateModule):
    token: str = state_field(default="", secret=True)
    url: str = state_field(default="")


def test_encrypted_secrets_migrate_with_the_key_and_fail_untouched_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = generate_secret_key()
    with JSONSession(tmp_path, secret_key=key) as session:
        session.save("t", tool=ToolV1(token="s3cret", host="example.org"))
    path = tmp_path / "t.json"
    before = path.read_bytes()
    spec = "--module=tool=test_migrate_command:ToolV2"
    assert main(["migrate", "--dir", str(tmp_path), spec]) == 1
    assert "the secret is encrypted" in capsys.readouterr().err
    assert path.read_bytes() == before
    monkeypatch.setenv("STATEKIT_TEST_KEY", key)
    assert main(["migrate", "--dir", str(tmp_path), spec, "--secret-key-env", "STATEKIT_TEST_KEY", "--dry-run"]) == 0
    assert "s3cret" not in capsys.readouterr().out and path.read_bytes() == before
    assert main(["migrate", "--dir", str(tmp_path), spec, "--secret-key-env", "STATEKIT_TEST_KEY"]) == 0
    assert b"s3cret" not in path.read_bytes() and b'"url": "https://example.org"' in path.read_bytes()
    tool = ToolV2()
    with JSONSession(tmp_path, secret_key=key) as session:
        session.load("t", tool=tool)
    assert (tool.token, tool.url) == ("s3cret", "https://example.org")
    assert main(["migrate", "--dir", str(tmp_path), spec, "--secret-key-env", "NOT_SET_ANYWHERE"]) == 2


def test_without_a_key_migrate_names_its_option_and_leaves_a_current_session_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = generate_secret_key()
    with JSONSession(tmp_path, secret_key=key) as session:
        session.save("old", tool=ToolV1(token="s3cret", host="example.org"))
        session.save("new", tool=ToolV2(token="s3cret", url="https://example.org"))
    before = {name: (tmp_path / f"{name}.json").read_bytes() for name in ("old", "new")}
    status = main(["migrate", "--dir", str(tmp_path), "--module=tool=test_migrate_command:ToolV2", "old", "new"])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.splitlines() == [f"unchanged {tmp_path / 'new.json'}: already at the current version", "migrated 0, unchanged 1, failed 1"]
    assert err.splitlines()[1].endswith(
        ": tool.token: the secret is encrypted and a migration must open it: give the key it was saved with "
        "as --secret-key-env VAR (the environment variable that holds it)"
    )
    assert "give the session the secret_key" not in err
    assert {name: (tmp_path / f"{name}.json").read_bytes() for name in ("old", "new")} == before


@pytest.mark.parametrize("spec", ["--module=tool=test_migrate_command:ToolV1", "--module=tool=test_migrate_command:ToolV2"], ids=["current", "older"])
def test_a_secret_saved_without_a_key_stays_out_when_migrated_with_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    with JSONSession(tmp_path, omit_secrets=True) as session:  # no key: the secret is left out of the document
        session.save("t", tool=ToolV1(token="from-the-environment", host="example.org"))
    path = tmp_path / "t.json"
    before = path.read_bytes()
    key = generate_secret_key()
    monkeypatch.setenv("STATEKIT_TEST_KEY", key)
    assert main(["migrate", "--dir", str(tmp_path), spec, "--secret-key-env", "STATEKIT_TEST_KEY"]) == 0
    out = capsys.readouterr().out
    assert b'"token"' not in path.read_bytes()
    if spec.endswith("ToolV1"):
        assert "unchanged" in out and path.read_bytes() == before
    tool = ToolV2(token="set-by-the-app")
    with JSONSession(tmp_path, secret_key=key) as session:
        session.load("t", strict=False, tool=tool)
    assert tool.token == "set-by-the-app"  # not replaced by an encrypted default


def test_an_id_the_store_refuses_fails_alone_and_every_session_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with JSONSession(tmp_path) as session:
        session.save("one", agent=old_agent(1))
        session.save("two", agent=old_agent(2))
    too_long = "x" * 201
    assert main(["migrate", "--dir", str(tmp_path), AGENT, "one", too_long, "", "two"]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"migrated {tmp_path / 'one.json'}: agent 1 -> 3",
        f"migrated {tmp_path / 'two.json'}: agent 1 -> 3",
        "migrated 2, unchanged 0, failed 2",
    ]
    assert captured.err.splitlines() == [
        f"failed session {too_long!r}: session_id is 201 characters long; the limit is 200",
        "failed session '': session_id must not be empty",
    ]


class Pairs(StateModule):
    """AgentScope style: overrides both methods, and its state holds (text, marks) tuples."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs: list[tuple[str, list[str]]] = []

    def state_dict(self) -> dict[str, Any]:
        return {"pairs": list(self.pairs)}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:  # type: ignore[override]
        self.pairs = [(text, marks) for text, marks in state_dict["pairs"]]


def test_an_overriding_module_is_dumped_as_a_save_dumps_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = Pairs()
    pairs.pairs.append(("hi", ["seen"]))
    with JSONSession(tmp_path) as session:
        session.save("s", agent=old_agent(1), pairs=pairs)
    assert main(["migrate", "--dir", str(tmp_path), AGENT, "--module=pairs=test_migrate_command:Pairs"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "migrated 1, unchanged 0, failed 0"
    agent, loaded = Agent(), Pairs()
    with JSONSession(tmp_path) as session:
        session.load("s", agent=agent, pairs=loaded)
    assert (agent.turn_count, loaded.pairs) == (1, [("hi", ["seen"])])
