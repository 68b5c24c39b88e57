"""History's storage primitives on SQLite and PostgreSQL (issue 30): blobs of past revisions as rows of ``<table>_history``.

Through the primitives (``_write_keeping``, ``_put_blob``, ``_get_blob``,
``_drop_blobs``, ``_list_blobs``, ``_delete``) on real stores: a SQLite file and
the run's throw-away PostgreSQL cluster. Also the schema's upgrade from version
2 (with data) and SIGKILLs of a process saving with history on SQLite.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from append_models import Memory, Msg
from old_schemas import PG_VERSION_2_DDL, SQLITE_VERSION_2_DDL
from statekit.errors import ConflictError, LeaseHeldError, LeaseLostError, SessionError
from statekit.session import SessionBase, open_session
from statekit.session._archive import Archive
from statekit.session._companion import joined, split
from statekit.session._ids import SessionKey
from statekit.session._loading import decode_stored
from statekit.session._revisions import MISSING_REVISION, Expected, revision_of
from statekit.session._sqlite_sql import ddl_text
from statekit.session.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION
from statekit.session.postgres import PostgresSession
from statekit.session.sqlite import SQLiteSession

Opener = Callable[..., AbstractAsyncContextManager[Any]]
"""Opens a session object of the test's store (``keep_history=`` and the like as keywords)."""

ALICE, BOB = SessionKey("alice", "chat"), SessionKey("bob", "chat")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """A fresh store of each SQL backend: a SQLite file, or a fresh table on the run's PostgreSQL server."""
    if request.param == "sqlite":
        path = tmp_path / "sessions.db"

        def make(**options: Any) -> SessionBase:
            return SQLiteSession(path, keep_history=options.pop("keep_history", 0), **options)

    else:
        dsn, table = request.getfixturevalue("postgres_dsn"), f"t_{uuid.uuid4().hex[:12]}"

        def make(**options: Any) -> SessionBase:
            return PostgresSession.from_url(dsn, table=table, timeout=60, keep_history=options.pop("keep_history", 0), **options)

    @asynccontextmanager
    async def opened(**options: Any) -> AsyncIterator[SessionBase]:
        async with make(**options) as session:
            yield session

    return opened


async def _chat(session: SessionBase, key: SessionKey, *texts: str, note: str = "") -> Memory:
    """A session holding a memory of ``texts``, saved one append a save (so its last saves are deltas)."""
    memory = Memory(note=note)
    for text in texts:
        memory.content.append(Msg("user", text))
        await session.asave(key.session_id, key.user_id, memory=memory)
    return memory


async def _decoded(session: SessionBase, raw: bytes, key: SessionKey) -> Any:
    """What a load decodes from stored bytes: the document with its deltas merged in."""
    return await decode_stored(session._backend(), raw, key)


# -- _write_keeping -------------------------------------------------------------------------------


async def test_the_old_head_is_kept_with_its_deltas_exactly_and_reads_back_as_it_was(store: Opener) -> None:
    async with store() as session:
        await _chat(session, ALICE, "one", "two", "three")  # a document, then two deltas
        old = await session._read(ALICE)
        assert old is not None and getattr(old, "log", b"").count(b"\n") == 4  # before the header, its own, two deltas
        name, new = revision_of(old), b'{"replaced":true}'
        assert await session._write_keeping(ALICE, new, Expected(raw=old), Archive(name))
        assert await session._read(ALICE) == new
        kept = await session._get_blob(ALICE, name)
        assert kept is not None and kept == old and getattr(kept, "log", None) == old.log
        assert revision_of(kept) == name
        document = await _decoded(session, kept, ALICE)
        assert document == await _decoded(session, old, ALICE)
        assert [item["text"] for item in document["memory"]["content"]] == ["one", "two", "three"]
        assert await session._list_blobs(ALICE) == [name]


