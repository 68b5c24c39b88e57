"""SQLiteSession (issue 28): the whole contract, the proofs (processes, tasks, secrets) and what is particular to SQLite.

The crash proof (300 SIGKILLs mid-save) is in tests/test_crash.py with the harness's other backends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from append_models import Memory, Msg
from old_schemas import SQLITE_VERSION_1_DDL
from statekit import StateModule, generate_secret_key, state_field, stateful
from statekit.errors import BackendUnavailableError, ConflictError, LeaseHeldError, SessionError
from statekit.session import SessionBase
from statekit.session._sqlite_sql import SCHEMA_VERSION, Statements, ddl_text
from statekit.session.sqlite import SQLiteSession
from statekit.testing import Counter, SessionContract
from workers import run_workers

DB = "sessions.db"
SECRET = "sk-live-5e2d9c0a71-NEVER-IN-A-ROW"


class TestSQLiteContract(SessionContract):
    """statekit.testing's whole contract on one SQLite file."""

    @pytest.fixture(autouse=True)
    def _use_file(self, tmp_path: Path) -> None:
        self._path = tmp_path / DB

    def make_session(self) -> SessionBase:
        return SQLiteSession(self._path)

    @pytest.mark.slow
    def test_large_session(self) -> None:
        super().test_large_session()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / DB


