"""One URL to open any store, ``--store``, and ``statekit copy`` between stores (issue 28)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import statekit
from append_models import Agent, Msg, Vault
from statekit import SessionBase, generate_secret_key, open_session
from statekit.cli import main
from statekit.errors import SessionError
from statekit.session import JSONSession, YAMLSession
from statekit.session.redis import RedisSession
from statekit.testing import local_redis_server

KEY = generate_secret_key()
USERS = ("", "alice", "bob")
SESSIONS = ("chat-0", "chat-1")

Saved = dict[tuple[str, str], tuple[dict[str, Any], str, list[str]]]
"""Per (user, session id): the agent's state, the vault's secret token and its keys, as saved."""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def _fill(folder: Path) -> Saved:
    """JSON sessions of three users (one of them the no-user ``""``), each with a secret and items appended beside it."""
    session, saved = JSONSession(folder, secret_key=KEY), {}
    for user in USERS:
        for number, session_id in enumerate(SESSIONS):
            agent, vault = Agent(), Vault(token=f"sk-{user or 'nobody'}-{number}")
            agent.memory.content.append(Msg("user", f"hello from {user or 'nobody'} ✓"))
            agent.memory.note = f"note {number}"
            agent.events.append(number)
            session.save(session_id, user_id=user, agent=agent, vault=vault)
            agent.memory.content.append(Msg("assistant", "hi"))
            agent.events.append(10 + number)
            vault.keys.append(f"key-{number}")
            session.save(session_id, user_id=user, agent=agent, vault=vault)  # the new items appended beside the document
            saved[(user, session_id)] = (agent.state_dict(), vault.token, list(vault.keys))
    assert len(list(folder.rglob("*.json.log"))) == len(saved)  # the appended items really are in companions
    return saved


def _assert_loads_as_saved(url: str, saved: Saved) -> None:
    """Every session loads from ``url`` exactly as it was saved, secrets opened with the key."""
    with open_session(url, secret_key=KEY) as session:
        assert sorted(session.list_users()) == sorted(USERS)
        for (user, session_id), (state, token, keys) in saved.items():
            agent, vault = Agent(), Vault()
            session.load(session_id, user_id=user, agent=agent, vault=vault)
            assert agent.state_dict() == state
            assert (vault.token, vault.keys) == (token, keys)


def _redis_url(server: Any) -> str:
    return f"redis://{server.host}:{server.port}/0"


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A private redis-server: copy --all-users goes over every key, so no other test's may be there."""
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(local_redis_server())
        except RuntimeError as err:
            pytest.fail(str(err))
        yield _redis_url(server)


# --- statekit.session.open ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kind", "folder"),
    [
        ("sessions", JSONSession, "sessions"),
        ("/srv/sessions", JSONSession, "/srv/sessions"),
        ("./odd:name", JSONSession, "odd:name"),
        ("file:///srv/sessions", JSONSession, "/srv/sessions"),
        ("file:/srv/sessions", JSONSession, "/srv/sessions"),
        ("file://localhost/srv/my%20sessions", JSONSession, "/srv/my sessions"),
        ("file:///srv/sessions?format=json", JSONSession, "/srv/sessions"),
        ("file:///srv/sessions?format=yaml", YAMLSession, "/srv/sessions"),
        ("FILE:///srv/sessions?format=YAML", YAMLSession, "/srv/sessions"),
    ],
)
def test_open_a_folder_by_path_or_file_url(url: str, kind: type[SessionBase], folder: str) -> None:
    session = statekit.session.open(url)
    assert type(session) is kind
    assert isinstance(session, JSONSession | YAMLSession) and session.save_dir == Path(folder)


