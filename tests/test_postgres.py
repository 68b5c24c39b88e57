"""PostgresSession against a real PostgreSQL server (a throw-away cluster, see ``postgres_server``).

The whole session contract, the issue's proofs (8 processes and 64 tasks racing
on one session, no plaintext secret in any row, append-only saves that insert
only their new items) and the errors of a server that is down, silent, refusing
our password, missing the database or blocking a statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from append_models import KeyedMemory, Memory, Msg
from old_schemas import PG_VERSION_1_DDL
from statekit import generate_secret_key
from statekit.errors import (
    BackendAuthError,
    BackendUnavailableError,
    ConflictError,
    LeaseHeldError,
    SessionError,
    WriteOutcomeUnknownError,
)
from statekit.session import MISSING_REVISION
from statekit.session.postgres import GRACE, SCHEMA_VERSION, PostgresSession
from statekit.testing import Counter, PostgresServer, SessionContract, local_postgres_server
from workers import run_workers

pytestmark = pytest.mark.postgres


def _table() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def table() -> str:
    """A fresh sessions table name: each test sees only its own rows."""
    return _table()


def _rows(dsn: str, query: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query.encode(), params).fetchall()


class TestPostgresContract(SessionContract):
    """The whole backend contract, on one table shared by the checks (they use fresh user ids)."""

    @pytest.fixture(autouse=True)
    def _server(self, postgres_dsn: str) -> None:
        self.dsn = postgres_dsn
        self.table = "contract_sessions"

    def make_session(self) -> PostgresSession:
        return PostgresSession.from_url(self.dsn, table=self.table, timeout=60)


def test_a_save_is_a_row_with_queryable_jsonb_and_the_exact_bytes(postgres_dsn: str, table: str) -> None:
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        session.save("chat", user_id="alice", counter=Counter(count=7))
        revision = session.revision("chat", user_id="alice")
    rows = _rows(postgres_dsn, f"SELECT document->'counter'->>'count', raw, revision FROM {table} WHERE user_id = 'alice'")
    assert len(rows) == 1
    count, raw, stored_revision = rows[0]
    assert count == "7"
    assert isinstance(raw, bytes)
    assert b'"count":7' in raw
    assert stored_revision == revision
    versions = _rows(postgres_dsn, "SELECT version FROM statekit_schema WHERE table_name = %s", table)
    assert versions == [(SCHEMA_VERSION,)]
    compressions = _rows(
        postgres_dsn,
        "SELECT attname, attcompression FROM pg_attribute WHERE attrelid IN (%s::regclass, %s::regclass) AND attcompression <> ''"
        " ORDER BY attname",
        table, f"{table}_deltas",
    )  # fmt: skip
    assert compressions == [("delta", "l"), ("document", "l"), ("line", "l"), ("raw", "l")]  # Debian's server has lz4


def test_a_document_holding_nul_is_stored_whole_with_a_null_jsonb(postgres_dsn: str, table: str) -> None:
    """jsonb cannot hold \\u0000: the row keeps the exact bytes and leaves ``document`` NULL."""
    memory = Memory(content=[Msg("user", "nul \x00 here")])
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        session.save("chat", memory=memory)
        loaded = Memory()
        session.load("chat", memory=loaded)
    assert loaded.content == [Msg("user", "nul \x00 here")]
    assert _rows(postgres_dsn, f"SELECT document IS NULL FROM {table}") == [(True,)]


def test_an_append_only_save_inserts_only_the_new_items(postgres_dsn: str, table: str) -> None:
    memory = Memory(content=[Msg("user", f"m{i}") for i in range(500)])
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        session.save("chat", memory=memory)
        raw_before = _rows(postgres_dsn, f"SELECT raw FROM {table}")
        for turn in range(3):
            memory.content.append(Msg("assistant", f"turn {turn}"))
            session.save("chat", memory=memory)
        deltas = _rows(postgres_dsn, f"SELECT seq, delta FROM {table}_deltas ORDER BY seq")
        assert [seq for seq, _ in deltas] == [1, 2, 3]
        assert all(len(str(delta)) < 200 for _, delta in deltas)  # each holds its one new message
        assert _rows(postgres_dsn, f"SELECT raw FROM {table}") == raw_before  # the document was not rewritten
        fresh, loaded = PostgresSession.from_url(postgres_dsn, table=table), Memory()
        with fresh:
            fresh.load("chat", memory=loaded)
            assert loaded.content == memory.content
            loaded.content.append(Msg("user", "from a loader"))  # its base, read back from the rows, is exact
            fresh.save("chat", memory=loaded)
            assert _rows(postgres_dsn, f"SELECT max(seq) FROM {table}_deltas") == [(4,)]
            assert _rows(postgres_dsn, f"SELECT raw FROM {table}") == raw_before
            loaded.note = "changed"  # not an append: a full rewrite, which drops the deltas
            fresh.save("chat", memory=loaded)
    assert _rows(postgres_dsn, f"SELECT count(*) FROM {table}_deltas") == [(0,)]


def test_a_stale_delta_save_conflicts_and_writes_nothing(postgres_dsn: str, table: str) -> None:
    first, second = PostgresSession.from_url(postgres_dsn, table=table), PostgresSession.from_url(postgres_dsn, table=table)
    with first, second:
        mine, theirs = Memory(content=[Msg("user", "hi")]), Memory()
        first.save("chat", memory=mine)
        second.load("chat", memory=theirs)
        mine.content.append(Msg("assistant", "mine"))
        first.save("chat", memory=mine)
        theirs.content.append(Msg("assistant", "theirs"))
        with pytest.raises(ConflictError):
            second.save("chat", memory=theirs)
        loaded = Memory()
        first.load("chat", memory=loaded)
    assert [m.text for m in loaded.content] == ["hi", "mine"]


def test_write_document_over_a_revision_of_a_row_with_deltas(postgres_dsn: str, table: str) -> None:
    """A row with deltas has no revision column: the compare-and-set hashes it under a row lock."""
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        memory = Memory(content=[Msg("user", "a")])
        session.save("chat", memory=memory)
        memory.content.append(Msg("user", "b"))
        session.save("chat", memory=memory)
        revision = session.revision("chat")
        assert revision is not None
        document = session.read_document("chat")
        assert document is not None
        with pytest.raises(ConflictError):
            session.write_document("chat", document.data, expected_revision="0" * 40)
        written = session.write_document("chat", document.data, expected_revision=revision)
        assert session.revision("chat") == written
        with pytest.raises(ConflictError):
            session.write_document("chat", document.data, expected_revision=MISSING_REVISION)


class _OwnPool:
    """The least a user's pool offers (``psycopg_pool.AsyncConnectionPool`` has the same ``connection``)."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.lent = dsn, 0

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        self.lent += 1
        try:
            yield conn
        finally:
            await conn.close()