@pytest.fixture
def raw(db: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection to the file, as an operator would open it."""
    SQLiteSession(db).exists("nothing")  # the schema is made on first use
    connection = sqlite3.connect(db, isolation_level=None)
    yield connection
    connection.close()


# -- proofs: no update lost ----------------------------------------------------------------


@pytest.mark.slow
def test_eight_processes_lose_no_update(db: Path) -> None:
    """8 processes x 50 updates of one session, racing to make the schema too: exactly 400."""
    run_workers("sqlite", str(db))
    counter = Counter()
    with SQLiteSession(db) as session:
        session.load("shared", "u", allow_not_exist=False, counter=counter)
        assert session.list_sessions("u") == ["shared"]
    assert counter.count == 8 * 50


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True], ids=["own-objects", "one-object"])
async def test_sixty_four_tasks_lose_no_update(db: Path, shared: bool) -> None:
    """64 asyncio tasks x 5 updates of one session (each with its own session object, or all with one): exactly 320."""
    one = SQLiteSession(db, timeout=60)

    async def worker() -> None:
        counter = Counter()

        def bump() -> None:
            counter.count += 1

        session = one if shared else SQLiteSession(db, timeout=60)
        for _ in range(5):
            await session.aupdate("shared", bump, user_id="u", retries=500, counter=counter)
        if not shared:
            await session.aclose()

    await asyncio.gather(*(worker() for _ in range(64)))
    final = Counter()
    await one.aload("shared", "u", allow_not_exist=False, counter=final)
    await one.aclose()
    assert final.count == 64 * 5


# -- secrets ---------------------------------------------------------------------------------


@stateful
class _Keyed(StateModule):
    token: str = state_field(default="", secret=True)
    memory: Memory = state_field(factory=Memory)


def _every_value(connection: sqlite3.Connection) -> list[Any]:
    tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return [value for table in tables for row in connection.execute(f'SELECT * FROM "{table}"') for value in row]


def test_no_secret_in_plaintext_in_any_row(db: Path, raw: sqlite3.Connection) -> None:
    key = generate_secret_key()
    session = SQLiteSession(db, secret_key=key)
    keyed = _Keyed(token=SECRET)
    keyed.memory.content.append(Msg("user", "hello"))
    session.save("chat", "alice", keyed=keyed)
    keyed.memory.content.append(Msg("assistant", "hi"))
    session.save("chat", "alice", keyed=keyed)  # a delta row
    keyed.memory.note = "changed"
    session.save("chat", "alice", keyed=keyed)  # a whole document again
    keyed.memory.content.append(Msg("user", SECRET[:3]))
    session.save("chat", "alice", keyed=keyed)
    values = _every_value(raw)
    assert raw.execute("SELECT count(*) FROM statekit_sessions_deltas").fetchone() == (1,)
    assert any("hello" in str(value) for value in values)  # the rows are read: the secret would be seen
    assert not [value for value in values if SECRET in str(value)]
    assert all(SECRET.encode() not in path.read_bytes() for path in db.parent.iterdir())
    loaded = _Keyed()
    SQLiteSession(db, secret_key=key).load("chat", "alice", keyed=loaded)
    assert loaded == keyed


# -- the schema ------------------------------------------------------------------------------


def test_the_schema_is_made_on_first_use_with_its_version(db: Path, raw: sqlite3.Connection) -> None:
    assert raw.execute("SELECT table_name, version FROM statekit_schema").fetchall() == [
        ("statekit_sessions", SCHEMA_VERSION)
    ]
    made = {name for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE sql IS NOT NULL")}
    tables = {"statekit_sessions", "statekit_sessions_session_id", "statekit_sessions_deltas", "statekit_sessions_leases"}
    tables.add("statekit_sessions_history")  # schema version 3 (issue 30)
    assert made == {"statekit_schema", *tables}
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    other = sqlite3.connect(":memory:")
    other.executescript(ddl_text())  # the DDL the docs show is what the first use makes
    schema = "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
    assert other.execute(schema).fetchall() == raw.execute(schema).fetchall()
    assert other.execute("SELECT * FROM statekit_schema").fetchall() == [("statekit_sessions", SCHEMA_VERSION)]
    other.close()


def test_the_files_are_private(db: Path) -> None:
    SQLiteSession(db).save("s", counter=Counter())
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in db.parent.iterdir()}
    assert modes == {DB: 0o600, f"{DB}-wal": 0o600, f"{DB}-shm": 0o600}


def test_tables_of_several_names_share_a_file(db: Path, raw: sqlite3.Connection) -> None:
    SQLiteSession(db, table="chats").save("s", counter=Counter(count=1))
    SQLiteSession(db).save("s", counter=Counter(count=2))
    counter = Counter()
    SQLiteSession(db, table="chats").load("s", counter=counter)
    assert counter.count == 1
    assert raw.execute("SELECT table_name FROM statekit_schema ORDER BY 1").fetchall() == [("chats",), ("statekit_sessions",)]


def test_a_newer_schema_version_is_refused_and_nothing_changes(db: Path, raw: sqlite3.Connection) -> None:
    SQLiteSession(db).save("s", counter=Counter(count=3))
    raw.execute("UPDATE statekit_schema SET version = ?", (SCHEMA_VERSION + 1,))
    before = raw.execute("SELECT * FROM statekit_sessions").fetchall()
    message = f"schema version {SCHEMA_VERSION + 1}, written by a newer statekit; this one knows versions up to {SCHEMA_VERSION}"
    session = SQLiteSession(db)
    for call in (lambda: session.save("s", counter=Counter(count=4)), lambda: session.load("s", counter=Counter())):
        with pytest.raises(SessionError, match=message) as caught:
            call()
        assert str(db) in str(caught.value) and "upgrade statekit" in str(caught.value)
    assert raw.execute("SELECT * FROM statekit_sessions").fetchall() == before


def test_a_table_statekit_did_not_make_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE statekit_sessions (id INTEGER PRIMARY KEY, body TEXT)")
    connection.close()
    with pytest.raises(SessionError, match="has a table 'statekit_sessions' that statekit did not make"):
        SQLiteSession(path).save("s", counter=Counter())


def test_a_version_1_table_is_upgraded_in_place_on_first_use(db: Path) -> None:
    """Tables made by version 1's DDL, holding a session with deltas, get the leases table; the data stays."""
    memory = Memory(content=[Msg("user", f"message {i}") for i in range(50)], note="kept")
    writer = SQLiteSession(db, table="scratch")  # the rows version 1 wrote: the format is unchanged
    writer.save("chat", "alice", memory=memory)
    memory.content.append(Msg("user", "appended"))
    writer.save("chat", "alice", memory=memory)
    writer.close()
    raw = sqlite3.connect(db, isolation_level=None)
    raw.executescript(SQLITE_VERSION_1_DDL)
    raw.execute("INSERT INTO statekit_sessions SELECT * FROM scratch")
    raw.execute("INSERT INTO statekit_sessions_deltas SELECT * FROM scratch_deltas")
    tables = ("SELECT * FROM statekit_sessions", "SELECT * FROM statekit_sessions_deltas")
    before = [raw.execute(query).fetchall() for query in tables]
    assert len(before[1]) == 1  # a delta row
    session, other = SQLiteSession(db), SQLiteSession(db)
    loaded = Memory()
    session.load("chat", "alice", memory=loaded)  # the first use upgrades
    assert loaded == memory
    versions = raw.execute("SELECT table_name, version FROM statekit_schema ORDER BY 1").fetchall()
    assert versions == [("scratch", SCHEMA_VERSION), ("statekit_sessions", SCHEMA_VERSION)] and SCHEMA_VERSION == 3
    assert [raw.execute(query).fetchall() for query in tables] == before
    fresh = sqlite3.connect(":memory:")
    fresh.executescript(ddl_text())  # the upgraded tables are the ones a new file gets
    schema = "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name LIKE 'statekit_sessions%' ORDER BY name"
    assert raw.execute(schema).fetchall() == fresh.execute(schema).fetchall()
    fresh.close()
    with session.lease("chat", "alice", ttl=120) as lease:
        assert lease.token == 1
        with pytest.raises(LeaseHeldError):
            other.save("chat", "alice", memory=Memory(note="not the holder"))
        loaded.content.append(Msg("user", "under the lease"))
        session.save("chat", "alice", memory=loaded)
    again = Memory()
    other.load("chat", "alice", memory=again)
    assert again == loaded
    raw.close()


def test_an_upgrade_of_many_processes_at_once_happens_once(db: Path) -> None:
    with sqlite3.connect(db, isolation_level=None) as raw:
        raw.executescript(SQLITE_VERSION_1_DDL)
    raw.close()
    with concurrent.futures.ProcessPoolExecutor(4) as pool:
        assert list(pool.map(_exists_in, [str(db)] * 4)) == [False] * 4
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT version FROM statekit_schema").fetchall() == [(SCHEMA_VERSION,)]
        assert raw.execute("SELECT count(*) FROM statekit_sessions_leases").fetchone() == (0,)
    raw.close()


def _exists_in(path: str) -> bool:
    return SQLiteSession(path).exists("s")


# -- leases --------------------------------------------------------------------------------------


def test_a_lease_is_a_row_of_its_own_table_that_outlives_the_session(db: Path, raw: sqlite3.Connection) -> None:
    session = SQLiteSession(db)
    lease = session.lease("chat", "alice", ttl=120)  # the session need not exist
    assert session.list_sessions("alice") == [] and not session.exists("chat", "alice")
    leases = "SELECT user_id, session_id, token, expires_at FROM statekit_sessions_leases"
    ((user, session_id, token, expires_at),) = raw.execute(leases).fetchall()
    assert (user, session_id, token) == ("alice", "chat", lease.token)
    assert abs(expires_at - lease.expires_at.timestamp()) < 1e-3  # seconds since the epoch, the local clock
    session.save("chat", "alice", counter=Counter(count=1))
    assert session.list_sessions("alice") == ["chat"] and session.list_users() == ["alice"]
    assert session.delete("chat", "alice")
    lease.release()
    assert raw.execute(leases).fetchall() == [("alice", "chat", lease.token, 0.0)]  # released, the token kept
    assert session.list_sessions("alice") == [] and session.list_users() == []
    with session.lease("chat", "alice") as again:
        assert again.token == lease.token + 1


def test_refused_writes_change_nothing(db: Path, raw: sqlite3.Connection) -> None:
    holder, other = SQLiteSession(db), SQLiteSession(db)
    holder.save("chat", counter=Counter(count=1))
    rows = "SELECT * FROM statekit_sessions"
    before = raw.execute(rows).fetchall()
    with holder.lease("chat", ttl=120):
        for _ in range(3):
            with pytest.raises(LeaseHeldError, match="is leased by another session object until"):
                other.save("chat", overwrite=True, counter=Counter(count=2))
            with pytest.raises(LeaseHeldError):
                other.delete("chat")
        assert raw.execute(rows).fetchall() == before


# -- queryable, indexed ------------------------------------------------------------------------


def test_documents_are_json_text_that_sql_can_query(db: Path, raw: sqlite3.Connection) -> None:
    session = SQLiteSession(db)
    for user, count in (("alice", 3), ("bob", 7)):
        session.save("chat", user, counter=Counter(count=count))
    found = raw.execute(
        "SELECT user_id FROM statekit_sessions WHERE json_extract(document, '$.counter.count') > 5"
    ).fetchall()
    assert found == [("bob",)]
    assert raw.execute("SELECT typeof(document), json_valid(document) FROM statekit_sessions LIMIT 1").fetchone() == ("text", 1)
    assert raw.execute("SELECT DISTINCT length(revision), length(saved_at) FROM statekit_sessions").fetchall() == [(40, 24)]


def test_listing_and_near_matches_use_indexes(raw: sqlite3.Connection) -> None:
    """The statements SQLiteSession runs read an index, never the documents."""
    sql = Statements("statekit_sessions")
    values = {"user": "u", "session": "s", "limit": 10}

    def plan(statement: str) -> str:
        return " ".join(row[-1] for row in raw.execute("EXPLAIN QUERY PLAN " + statement, values))

    for statement in (sql.list, sql.list_some):
        assert "USING COVERING INDEX sqlite_autoindex_statekit_sessions_1 (user_id=?)" in plan(statement)
    assert "USING COVERING INDEX statekit_sessions_session_id (session_id=?)" in plan(sql.owners)
    assert "USING COVERING INDEX sqlite_autoindex_statekit_sessions_1" in plan(sql.users)


def test_a_missing_load_names_the_same_id_of_another_user(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    session = SQLiteSession(db)
    session.save("chat-1", "alice", counter=Counter())
    with caplog.at_level(logging.WARNING, logger="statekit"):
        session.load("chat-1", "bob", counter=Counter())
        session.load("chat-2", "alice", counter=Counter())
    assert "the same id under user_id='alice'" in caplog.text
    assert "session 'chat-1' of this user" in caplog.text


# -- append-only lists: a turn writes the new items only ------------------------------------


def test_an_append_writes_only_the_new_items_beside_the_document(db: Path, raw: sqlite3.Connection) -> None:
    session, memory = SQLiteSession(db), Memory()
    memory.content += [Msg("user", f"message {i}") for i in range(1000)]
    session.save("chat", memory=memory)
    document = raw.execute("SELECT document FROM statekit_sessions").fetchone()
    assert len(document[0]) > 30_000
    for turn in range(3):
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        memory.content.append(Msg("user", f"turn {turn}"))
        session.save("chat", memory=memory)
        written = (db.parent / f"{DB}-wal").stat().st_size
        assert written < 3 * 4096 + 1024, f"a turn wrote {written} bytes (pages) to the database"
    assert raw.execute("SELECT document FROM statekit_sessions").fetchone() == document
    lines = raw.execute("SELECT seq, json_extract(line, '$[1][1]') FROM statekit_sessions_deltas ORDER BY seq").fetchall()
    assert lines == [(n + 1, f'[{{"role":"user","text":"turn {n}"}}]') for n in range(3)]
    loaded = Memory()
    SQLiteSession(db).load("chat", memory=loaded)
    assert loaded.content == memory.content
    memory.note = "a change that is not an append"
    session.save("chat", memory=memory)  # a whole document: the deltas go with the one it replaces
    assert raw.execute("SELECT count(*) FROM statekit_sessions_deltas").fetchone() == (0,)
    SQLiteSession(db).load("chat", memory=loaded)
    assert loaded.content == memory.content and loaded.note == memory.note


def test_a_revision_checked_write_over_deltas(db: Path) -> None:
    """A session with deltas stores no revision in its row: a write that expects one compares what a read joins."""
    session, memory = SQLiteSession(db), Memory()
    memory.content.append(Msg("user", "one"))
    session.save("chat", memory=memory)
    memory.content.append(Msg("user", "two"))
    session.save("chat", memory=memory)
    revision = session.revision("chat")
    assert revision is not None
    with pytest.raises(ConflictError):
        session.write_document("chat", {"memory": {"content": [], "note": ""}}, expected_revision="0" * 40)
    assert session.revision("chat") == revision
    written = session.write_document("chat", {"memory": {"content": [], "note": "reset"}}, expected_revision=revision)
    assert session.revision("chat") == written
    loaded = Memory()
    session.load("chat", memory=loaded)
    assert (loaded.content, loaded.note) == ([], "reset")


# -- timeouts, the event loop, errors --------------------------------------------------------


async def test_a_locked_database_fails_within_the_timeout_without_blocking_the_loop(db: Path) -> None:
    session = SQLiteSession(db, timeout=0.5)
    await session.asave("s", counter=Counter(count=1))
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    try:
        with pytest.raises(BackendUnavailableError, match=r"is busy: another connection held its lock for longer than timeout=0.5 s"):
            await session.asave("s", counter=Counter(count=2))
        waited = time.monotonic() - started
        loaded = Counter()
        await session.aload("s", counter=loaded)  # WAL: a reader does not wait for the writer
    finally:
        ticker.cancel()
        holder.execute("ROLLBACK")
        holder.close()
    assert 0.4 < waited < 10, waited
    assert ticks > 5, "the event loop was blocked while the save waited"
    assert loaded.count == 1
    await session.asave("s", counter=Counter(count=2))
    await session.aload("s", counter=loaded)
    assert loaded.count == 2
    await session.aclose()


async def test_a_call_that_waits_for_a_thread_past_its_timeout_fails_and_writes_nothing(db: Path) -> None:
    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    session = SQLiteSession(db, timeout=0.3)
    await session.asave("s", counter=Counter(count=1))
    busy = loop.run_in_executor(None, time.sleep, 1.0)  # the only worker thread, taken for 1 s
    with pytest.raises(BackendUnavailableError, match=r"the call did not end within timeout=0.3 s"):
        await session.asave("s", counter=Counter(count=2))
    await busy
    loaded = Counter()
    await session.aload("s", counter=loaded)
    assert loaded.count == 1
    await session.aclose()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": ":memory:"}, "needs the path of a database file"),
        ({"path": ""}, "needs the path of a database file"),
        ({"path": "file:x.db?mode=ro"}, "needs the path of a database file"),
        ({"path": 3}, "needs the path of a database file"),
        ({"table": "x; DROP TABLE y"}, "table must be a plain SQL name"),
        ({"table": "statekit_schema"}, "table must be a plain SQL name"),
        ({"timeout": 0}, "timeout must be a positive number of seconds"),
        ({"timeout": True}, "timeout must be a positive number of seconds"),
        ({"omit_secrets": "no"}, "omit_secrets"),
    ],
)
def test_bad_arguments_are_refused(db: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(SessionError, match=message):
        SQLiteSession(**{"path": db, **options})


def test_a_folder_is_not_a_database_file(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="is a folder: give the database file"):
        SQLiteSession(tmp_path)


def test_a_file_that_is_not_a_database_is_a_session_error(db: Path) -> None:
    db.write_bytes(b"not a database at all, " * 100)
    with pytest.raises(SessionError, match=f"SQLite database {db} refused: file is not a database") as caught:
        SQLiteSession(db).load("s", counter=Counter())
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    assert db.read_bytes() == b"not a database at all, " * 100


def test_a_closed_session_refuses_calls(db: Path) -> None:
    session = SQLiteSession(db)
    session.save("s", counter=Counter())
    session.close()
    with pytest.raises(SessionError, match="this session is closed"):
        session.load("s", counter=Counter())


def test_where_a_session_is(db: Path) -> None:
    session = SQLiteSession(db, table="chats")
    assert session.location("s", "u") == f"{db} table chats session 's' of user 'u'"
    assert repr(session) == f"SQLiteSession(path={str(db)!r}, table='chats')"


def test_the_docs_show_the_schema_as_it_is_made() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "sessions.md").read_text(encoding="utf-8")
    shown = page.split("## SQLiteSession", 1)[1].split("```sql\n", 1)[1].split("```", 1)[0]
    assert shown == ddl_text()


def test_a_forked_child_opens_its_own_connections(db: Path) -> None:
    """A session object used before a fork works in the child (its own connections) and, after, in the parent."""
    import os

    session = SQLiteSession(db)
    session.save("s", counter=Counter(count=1))  # the parent's pool now holds a connection
    pid = os.fork()
    if pid == 0:  # the child (its own event loop: the blocking twins' thread is the parent's): exit status only
        status = 1
        try:
            asyncio.run(session.asave("s", counter=Counter(count=2)))
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    counter = Counter()
    with pytest.raises(ConflictError):  # the child's save is another writer's
        session.save("s", counter=Counter(count=3))
    session.load("s", counter=counter)
    assert counter.count == 2
    session.save("s", counter=Counter(count=3))
    session.close()