def test_open_takes_a_path_object_and_passes_options_through(tmp_path: Path) -> None:
    session = open_session(tmp_path, secret_key=KEY)
    session.save("chat", vault=Vault(token="sk-secret"))
    assert b"sk-secret" not in (tmp_path / "chat.json").read_bytes()  # sealed with the key given to open
    vault = Vault()
    open_session(f"file://{tmp_path}", secret_key=KEY).load("chat", vault=vault)
    assert vault.token == "sk-secret"
    assert statekit.open_session is statekit.session.open


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("redis://127.0.0.1:6390/3", "127.0.0.1:6390/3"),
        ("rediss://127.0.0.1:6390/0", "127.0.0.1:6390/0"),
        ("unix:///tmp/redis.sock", "unix:/tmp/redis.sock"),
    ],
)
def test_open_a_redis_url(url: str, address: str) -> None:
    session = open_session(url, key_prefix="app:")
    assert isinstance(session, RedisSession)
    assert (session.address, session.key_prefix) == (address, "app:")
    session.close()


def test_open_a_redis_cluster_url() -> None:
    session = open_session("redis+cluster://127.0.0.1:7000")
    assert isinstance(session, RedisSession)
    assert session.location("chat").startswith("redis+cluster://127.0.0.1:7000 ")
    session.close()


def test_open_a_redis_url_reaches_the_server(redis_url: str) -> None:
    with open_session(redis_url, secret_key=KEY) as session:
        session.save("chat", vault=Vault(token="sk-1"))
    vault = Vault()
    with open_session(redis_url, secret_key=KEY) as session:
        session.load("chat", vault=vault)
    assert vault.token == "sk-1"


ACCEPTED = ("a folder path", "file:///abs/dir", "redis://", "redis+cluster://", "sqlite:///relative.db", "sqlite:////abs.db", "postgresql://")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://admin:s3cret@db.example/app", "a store URL of scheme 'mysql' is not one statekit opens; accepted: "),
        ("admin:s3cret@example", "a store URL of scheme 'admin' is not one"),  # a user and password without a scheme
        ("", "the store URL is empty; accepted: "),
        ("file://admin:s3cret@example/srv", "a file: store URL names a folder on this machine, with no host"),
        ("file:///srv?format=xml", "a file: store URL's format is json or yaml"),
        ("file:///srv?password=s3cret", "a file: store URL takes one query option, format=json or format=yaml"),
        ("file:///srv?s3cret", "a file: store URL takes one query option"),
        ("file:///srv#s3cret", "a file: store URL has no #fragment"),
        ("file:relative/s3cret", "a file: store URL names an absolute folder"),
        ("sqlite://admin:s3cret@example/x.db", "a sqlite: store URL is sqlite:///relative.db or sqlite:////abs.db"),
        ("sqlite:x.db", "a sqlite: store URL is sqlite:///relative.db"),
        ("sqlite:///x.db?password=s3cret", "a sqlite: store URL takes no ?query or #fragment"),
        ("sqlite:///", "a sqlite: store URL names a database file"),
        ("redis://:s3cret@localhost:port/0", "not a usable Redis URL 'redis://:***@localhost:port/0'"),
    ],
)
def test_a_bad_url_is_a_session_error_that_never_shows_its_password(url: str, message: str) -> None:
    with pytest.raises(SessionError) as caught:
        open_session(url)
    text = str(caught.value)
    assert message in text
    assert "s3cret" not in text
    if "accepted" in message:
        assert all(scheme in text for scheme in ACCEPTED), text


def test_an_option_the_backend_does_not_take_is_named(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match=r"^JSONSession takes no option 'key_prefix' \(it takes: layout, secret_key, omit_secrets, keep_history\)$"):
        open_session(tmp_path, key_prefix="app:")
    with pytest.raises(SessionError, match="^YAMLSession takes no option 'save_dir', 'table'"):
        open_session(f"file://{tmp_path}?format=yaml", table="x", save_dir="y")


@pytest.mark.parametrize(
    ("url", "module"),
    [
        pytest.param(url, module, marks=pytest.mark.skipif(importlib.util.find_spec(module) is not None, reason=f"{module} is installed"))
        for url, module in (("sqlite:///x.db", "statekit.session.sqlite"), ("postgresql://u:s3cret@localhost/db", "statekit.session.postgres"))
    ],
)
def test_a_sql_url_whose_backend_is_missing_says_so(url: str, module: str) -> None:
    """Until the SQL backends are installed, their URLs say what is missing (never the URL)."""
    with pytest.raises(SessionError, match=f"stores need the module {module}, which this installation of statekit lacks") as caught:
        open_session(url)
    assert "s3cret" not in str(caught.value)