async def test_a_pool_of_ones_own_is_used_and_left_open(postgres_dsn: str, table: str) -> None:
    pool = _OwnPool(postgres_dsn)
    async with PostgresSession(pool, table=table) as session:
        await session.asave("chat", counter=Counter(count=3))
        counter = Counter()
        await session.aload("chat", counter=counter)
    assert counter.count == 3
    assert pool.lent >= 2
    assert repr(session) == f"PostgresSession(address='a pool', table={table!r})"


def test_no_plaintext_secret_in_any_row(postgres_dsn: str, table: str) -> None:
    key, secret = generate_secret_key(), "sk-live-" + uuid.uuid4().hex
    memory = KeyedMemory(api_key=secret, content=[Msg("user", "hi")])
    with PostgresSession.from_url(postgres_dsn, table=table, secret_key=key) as session:
        session.save("chat", user_id="alice", memory=memory)
        memory.content.append(Msg("user", "again"))
        session.save("chat", user_id="alice", memory=memory)
        loaded = KeyedMemory()
        session.load("chat", user_id="alice", memory=loaded)
    assert loaded.api_key == secret
    dumped = _rows(postgres_dsn, f"SELECT t::text FROM {table} t") + _rows(postgres_dsn, f"SELECT d::text FROM {table}_deltas d")
    assert len(dumped) == 2
    for (row,) in dumped:
        assert isinstance(row, str)
        assert secret not in row
        assert secret.encode().hex() not in row  # nor in a bytea column's hex