async def test_every_kind_of_compare_and_set_keeps_the_head_it_replaces(store: Opener) -> None:
    """Over a revision, over a document with deltas named by its revision, over a delta base, and a first write."""
    async with store() as session:
        first = b'{"n":1}'
        assert await session._write_keeping(ALICE, first, Expected(revision=MISSING_REVISION), Archive(None))
        assert await session._list_blobs(ALICE) == []
        second = b'{"n":2}'
        assert await session._write_keeping(ALICE, second, Expected(revision=revision_of(first)), Archive(revision_of(first)))
        assert await session._get_blob(ALICE, revision_of(first)) == first
        await _chat(session, BOB, "a", "b")
        with_deltas = await session._read(BOB)
        assert with_deltas is not None
        over_revision = Expected(revision=revision_of(with_deltas))  # only the revision: compared under the write's lock
        assert await session._write_keeping(BOB, b'{"n":3}', over_revision, Archive(revision_of(with_deltas)))
        assert await session._get_blob(BOB, revision_of(with_deltas)) == with_deltas
        await _chat(session, SessionKey("carol", "chat"), "x", "y")
        remembered = session._revisions.get(SessionKey("carol", "chat"))  # after a delta save: only the base is known
        assert remembered is not None and remembered.only_base
        stored = await session._read(SessionKey("carol", "chat"))
        assert stored is not None
        assert await session._write_keeping(SessionKey("carol", "chat"), b'{"n":4}', remembered, Archive(revision_of(stored)))
        assert await session._get_blob(SessionKey("carol", "chat"), revision_of(stored)) == stored


async def test_a_stale_expectation_writes_nothing_and_keeps_nothing(store: Opener) -> None:
    async with store() as session:
        memory = await _chat(session, ALICE, "one", "two")
        stored = await session._read(ALICE)
        assert stored is not None
        stale = b'{"some":"other bytes"}'
        assert not await session._write_keeping(ALICE, b'{"x":1}', Expected(raw=stale), Archive(revision_of(stale)))
        assert not await session._write_keeping(
            ALICE, b'{"x":1}', Expected(revision=MISSING_REVISION), Archive(None, (revision_of(stored),))
        )
        assert await session._read(ALICE) == stored
        assert await session._list_blobs(ALICE) == [] and await session._get_blob(ALICE, revision_of(stale)) is None
        keep = revision_of(stored)
        assert await session._write_keeping(ALICE, b'{"x":1}', Expected(raw=stored), Archive(keep))
        assert not await session._write_keeping(ALICE, b'{"x":2}', Expected(raw=stored), Archive(keep, (keep,)))
        assert await session._list_blobs(ALICE) == [keep]  # the refused write's drop did not happen either
        loaded = Memory()
        await session.aload("chat", "bob", memory=loaded)
        assert loaded == Memory() and memory.content  # nothing leaked to another user's session


async def test_drop_removes_the_pruned_blobs_in_the_same_write(store: Opener) -> None:
    async with store() as session:
        heads = [b'{"n":%d}' % n for n in range(5)]
        assert await session._write_keeping(ALICE, heads[0], Expected(revision=MISSING_REVISION), Archive(None))
        for before, after in zip(heads, heads[1:]):
            kept = await session._list_blobs(ALICE)
            drop = tuple(name for name in kept if name == revision_of(heads[0])) if len(kept) == 2 else ()
            assert await session._write_keeping(ALICE, after, Expected(raw=before), Archive(revision_of(before), drop))
        assert sorted(await session._list_blobs(ALICE)) == sorted(revision_of(head) for head in heads[1:4])
        assert await session._get_blob(ALICE, revision_of(heads[0])) is None
        assert [await session._get_blob(ALICE, revision_of(head)) for head in heads[1:4]] == heads[1:4]
        missing = "0" * 40  # dropping one that is not there is no error
        assert await session._write_keeping(ALICE, b'{"n":9}', Expected(raw=heads[4]), Archive(None, (missing,)))