SQLITE = pytest.mark.skipif(
    importlib.util.find_spec("statekit.session.sqlite") is None, reason="statekit.session.sqlite is not there yet (issue 28)"
)
POSTGRES = pytest.mark.skipif(
    importlib.util.find_spec("statekit.session.postgres") is None, reason="statekit.session.postgres is not there yet (issue 28)"
)


@SQLITE
def test_open_a_sqlite_url_relative_or_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "abs").mkdir()
    for url, made in (("sqlite:///relative.db", tmp_path / "relative.db"), (f"sqlite:///{tmp_path}/abs/x.db", tmp_path / "abs" / "x.db")):
        with open_session(url, secret_key=KEY) as session:
            session.save("chat", vault=Vault(token="sk-1"))
        assert made.is_file()
        vault = Vault()
        with open_session(url, secret_key=KEY) as session:
            session.load("chat", vault=vault)
        assert vault.token == "sk-1"


# --- statekit copy -----------------------------------------------------------------------


def _copied(capsys: pytest.CaptureFixture[str], source: str, destination: str, count: int) -> None:
    """Copy every user's sessions: ``count`` copied, nothing refused; the rerun finds every one identical."""
    status, out, err = run(capsys, "copy", source, destination, "--all-users")
    assert (status, err) == (0, "")
    assert out.endswith(f"copied {count}, identical 0, refused 0\n")
    assert out.count(", verified\n") == count
    status, out, err = run(capsys, "copy", source, destination, "--all-users")
    assert (status, err) == (0, "")
    assert out.endswith(f"copied 0, identical {count}, refused 0\n")
    assert out.count(": identical at ") == count


def test_copy_round_trip_folder_yaml_redis_folder(tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    saved = _fill(tmp_path / "json")
    count = len(saved)
    yaml_url = f"file://{tmp_path}/yaml?format=yaml"
    for source, destination in ((str(tmp_path / "json"), yaml_url), (yaml_url, redis_url), (redis_url, str(tmp_path / "back"))):
        _copied(capsys, source, destination, count)
        _assert_loads_as_saved(destination, saved)
    assert len(list((tmp_path / "yaml").rglob("*.yaml"))) == count
    for path in [*(tmp_path / "yaml").rglob("*.yaml"), *(tmp_path / "back").rglob("*.json")]:
        assert b"sk-" not in path.read_bytes()  # the secrets travelled sealed, and no key was given
    with open_session(redis_url) as session:  # users kept as they are, the no-user "" too
        assert session.list_users() == sorted(USERS)
        assert session.read_document("chat-0", "alice") is not None
    status, out, _ = run(capsys, "copy", str(tmp_path / "back"), str(tmp_path / "json"), "--all-users")
    assert (status, out.splitlines()[-1]) == (0, f"copied 0, identical {count}, refused 0")  # the copy of a copy is the original


def test_a_copied_session_goes_on_saving_appended_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "json")
    assert run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "back"), "--user", "alice")[0] == 0
    session, agent, vault = JSONSession(tmp_path / "back", secret_key=KEY), Agent(), Vault()
    session.load("chat-1", user_id="alice", agent=agent, vault=vault)
    agent.memory.content.append(Msg("user", "after the copy"))
    session.save("chat-1", user_id="alice", agent=agent, vault=vault)
    again = Agent()
    JSONSession(tmp_path / "back", secret_key=KEY).load("chat-1", user_id="alice", agent=again, vault=Vault())
    assert [message.text for message in again.memory.content] == ["hello from alice ✓", "hi", "after the copy"]