@pytest.mark.slow
def test_eight_processes_times_fifty_updates_make_exactly_400(postgres_dsn: str, table: str) -> None:
    run_workers("postgres", postgres_dsn, prefix=table)
    counter = Counter()
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        session.load("shared", user_id="u", counter=counter)
    assert counter.count == 400


async def test_sixty_four_tasks_updating_one_session(postgres_dsn: str, table: str) -> None:
    async with PostgresSession.from_url(postgres_dsn, table=table, timeout=60) as session:

        async def bump() -> None:
            counter = Counter()

            def add() -> None:
                counter.count += 1

            await session.aupdate("shared", add, retries=1000, counter=counter)

        await asyncio.gather(*(bump() for _ in range(64)))
        counter = Counter()
        await session.aload("shared", counter=counter)
    assert counter.count == 64


# -- errors ------------------------------------------------------------------------------


def _deadline(timeout: float) -> float:
    return timeout + GRACE + 3  # the documented bound, and some slack for a loaded machine


def test_a_server_that_is_down_is_unavailable(table: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once it is closed
    started = time.monotonic()
    with PostgresSession.from_url(f"postgresql://u:pw@127.0.0.1:{port}/db", table=table, timeout=2) as session:
        with pytest.raises(BackendUnavailableError, match="is unavailable") as caught:
            session.save("chat", counter=Counter())
    assert time.monotonic() - started < _deadline(2)
    assert not isinstance(caught.value.__cause__, psycopg.Error) or caught.value.__suppress_context__


def test_a_silent_server_is_unavailable_within_the_timeout(table: str) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with PostgresSession.from_url(f"postgresql://u@127.0.0.1:{port}/db", table=table, timeout=2) as session:
            with pytest.raises(BackendUnavailableError) as caught:
                session.save("chat", counter=Counter())
            assert not isinstance(caught.value, WriteOutcomeUnknownError)  # never connected: nothing was sent
        assert time.monotonic() - started < _deadline(2)


def _cluster_pids(server: PostgresServer) -> list[int]:
    """The postmaster's pid and its children's (every process of the throw-away cluster)."""
    with open(os.path.join(server.data_dir, "postmaster.pid"), encoding="utf-8") as file:
        postmaster = int(file.readline())
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(entry))
    return [postmaster, *children]


@pytest.mark.slow
def test_a_server_that_stops_answering_mid_write_leaves_the_outcome_unknown(table: str) -> None:
    """A paused server: the statement_timeout cannot fire, so the client's own deadline does."""
    with local_postgres_server() as server, PostgresSession.from_url(server.dsn, table=table, timeout=1) as session:
        session.save("chat", counter=Counter(count=1))
        pids = _cluster_pids(server)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(WriteOutcomeUnknownError, match="may or may not have been stored"):
                session.save("chat", counter=Counter(count=2))
            assert time.monotonic() - started < _deadline(1)
            with pytest.raises(BackendUnavailableError) as caught:
                session.exists("chat")
            assert not isinstance(caught.value, WriteOutcomeUnknownError)  # a read has no outcome to lose
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        counter = Counter()
        session.load("chat", counter=counter)
    assert counter.count in (1, 2)


def test_a_wrong_password_is_an_auth_error_that_never_shows_it(postgres_server: PostgresServer, table: str) -> None:
    wrong = "Wr0ng-" + uuid.uuid4().hex
    url = f"postgresql://{postgres_server.user}:{wrong}@{postgres_server.host}:{postgres_server.port}/postgres"
    with PostgresSession.from_url(url, table=table, timeout=5) as session:
        with pytest.raises(BackendAuthError, match="refused our credentials") as caught:
            session.save("chat", counter=Counter())
    assert wrong not in str(caught.value)
    assert wrong not in repr(session)