async def test_of_writers_racing_over_one_head_one_wins_and_one_copy_is_kept(store: Opener) -> None:
    async with store() as first, store() as second, store() as third, store() as fourth:
        writers = [first, second, third, fourth]
        await _chat(first, ALICE, "one", "two")
        stored = await first._read(ALICE)
        assert stored is not None
        name = revision_of(stored)
        news = [b'{"writer":%d}' % index for index in range(len(writers))]
        won = await asyncio.gather(
            *(writer._write_keeping(ALICE, new, Expected(raw=stored), Archive(name)) for writer, new in zip(writers, news))
        )
        assert sum(won) == 1
        assert await first._read(ALICE) == news[won.index(True)]
        assert await first._list_blobs(ALICE) == [name] and await first._get_blob(ALICE, name) == stored


# -- the other primitives ---------------------------------------------------------------------------------


async def test_put_get_drop_and_list_blobs(store: Opener) -> None:
    async with store() as session:
        await _chat(session, ALICE, "one", "two")
        with_deltas = await session._read(ALICE)
        assert with_deltas is not None
        plain = b'{"plain":"\\u00e9 \xc3\xa9"}'
        await session._put_blob(BOB, revision_of(with_deltas), with_deltas)  # a blob may come before its head
        await session._put_blob(BOB, revision_of(plain), plain)
        await session._put_blob(BOB, revision_of(plain), plain)  # again: harmless
        assert sorted(await session._list_blobs(BOB)) == sorted([revision_of(with_deltas), revision_of(plain)])
        got = await session._get_blob(BOB, revision_of(with_deltas))
        assert got == with_deltas and getattr(got, "log", None) == getattr(with_deltas, "log", None)
        assert await session._get_blob(BOB, revision_of(plain)) == plain
        assert await session._get_blob(BOB, "f" * 40) is None
        assert await session._get_blob(ALICE, revision_of(plain)) is None  # another user's session
        await session._drop_blobs(BOB, (revision_of(plain), "f" * 40))
        await session._drop_blobs(BOB, ())
        assert await session._list_blobs(BOB) == [revision_of(with_deltas)]
        assert not await session.aexists("chat", "bob")


async def test_deltas_in_another_form_are_refused_and_nothing_is_stored(store: Opener) -> None:
    async with store() as session:
        await _chat(session, ALICE, "one", "two")
        stored = await session._read(ALICE)
        assert stored is not None
        document, log, token = split(stored)
        damaged = joined(document, log[1:], token or "")  # without the newline before the header
        with pytest.raises(SessionError, match="deltas given are not in the form this backend reads them back"):
            await session._put_blob(BOB, "a" * 40, damaged)
        assert await session._list_blobs(BOB) == []


async def test_delete_removes_the_blobs_and_only_that_sessions(store: Opener) -> None:
    async with store() as session:
        for key in (ALICE, BOB, SessionKey("alice", "other")):
            await _chat(session, key, "one", "two")
            stored = await session._read(key)
            assert stored is not None
            assert await session._write_keeping(key, b'{"n":1}', Expected(raw=stored), Archive(revision_of(stored)))
        await session._put_blob(SessionKey("alice", "never"), "c" * 40, b'{"n":0}')
        assert await session.adelete("chat", "alice")
        assert await session._list_blobs(ALICE) == []
        assert len(await session._list_blobs(BOB)) == 1 and len(await session._list_blobs(SessionKey("alice", "other"))) == 1
        assert not await session.adelete("never", "alice")  # no head: False, and its blobs go all the same
        assert await session._list_blobs(SessionKey("alice", "never")) == []


async def test_blobs_are_never_sessions(store: Opener) -> None:
    async with store() as session:
        await session._put_blob(SessionKey("ghost", "s"), "d" * 40, b'{"n":0}')
        assert await session.alist_users() == [] and await session.alist_sessions("ghost") == []
        assert not await session.aexists("s", "ghost")
        await _chat(session, ALICE, "one")
        stored = await session._read(ALICE)
        assert stored is not None
        assert await session._write_keeping(ALICE, b'{"n":1}', Expected(raw=stored), Archive(revision_of(stored)))
        assert await session.alist_users() == ["alice"] and await session.alist_sessions("alice") == ["chat"]
        for session_id in (revision_of(stored), f"chat:{revision_of(stored)}", "chat_history"):
            assert not await session.aexists(session_id, "alice")
        assert sorted(await session.alist_sessions("alice")) == ["chat"]