def test_a_document_without_metadata_copies_and_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file without statekit's metadata (older statekits, AgentScope's) is the same document once the copy adds it."""
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "chat.json").write_text('{"vault": {"token": "", "keys": ["a", "b"]}}', encoding="utf-8")
    for _ in range(2):
        status, out, err = run(capsys, "copy", str(tmp_path / "old"), f"file://{tmp_path}/new?format=yaml")
        assert (status, err) == (0, "")
    assert out.endswith("copied 0, identical 1, refused 0\n")
    assert YAMLSession(tmp_path / "new").read_document("chat") is not None
    vault = Vault()
    YAMLSession(tmp_path / "new", omit_secrets=True).load("chat", vault=vault)
    assert vault.keys == ["a", "b"]


def test_copy_goes_over_one_user_or_the_default_user(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "json")
    status, out, _ = run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "bob"), "--user", "bob")
    assert (status, out) == (
        0,
        f"chat-0: copied to {tmp_path}/bob/@bob/chat-0.json, verified\n"
        f"chat-1: copied to {tmp_path}/bob/@bob/chat-1.json, verified\n"
        "copied 2, identical 0, refused 0\n",
    )
    status, out, _ = run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "nobody"))
    assert (status, out.splitlines()[-1]) == (0, "copied 2, identical 0, refused 0")
    assert JSONSession(tmp_path / "nobody").list_users() == [""]


def test_the_default_user_goes_to_the_destinations_default_user(tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --user, sessions saved with no user_id stay so: Redis's ``default_user`` becomes the folder's ``""``."""
    with open_session(redis_url) as session:
        session.save("chat", agent=Agent())
        assert session.list_users() == ["default_user"]
    assert run(capsys, "copy", redis_url, str(tmp_path / "json"))[:2] == (0, f"chat: copied to {tmp_path}/json/chat.json, verified\ncopied 1, identical 0, refused 0\n")
    assert JSONSession(tmp_path / "json").list_users() == [""]
    status, out, _ = run(capsys, "copy", redis_url, str(tmp_path / "json"), "--all-users")  # every user's: each under its own id
    assert (status, out.splitlines()[-1]) == (0, "copied 1, identical 0, refused 0")
    assert JSONSession(tmp_path / "json").list_users() == ["", "default_user"]


def test_a_different_destination_session_is_refused_unless_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = _fill(tmp_path / "json")
    other = JSONSession(tmp_path / "back", secret_key=KEY)
    other.save("chat-0", user_id="alice", vault=Vault(token="sk-someone-else"))
    before = other.session_path("chat-0", "alice").read_bytes()
    status, out, err = run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "back"), "--all-users")
    assert status == 1
    assert err.startswith(f"{tmp_path}/back/@alice/chat-0.json: not copied: it holds a different session (revision ")
    assert err.endswith("); give --overwrite to replace it\n")
    assert out.endswith(f"copied {len(saved) - 1}, identical 0, refused 1\n")
    assert other.session_path("chat-0", "alice").read_bytes() == before  # left exactly as it was
    status, out, err = run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "back"), "--all-users", "--overwrite")
    assert (status, err) == (0, "")
    assert f"chat-0 (user 'alice'): replaced {tmp_path}/back/@alice/chat-0.json, verified\n" in out
    assert out.endswith(f"copied 1, identical {len(saved) - 1}, refused 0\n")
    _assert_loads_as_saved(str(tmp_path / "back"), saved)