def test_a_missing_database_is_unavailable_and_named(postgres_server: PostgresServer, table: str) -> None:
    url = postgres_server.dsn.rsplit("/", 1)[0] + "/no_such_db"
    with PostgresSession.from_url(url, table=table, timeout=5) as session:
        with pytest.raises(BackendUnavailableError, match='database "no_such_db" does not exist') as caught:
            session.exists("chat")
    assert postgres_server.password not in str(caught.value)


def test_a_statement_blocked_by_a_lock_times_out_and_writes_nothing(postgres_dsn: str, table: str) -> None:
    """The URL's own ``options`` are kept beside statekit's ``statement_timeout``."""
    url = f"{postgres_dsn}?options=-c%20application_name%3D{table}"
    with PostgresSession.from_url(url, table=table, timeout=1) as session:
        session.save("chat", counter=Counter(count=1))
        assert _rows(postgres_dsn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", table) == [(1,)]
        with psycopg.connect(postgres_dsn) as locker:  # a transaction holding the row
            locker.execute(f"SELECT * FROM {table} FOR UPDATE".encode())
            started = time.monotonic()
            with pytest.raises(BackendUnavailableError, match="did not finish within 1 s"):
                session.save("chat", counter=Counter(count=2))
            assert time.monotonic() - started < _deadline(1)
            locker.rollback()
        counter = Counter()
        session.load("chat", counter=counter)
    assert counter.count == 1


def test_a_bad_url_is_a_session_error_without_the_password() -> None:
    with pytest.raises(SessionError, match="postgresql://") as caught:
        PostgresSession.from_url("mysql://root:hunter2@host/db")
    assert "hunter2" not in str(caught.value)
    for url in ("postgresql://root:hun%zzter2@host/db", "postgresql://root:hunter2@host/db?nosuch=1", "postgres://root:hunter2@[bad"):
        with pytest.raises(SessionError, match="not a usable PostgreSQL URL") as caught:
            PostgresSession.from_url(url)
        assert "hun" not in str(caught.value)
        assert "***" in str(caught.value)


def test_bad_options_are_refused() -> None:
    with pytest.raises(SessionError, match="table must be a plain SQL name"):
        PostgresSession("host=x", table="x; DROP TABLE y")
    with pytest.raises(SessionError, match="timeout must be a positive number"):
        PostgresSession("host=x", timeout=0)


# -- schema ------------------------------------------------------------------------------


def test_a_newer_schema_version_is_refused(postgres_dsn: str, table: str) -> None:
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        session.save("chat", counter=Counter())
    _rows(postgres_dsn, "UPDATE statekit_schema SET version = 99 WHERE table_name = %s RETURNING 1", table)
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        with pytest.raises(SessionError, match="schema version 99, newer than"):
            session.exists("chat")


def test_without_create_schema_a_missing_table_says_init_db(postgres_dsn: str, table: str) -> None:
    with PostgresSession.from_url(postgres_dsn, table=table, create_schema=False) as session:
        with pytest.raises(SessionError, match="statekit init-db"):
            session.exists("chat")


def test_the_documented_ddl_is_what_runs() -> None:
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "backends.md").read_text(encoding="utf-8")
    assert PostgresSession.schema_ddl() in page


def test_init_db_creates_the_tables(postgres_dsn: str, table: str, capsys: pytest.CaptureFixture[str]) -> None:
    from statekit.cli import main

    status = main(["init-db", postgres_dsn, "--table", table])
    done = capsys.readouterr()
    assert status == 0, done.err
    assert f"schema version {SCHEMA_VERSION}" in done.out
    assert postgres_dsn.split(":")[2].split("@")[0] not in done.out + done.err  # the password
    assert _rows(postgres_dsn, "SELECT version FROM statekit_schema WHERE table_name = %s", table) == [(SCHEMA_VERSION,)]