async def test_the_same_session_id_under_two_users_keeps_two_histories(store: Opener) -> None:
    async with store() as session:
        heads = {}
        for key, text in ((ALICE, "alice's"), (BOB, "bob's")):
            await _chat(session, key, text)
            heads[key] = await session._read(key)
        name = "e" * 40  # one name for both: each user's blob is its own
        for key, head in heads.items():
            assert head is not None
            assert await session._write_keeping(key, b'{"n":1}', Expected(raw=head), Archive(name))
        assert await session._get_blob(ALICE, name) == heads[ALICE] and await session._get_blob(BOB, name) == heads[BOB]
        await session._drop_blobs(ALICE, (name,))
        assert await session._get_blob(ALICE, name) is None and await session._get_blob(BOB, name) == heads[BOB]


# -- the lease's fence ----------------------------------------------------------------------------------------


async def test_the_fence_refuses_every_blob_write_of_a_non_holder(store: Opener) -> None:
    async with store() as holder, store() as other:
        await _chat(holder, ALICE, "one", "two")
        stored = await holder._read(ALICE)
        assert stored is not None
        name = revision_of(stored)
        await holder._put_blob(ALICE, "b" * 40, b'{"n":0}')
        async with holder.alease("chat", "alice", ttl=120):
            with pytest.raises(LeaseHeldError):
                await other._write_keeping(ALICE, b'{"theirs":1}', Expected(raw=stored), Archive(name, ("b" * 40,)))
            with pytest.raises(LeaseHeldError):
                await other._put_blob(ALICE, "a" * 40, b'{"n":1}')
            with pytest.raises(LeaseHeldError):
                await other._drop_blobs(ALICE, ("b" * 40,))
            with pytest.raises(LeaseHeldError):
                await other.adelete("chat", "alice")
            assert await holder._read(ALICE) == stored and await holder._list_blobs(ALICE) == ["b" * 40]
            assert await holder._write_keeping(ALICE, b'{"mine":1}', Expected(raw=stored), Archive(name, ("b" * 40,)))
        assert await other._list_blobs(ALICE) == [name] and await other._read(ALICE) == b'{"mine":1}'


async def test_a_holder_whose_lease_ended_is_refused_with_lease_lost(store: Opener) -> None:
    async with store() as holder:
        await _chat(holder, ALICE, "one")
        stored = await holder._read(ALICE)
        assert stored is not None
        async with holder.alease("chat", "alice", ttl=120) as lease:
            await _end_lease(holder, ALICE)  # as if it ran out
            with pytest.raises(LeaseLostError):
                await holder._write_keeping(ALICE, b'{"late":1}', Expected(raw=stored), Archive(revision_of(stored)))
            assert await holder._read(ALICE) == stored and await holder._list_blobs(ALICE) == []
            assert lease.token >= 1
            with pytest.raises(LeaseLostError):
                await holder._drop_blobs(ALICE, ("0" * 40,))


async def _end_lease(session: SessionBase, key: SessionKey) -> None:
    """Set the lease row's expiry in the past, with SQL, as time passing would."""
    if isinstance(session, SQLiteSession):
        with sqlite3.connect(session.path) as raw:
            raw.execute(f'UPDATE "{session.table}_leases" SET expires_at = 1 WHERE user_id = ?', (key.user_id,))
        raw.close()
        return
    assert isinstance(session, PostgresSession)
    async with await psycopg.AsyncConnection.connect(_dsn_of(session), autocommit=True) as conn:
        await conn.execute(f"UPDATE {session.table}_leases SET expires_at = 'epoch' WHERE user_id = %s".encode(), (key.user_id,))