def test_a_dry_run_writes_nothing(tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    saved = _fill(tmp_path / "json")
    status, out, err = run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "new"), "--all-users", "--dry-run")
    assert (status, err) == (0, "")
    assert f"chat-1 (user 'bob'): would be copied to {tmp_path}/new/@bob/chat-1.json\n" in out
    assert out.endswith(f"would copy {len(saved)}, identical 0, refused 0\n")
    assert not (tmp_path / "new").exists()
    status, out, _ = run(capsys, "copy", str(tmp_path / "json"), redis_url, "--all-users", "--dry-run")
    assert (status, out.splitlines()[-1]) == (0, f"would copy {len(saved)}, identical 0, refused 0")
    with open_session(redis_url) as session:
        assert session.list_users() == []
    JSONSession(tmp_path / "new", secret_key=KEY).save("chat-0", vault=Vault(keys=["mine"]))
    before = JSONSession(tmp_path / "new").session_path("chat-0").read_bytes()
    for extra in ((), ("--overwrite",)):  # a dry run predicts the refusal, and with --overwrite the replacement
        status, out, err = run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "new"), "--dry-run", *extra)
        assert status == (0 if extra else 1)
        assert (f"chat-0: would replace {tmp_path}/new/chat-0.json\n" in out) == bool(extra) and ("not copied" in err) != bool(extra)
    assert JSONSession(tmp_path / "new").session_path("chat-0").read_bytes() == before
    assert JSONSession(tmp_path / "new").list_sessions() == ["chat-0"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["mysql://admin:s3cret@db/app", "DST"], "statekit copy: error: SRC_URL: a store URL of scheme 'mysql' is not one statekit opens"),
        (["SRC", "file://admin:s3cret@example/srv"], "statekit copy: error: DST_URL: a file: store URL names a folder on this machine"),
        (["SRC", "redis://:s3cret@localhost:port/0"], "statekit copy: error: DST_URL: not a usable Redis URL 'redis://:***@localhost:port/0'"),
        (["SRC", "DST", "--user", "alice", "--all-users"], "statekit copy: error: --all-users goes over every session of every user"),
    ],
)
def test_copy_with_a_bad_url_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "SRC").mkdir()
    status, out, err = run(capsys, "copy", *argv)
    assert (status, out) == (2, "")
    assert err.startswith(message) and len(err.splitlines()) == 1
    assert "s3cret" not in err
    assert not (tmp_path / "DST").exists()


def test_copy_from_a_store_that_is_not_there_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "copy", str(tmp_path / "nope"), str(tmp_path / "dst")) == (
        1,
        "",
        f"SRC_URL {str(tmp_path / 'nope')!r}: there is no such folder\n",
    )
    assert run(capsys, "copy", "sqlite:///nope.db", str(tmp_path / "dst"))[2] == "SRC_URL 'nope.db': there is no such database file\n"
    assert not (tmp_path / "dst").exists()


def test_copy_of_a_user_without_sessions_names_who_has_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    JSONSession(tmp_path / "json").save("chat", user_id="alice", agent=Agent())
    status, out, err = run(capsys, "copy", str(tmp_path / "json"), str(tmp_path / "dst"))
    assert (status, out) == (1, "")
    assert err == f"no sessions of user '' in {tmp_path}/json; found 1 session of user 'alice' (add --user alice, or --all-users)\n"


def test_a_progress_bar_on_a_terminal_and_lines_otherwise(tmp_path: Path) -> None:
    _fill(tmp_path / "json")
    command = [sys.executable, "-m", "statekit", "copy", str(tmp_path / "json"), str(tmp_path / "dst"), "--all-users"]
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower, timeout=120, check=False)
        os.close(follower)
        terminal = b""
        with contextlib.suppress(OSError):  # EIO: the terminal's other end is closed and drained
            while chunk := os.read(leader, 4096):
                terminal += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0
    assert done.stdout.decode().endswith("copied 6, identical 0, refused 0\n")
    assert b"\rcopying [" in terminal and b"] 6/6" in terminal
    assert terminal.endswith(b"\r")  # erased at the end, leaving the terminal clean
    plain = subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert (plain.returncode, plain.stderr) == (0, b"")  # not a terminal: no bar, only the lines and the summary
    assert plain.stdout.decode().endswith("copied 0, identical 6, refused 0\n")


@pytest.mark.slow
@SQLITE
@POSTGRES
def test_copy_round_trip_folder_sqlite_postgres_redis_folder(tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from statekit.testing import local_postgres_server  # type: ignore[attr-defined,unused-ignore]  # with the PostgreSQL backend

    saved = _fill(tmp_path / "json")
    with local_postgres_server() as server:
        postgres_url = server.dsn
        sqlite_url = f"sqlite:///{tmp_path}/backup.db"
        legs = ((str(tmp_path / "json"), sqlite_url), (sqlite_url, postgres_url), (postgres_url, redis_url), (redis_url, str(tmp_path / "back")))
        for source, destination in legs:
            _copied(capsys, source, destination, len(saved))
            _assert_loads_as_saved(destination, saved)
    assert b"sk-" not in (tmp_path / "backup.db").read_bytes()