def _version_1_table(dsn: str, table: str) -> Memory:
    """Tables made by version 1's DDL, holding a session with a delta (rows as version 1 wrote them: the format
    is unchanged, so they are copied from a table this statekit wrote). The memory they hold."""
    scratch = _table()
    memory = Memory(content=[Msg("user", f"message {i}") for i in range(50)], note="kept")
    with PostgresSession.from_url(dsn, table=scratch) as writer:
        writer.save("chat", "alice", memory=memory)
        memory.content.append(Msg("user", "appended"))
        writer.save("chat", "alice", memory=memory)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(PG_VERSION_1_DDL.replace("{t}", table).encode())
        conn.execute(f"INSERT INTO {table} SELECT * FROM {scratch}".encode())
        conn.execute(f"INSERT INTO {table}_deltas SELECT * FROM {scratch}_deltas".encode())
    assert _rows(dsn, f"SELECT count(*) FROM {table}_deltas") == [(1,)]
    return memory


def _leases_table(dsn: str, table: str) -> bool:
    return _rows(dsn, "SELECT to_regclass(%s) IS NOT NULL", f"{table}_leases") == [(True,)]


def test_a_version_1_table_is_upgraded_in_place_on_first_use(postgres_dsn: str, table: str) -> None:
    memory = _version_1_table(postgres_dsn, table)
    rows = f"SELECT * FROM {table} ORDER BY session_id"
    before = _rows(postgres_dsn, rows)
    with PostgresSession.from_url(postgres_dsn, table=table, create_schema=False) as session:
        added = r"\(which adds the leases table and the history table\)"  # schema versions 2 and 3
        with pytest.raises(SessionError, match=rf"schema version 1, older than this statekit's {SCHEMA_VERSION} {added}.*init-db URL"):
            session.exists("chat", "alice")
    assert _rows(postgres_dsn, "SELECT version FROM statekit_schema WHERE table_name = %s", table) == [(1,)]
    assert not _leases_table(postgres_dsn, table)  # refused: nothing changed
    with (
        PostgresSession.from_url(postgres_dsn, table=table) as session,
        PostgresSession.from_url(postgres_dsn, table=table) as other,
    ):
        loaded = Memory()
        session.load("chat", "alice", memory=loaded)  # the first use upgrades
        assert loaded == memory
        assert _rows(postgres_dsn, "SELECT version FROM statekit_schema WHERE table_name = %s", table) == [(SCHEMA_VERSION,)]
        assert _rows(postgres_dsn, rows) == before
        with session.lease("chat", "alice", ttl=120) as lease:
            assert lease.token == 1
            with pytest.raises(LeaseHeldError):
                other.save("chat", "alice", memory=Memory(note="not the holder"))
            loaded.content.append(Msg("user", "under the lease"))
            session.save("chat", "alice", memory=loaded)
        again = Memory()
        other.load("chat", "alice", memory=again)
        assert again == loaded


async def test_a_first_lease_waits_for_a_write_in_flight_and_the_writes_after_it_see_it(postgres_dsn: str, table: str) -> None:
    """A session never leased has no lease row: a take must still order itself with a write already running
    (the write lands before the take returns, and the holder sees it), never let it land under the lease."""
    async with (
        PostgresSession.from_url(postgres_dsn, table=table, timeout=60) as holder,
        PostgresSession.from_url(postgres_dsn, table=table, timeout=60) as other,
    ):
        await holder.asave("chat", "alice", memory=Memory(note="first"))
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as blocker:
            # hold the session's row, so that the other's save passes its fence and then waits for the row
            await blocker.execute(f'SELECT 1 FROM "{table}" WHERE session_id = %s FOR UPDATE'.encode(), ("chat",))
            saving = asyncio.create_task(other.asave("chat", "alice", overwrite=True, memory=Memory(note="in flight")))
            await _until_a_backend_waits_for_a_lock(postgres_dsn, table)
            taking = asyncio.create_task(holder.alease("chat", "alice", ttl=120))
            await asyncio.sleep(0.5)
            assert not taking.done(), "the first lease was granted while a write it fences was still running"
            await blocker.rollback()
        await saving
        lease = await taking
        loaded = Memory()
        await holder.aload("chat", "alice", memory=loaded)
        assert loaded.note == "in flight"  # the write landed before the take returned: the holder sees it
        with pytest.raises(LeaseHeldError):
            await other.asave("chat", "alice", overwrite=True, memory=Memory(note="under the lease"))
        await lease.arelease()