def _dsn_of(session: PostgresSession) -> str:
    owned = session._owned
    assert owned is not None
    return owned.conninfo


# -- keep_history= -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_keep_history_is_checked_by_every_constructor(tmp_path: Path, bad: object) -> None:
    makers: list[Callable[[], object]] = [
        lambda: SQLiteSession(tmp_path / "s.db", keep_history=bad),  # type: ignore[arg-type]
        lambda: PostgresSession("host=localhost", keep_history=bad),  # type: ignore[arg-type]
        lambda: PostgresSession.from_url("postgresql://localhost/db", keep_history=bad),
    ]
    for make in makers:
        with pytest.raises(SessionError, match=rf"keep_history should be an integer >= 0 .* got {bad!r}"):
            make()
    assert not (tmp_path / "s.db").exists()


def test_keep_history_is_kept_on_the_object(tmp_path: Path) -> None:
    assert SQLiteSession(tmp_path / "s.db").keep_history == 0
    assert SQLiteSession(tmp_path / "s.db", keep_history=None).keep_history is None
    assert PostgresSession("host=localhost", keep_history=20).keep_history == 20
    assert SQLiteSession.supports_history and PostgresSession.supports_history
    opened = open_session(f"sqlite:///{tmp_path / 's.db'}", keep_history=5)
    assert isinstance(opened, SQLiteSession) and opened.keep_history == 5
    assert open_session("postgresql://localhost/db", keep_history=None).keep_history is None
    with pytest.raises(SessionError, match="got -2"):
        open_session(f"sqlite:///{tmp_path / 's.db'}", keep_history=-2)


async def test_without_history_a_save_writes_no_history_row(store: Opener) -> None:
    async with store(keep_history=0) as session:
        await _chat(session, ALICE, "one", "two")
        await session.asave("chat", "alice", overwrite=True, memory=Memory(note="whole"))
        assert await session._list_blobs(ALICE) == []


# -- the schema: version 3 adds the history table, upgrading version 2 in place -------------------------------------


async def test_a_sqlite_version_2_file_is_upgraded_in_place_and_then_keeps_history(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    async with SQLiteSession(db, table="scratch") as writer:  # rows as version 2 wrote them: the format is unchanged
        memory = await _chat(writer, ALICE, "one", "two")
        lease = await writer.alease("chat", "alice", ttl=120)
        await lease.arelease()
    raw = sqlite3.connect(db, isolation_level=None)
    raw.executescript(SQLITE_VERSION_2_DDL)
    for suffix in ("", "_deltas", "_leases"):
        raw.execute(f"INSERT INTO statekit_sessions{suffix} SELECT * FROM scratch{suffix}")
    tables = [f"SELECT * FROM statekit_sessions{suffix} ORDER BY 1, 2" for suffix in ("", "_deltas", "_leases")]
    before = [raw.execute(query).fetchall() for query in tables]
    assert [len(rows) for rows in before] == [1, 1, 1]
    async with SQLiteSession(db, keep_history=2) as session:
        loaded = Memory()
        await session.aload("chat", "alice", memory=loaded)  # the first use upgrades
        assert loaded == memory
        assert raw.execute("SELECT version FROM statekit_schema WHERE table_name = 'statekit_sessions'").fetchall() == [(3,)]
        assert [raw.execute(query).fetchall() for query in tables] == before
        fresh = sqlite3.connect(":memory:")
        fresh.executescript(ddl_text())  # the upgraded tables are the ones a new file gets
        schema = "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name LIKE 'statekit_sessions%' ORDER BY name"
        assert raw.execute(schema).fetchall() == fresh.execute(schema).fetchall()
        fresh.close()
        await _leases_and_keeps_after_the_upgrade(session)
    raw.close()


async def _leases_and_keeps_after_the_upgrade(session: SessionBase) -> None:
    """An upgraded store still reads its version-2 lease row, and now keeps the head a write replaces."""
    stored = await session._read(ALICE)
    assert stored is not None
    async with session.alease("chat", "alice", ttl=120) as again:
        assert again.token == 2  # the lease row of version 2 is still the one read
        assert await session._write_keeping(ALICE, b'{"n":1}', Expected(raw=stored), Archive(revision_of(stored)))
    assert await session._get_blob(ALICE, revision_of(stored)) == stored


def _pg_rows(dsn: str, query: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query.encode(), params).fetchall()


@pytest.mark.postgres
async def test_a_postgres_version_2_table_is_upgraded_in_place_and_then_keeps_history(postgres_dsn: str) -> None:
    table, scratch = f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}"
    async with PostgresSession.from_url(postgres_dsn, table=scratch) as writer:  # rows as version 2 wrote them
        memory = await _chat(writer, ALICE, "one", "two")
        lease = await writer.alease("chat", "alice", ttl=120)
        await lease.arelease()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(PG_VERSION_2_DDL.replace("{t}", table).encode())
        for suffix in ("", "_deltas", "_leases"):
            conn.execute(f"INSERT INTO {table}{suffix} SELECT * FROM {scratch}{suffix}".encode())
    tables = [f"SELECT * FROM {table}{suffix} ORDER BY 1, 2" for suffix in ("", "_deltas", "_leases")]
    before = [_pg_rows(postgres_dsn, query) for query in tables]
    assert [len(rows) for rows in before] == [1, 1, 1]
    version = "SELECT version FROM statekit_schema WHERE table_name = %s"
    history = "SELECT to_regclass(%s) IS NOT NULL"
    async with PostgresSession.from_url(postgres_dsn, table=table, create_schema=False, keep_history=2) as session:
        added = r"\(which adds the history table\)"
        with pytest.raises(SessionError, match=rf"schema version 2, older than this statekit's 3 {added}.*init-db URL"):
            await session.aexists("chat", "alice")
    assert _pg_rows(postgres_dsn, version, table) == [(2,)] and _pg_rows(postgres_dsn, history, f"{table}_history") == [(False,)]
    async with PostgresSession.from_url(postgres_dsn, table=table, keep_history=2) as session:
        loaded = Memory()
        await session.aload("chat", "alice", memory=loaded)  # the first use upgrades
        assert loaded == memory
        assert _pg_rows(postgres_dsn, version, table) == [(PG_SCHEMA_VERSION,)] and PG_SCHEMA_VERSION == 3
        assert [_pg_rows(postgres_dsn, query) for query in tables] == before
        await _leases_and_keeps_after_the_upgrade(session)
    columns = "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position"
    fresh = f"t_{uuid.uuid4().hex[:12]}"
    async with PostgresSession.from_url(postgres_dsn, table=fresh) as made:
        assert await made.init_schema() == 3
    assert _pg_rows(postgres_dsn, columns, f"{table}_history") == _pg_rows(postgres_dsn, columns, f"{fresh}_history")


# -- SIGKILLs mid-save on SQLite ----------------------------------------------------------------------------------------

KEPT = 3
"""How many past revisions the killed saver keeps (its head lists them, as the core's index will)."""