async def _until_a_backend_waits_for_a_lock(dsn: str, table: str) -> None:
    query = b"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
        for _ in range(600):
            row = await (await watcher.execute(query, (f'%"{table}"%',))).fetchone()
            if row is not None and row[0]:
                return
            await asyncio.sleep(0.1)
    raise AssertionError("the save never came to wait for the held row")


def test_init_db_upgrades_a_version_1_table(postgres_dsn: str, table: str, capsys: pytest.CaptureFixture[str]) -> None:
    from statekit.cli import main

    memory = _version_1_table(postgres_dsn, table)
    status = main(["init-db", postgres_dsn, "--table", table])
    done = capsys.readouterr()
    assert status == 0, done.err
    assert f"schema version {SCHEMA_VERSION}" in done.out and _leases_table(postgres_dsn, table)
    with PostgresSession.from_url(postgres_dsn, table=table, create_schema=False) as session:
        loaded = Memory()
        session.load("chat", "alice", memory=loaded)
        assert loaded == memory


# -- leases ----------------------------------------------------------------------------------


def test_a_lease_is_a_row_of_its_own_table_on_the_servers_clock(postgres_dsn: str, table: str) -> None:
    leases = (
        f"SELECT user_id, session_id, token, extract(epoch FROM expires_at - now())::float8, expires_at = 'epoch' "
        f"FROM {table}_leases"
    )
    with PostgresSession.from_url(postgres_dsn, table=table) as session:
        lease = session.lease("chat", "alice", ttl=120)  # the session need not exist
        assert session.list_sessions("alice") == [] and not session.exists("chat", "alice")
        ((user, session_id, token, left, ended),) = _rows(postgres_dsn, leases)
        assert (user, session_id, token) == ("alice", "chat", lease.token)
        assert isinstance(left, float) and 100 < left <= 120 and not ended, left  # ends 120 s after the server's now
        session.save("chat", "alice", counter=Counter(count=1))
        assert session.list_sessions("alice") == ["chat"] and session.list_users() == ["alice"]
        assert session.delete("chat", "alice")
        lease.release()
        ((_, _, kept, _, ended),) = _rows(postgres_dsn, leases)
        assert kept == lease.token and ended  # released (its expiry the epoch), the token kept after the delete
        assert session.list_sessions("alice") == [] and session.list_users() == []
        with session.lease("chat", "alice") as again:
            assert again.token == lease.token + 1


def test_refused_writes_change_nothing(postgres_dsn: str, table: str) -> None:
    with (
        PostgresSession.from_url(postgres_dsn, table=table) as holder,
        PostgresSession.from_url(postgres_dsn, table=table) as other,
    ):
        memory = Memory(content=[Msg("user", "one")])
        holder.save("chat", memory=memory)
        theirs = Memory()
        other.load("chat", memory=theirs)
        rows = f"SELECT revision, raw, deltas FROM {table}"
        before = _rows(postgres_dsn, rows)
        with holder.lease("chat", ttl=120):
            theirs.content.append(Msg("user", "a delta"))
            with pytest.raises(LeaseHeldError, match="is leased by another session object until"):
                other.save("chat", memory=theirs)
            with pytest.raises(LeaseHeldError):
                other.save("chat", overwrite=True, memory=Memory(note="whole"))
            with pytest.raises(LeaseHeldError):
                other.delete("chat")
            assert _rows(postgres_dsn, rows) == before and _rows(postgres_dsn, f"SELECT count(*) FROM {table}_deltas") == [(0,)]


def test_init_db_print_shows_the_ddl_without_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    from statekit.cli import main

    assert main(["init-db", "--print", "--table", "agent_sessions"]) == 0
    assert capsys.readouterr().out == PostgresSession.schema_ddl("agent_sessions") + "\n"
    assert main(["init-db", "redis://localhost:6379/0"]) == 2
    assert "postgresql://" in capsys.readouterr().err
    assert main(["init-db", "--print", "--table", "a;b"]) == 1
    assert "table must be a plain SQL name" in capsys.readouterr().err