SAVER = """
import asyncio, json, sys
from statekit.session._archive import Archive
from statekit.session._companion import joined, split
from statekit.session._ids import SessionKey
from statekit.session._revisions import Expected, revision_of
from statekit.session.sqlite import SQLiteSession

async def main(path, kept):
    session, key = SQLiteSession(path, keep_history=None), SessionKey("u", "crash")
    while True:
        head = await session._read(key)
        before = json.loads(head)
        index = [revision_of(head), *before["kept"]]
        new = json.dumps({"n": before["n"] + 1, "kept": index[:kept], "pad": "x" * 200_000}).encode()
        assert await session._write_keeping(key, new, Expected(raw=head), Archive(index[0], tuple(index[kept:])))
        print(before["n"] + 1, flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""
"""A saver: each save makes head ``n + 1``, keeps head ``n`` and drops what falls out of the last :data:`KEPT`."""


@pytest.mark.slow
async def test_sigkills_mid_save_never_leave_a_head_without_its_kept_revisions(tmp_path: Path) -> None:
    db, key, rng = tmp_path / "sessions.db", SessionKey("u", "crash"), random.Random(30)
    async with SQLiteSession(db, keep_history=None) as session:
        assert await session._write_keeping(key, b'{"n":0,"kept":[]}', Expected(revision=MISSING_REVISION), Archive(None))
        kills, seen = 25, 0
        for _ in range(kills):
            command = [sys.executable, "-c", SAVER, str(db), str(KEPT)]
            with subprocess.Popen(command, stdout=subprocess.PIPE, cwd=Path(__file__).parent) as saver:
                assert saver.stdout is not None
                started = saver.stdout.readline()  # one save done: the interpreter is up and saving
                assert started, "the saver did not start"
                time.sleep(rng.uniform(0.0, 0.3))  # a random moment to kill at (no timing is asserted)
                saver.send_signal(signal.SIGKILL)
                reported = [int(line) for line in [started, *saver.stdout.read().split()]]
                saver.wait(timeout=60)
            assert saver.returncode == -signal.SIGKILL
            head = await session._read(key)
            assert head is not None
            found = json.loads(head)
            assert found["n"] in (reported[-1], reported[-1] + 1)  # the last save reported, or the one in flight
            assert found["n"] > seen
            seen = found["n"]
            assert sorted(await session._list_blobs(key)) == sorted(found["kept"])  # none missing, none left over
            for age, name in enumerate(found["kept"], 1):
                blob = await session._get_blob(key, name)
                assert blob is not None and revision_of(blob) == name and json.loads(blob)["n"] == found["n"] - age
        with sqlite3.connect(db) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        raw.close()
        assert seen > kills  # the saver got on between the kills


async def _waiting_for_a_lock(dsn: str, count: int) -> None:
    """Until ``count`` sessions of the server wait for a lock (generous: a loaded machine)."""
    for _ in range(2_000):
        waiting = _pg_rows(dsn, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")[0][0]
        if isinstance(waiting, int) and waiting >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} writers never waited for the row's lock")


@pytest.mark.postgres
async def test_a_write_over_deltas_that_waited_for_the_row_sees_the_append_that_landed_meanwhile(postgres_dsn: str) -> None:
    """A write expecting a head with deltas (by revision) waits for the row's lock while another writer appends:
    it must then find the head changed, not the deltas as they were when it began to wait (and keep nothing
    under the old head's name)."""
    table = f"t_{uuid.uuid4().hex[:12]}"
    async with PostgresSession.from_url(postgres_dsn, table=table, keep_history=3, timeout=60) as writer, \
            PostgresSession.from_url(postgres_dsn, table=table, keep_history=3, timeout=60) as appender:
        await _chat(writer, ALICE, "one", "two", "three")
        stored = await writer.aread_document("chat", "alice")
        assert stored is not None
        memory = Memory()
        await appender.aload("chat", "alice", memory=memory)
        memory.content.append(Msg("user", "four"))
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as holder:
            await holder.execute(f"SELECT 1 FROM {table} WHERE user_id = 'alice' FOR UPDATE".encode())  # holds the row
            appending = asyncio.ensure_future(appender.asave("chat", "alice", memory=memory))
            await _waiting_for_a_lock(postgres_dsn, 1)
            writing = asyncio.ensure_future(
                writer.awrite_document("chat", stored.data, "alice", expected_revision=stored.revision)
            )
            await _waiting_for_a_lock(postgres_dsn, 2)
            await holder.commit()  # the append goes first, then the write finds the head it left
        await appending
        with pytest.raises(ConflictError):
            await writing
        assert stored.revision not in await writer._list_blobs(ALICE)
        loaded = Memory()
        await writer.aload("chat", "alice", memory=loaded)
        assert [m.text for m in loaded.content] == ["one", "two", "three", "four"]
