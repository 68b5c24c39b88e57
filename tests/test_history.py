"""History (docs/history.md): kept revisions, load_at, rollback, fork, prune, on a reference backend and every real one."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

from statekit import (
    ConflictError,
    DocumentError,
    Revision,
    SessionError,
    SessionNotFoundError,
    StateLoadError,
    StateModule,
    generate_secret_key,
    open_session,
    state_field,
    stateful,
)
from statekit.session import Archive, Expected, JSONSession, SessionBase, SessionKey
from statekit.session.postgres import PostgresSession
from statekit.session.redis import RedisSession
from statekit.session.sqlite import SQLiteSession
from statekit.session._archive import checked_keep
from statekit.testing import Counter, Journal, SessionContract, check_backend
from statekit.testing._models import Note
from workers import run_rollback_race


class KeepingDictSession(SessionBase):
    """An own backend that keeps history: documents and blobs in dicts, in one process.

    Nothing awaits between a check and its writes, so ``_write_keeping`` is atomic on the event loop.
    """

    supports_history = True

    def __init__(self, store: dict[str, Any], keep_history: int | None = 0) -> None:
        self.docs: dict[tuple[str, str], bytes] = store.setdefault("docs", {})
        self.blobs: dict[tuple[str, str], dict[str, bytes]] = store.setdefault("blobs", {})
        self.keep_history = checked_keep(keep_history, type(self), supports=True)

    async def _read(self, key: SessionKey) -> bytes | None:
        return self.docs.get((key.user_id, key.session_id))

    async def _write(self, key: SessionKey, data: bytes) -> None:
        self.docs[key.user_id, key.session_id] = data

    async def _write_keeping(self, key: SessionKey, data: bytes, expected: Expected, archive: Archive) -> bool:
        stored = self.docs.get((key.user_id, key.session_id))
        if not expected.matches(stored):
            return False
        blobs = self.blobs.setdefault((key.user_id, key.session_id), {})
        if archive.keep_as is not None and stored is not None:
            blobs[archive.keep_as] = stored
        self.docs[key.user_id, key.session_id] = data
        for name in archive.drop:
            blobs.pop(name, None)
        return True

    async def _delete(self, key: SessionKey) -> bool:
        self.blobs.pop((key.user_id, key.session_id), None)
        return self.docs.pop((key.user_id, key.session_id), None) is not None

    async def _list(self, user_id: str) -> list[str]:
        return [session_id for owner, session_id in self.docs if owner == user_id]

    async def _put_blob(self, key: SessionKey, name: str, data: bytes) -> None:
        self.blobs.setdefault((key.user_id, key.session_id), {})[name] = data

    async def _get_blob(self, key: SessionKey, name: str) -> bytes | None:
        return self.blobs.get((key.user_id, key.session_id), {}).get(name)

    async def _drop_blobs(self, key: SessionKey, names: tuple[str, ...]) -> None:
        blobs = self.blobs.get((key.user_id, key.session_id), {})
        for name in names:
            blobs.pop(name, None)

    async def _list_blobs(self, key: SessionKey) -> list[str]:
        return list(self.blobs.get((key.user_id, key.session_id), {}))


class DefaultKeepingSession(KeepingDictSession):
    """The same, with the base class's read-compare-write ``_write_keeping`` (made of the blob primitives)."""

    _write_keeping = SessionBase._write_keeping


class TestKeepingDictSession(SessionContract):
    def make_session(self) -> SessionBase:
        return KeepingDictSession(self.store)

    def setup_method(self) -> None:
        self.store: dict[str, Any] = {}


class TestDefaultKeeping(SessionContract):
    def make_session(self) -> SessionBase:
        return DefaultKeepingSession(self.store)

    def setup_method(self) -> None:
        self.store: dict[str, Any] = {}


def _meta(session: KeepingDictSession, sid: str = "s", user: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = orjson.loads(session.docs[user, sid])["__statekit__"]
    return meta


def test_keep_history_zero_writes_what_it_wrote_before() -> None:
    session = KeepingDictSession({})
    session.save("s", counter=Counter(count=1))
    session.save("s", counter=Counter(count=2))
    assert _meta(session) == {"format": 1}
    assert session.blobs == {}
    [head] = session.history("s")
    assert head == Revision(session.revision("s") or "", None, None, len(session.docs["", "s"]), ("counter",))


def test_a_session_keeps_the_retention_it_was_saved_with_and_a_plain_object_keeps_it() -> None:
    store: dict[str, Any] = {}
    keeper, plain = KeepingDictSession(store, keep_history=2), KeepingDictSession(store)
    keeper.save("s", counter=Counter(count=1))
    first = keeper.revision("s")
    plain.save("s", counter=Counter(count=2))
    plain.save("s", counter=Counter(count=3))
    meta = _meta(plain)
    assert meta["format"] == 3 and meta["history"]["keep"] == 2
    listed = plain.history("s")
    assert len(listed) == 3 and listed[2].revision == first
    plain.save("s", counter=Counter(count=4))
    assert [r.revision for r in plain.history("s")][2] != first
    assert first not in plain.blobs["", "s"]  # pruned in the save's own step


def test_an_object_raises_the_retention_and_prune_history_lowers_it() -> None:
    store: dict[str, Any] = {}
    one, three = KeepingDictSession(store, keep_history=1), KeepingDictSession(store, keep_history=3)
    for count in range(3):
        one.save("s", counter=Counter(count=count))
    assert len(one.history("s")) == 2
    for count in range(3):
        three.save("s", counter=Counter(count=count))
    assert len(one.history("s")) == 4 and _meta(one)["history"]["keep"] == 3
    head = one.prune_history("s", keep=1)
    listed = one.history("s")
    assert head == listed[0].revision and len(listed) == 2
    assert set(one.blobs["", "s"]) == {listed[1].revision}
    counter = Counter()
    one.load("s", counter=counter)
    assert counter.count == 2  # the same modules
    one.prune_history("s", keep=0)
    assert _meta(one) == {"format": 1} and one.blobs["", "s"] == {}
    assert one.prune_history("missing", keep=2) is None


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3", [2]])
def test_keep_history_must_be_a_count_or_none(bad: object) -> None:
    with pytest.raises(SessionError, match=r"keep_history should be an integer >= 0 .* or None \(keep all\), got"):
        KeepingDictSession({}, keep_history=bad)  # type: ignore[arg-type]
    session = KeepingDictSession({})
    with pytest.raises(SessionError, match="keep_history should be an integer"):
        session.prune_history("s", keep=bad)  # type: ignore[arg-type]


def test_a_backend_without_history_refuses_keep_history() -> None:
    with pytest.raises(SessionError, match="does not keep history .*use keep_history=0"):
        checked_keep(2, SessionBase, supports=False)
    assert checked_keep(0, SessionBase, supports=False) == 0


def test_load_at_read_document_at_and_their_errors() -> None:
    session = KeepingDictSession({}, keep_history=None)
    session.save("s", counter=Counter(count=1), note=Note(text="a"))
    first = session.revision("s") or ""
    session.save("s", counter=Counter(count=2), note=Note(text="b"))
    counter, note = Counter(), Note()
    session.load_at("s", first, counter=counter, note=note)
    assert (counter.count, note.text) == (1, "a")
    document = session.read_document("s", at=first)
    assert document is not None and document.revision == first
    assert document.data == {"__statekit__": {"format": 1}, "counter": {"count": 1}, "note": {"text": "a"}}
    with pytest.raises(SessionNotFoundError, match="holds no revision 0{40}: it keeps the head and 1 past revision"):
        session.load_at("s", "0" * 40, counter=Counter())
    with pytest.raises(SessionNotFoundError, match="no session 'nope'"):
        session.load_at("nope", first, counter=Counter())
    with pytest.raises(SessionError, match="revision should be a revision string"):
        session.load_at("s", 5, counter=Counter())  # type: ignore[arg-type]
    with pytest.raises(SessionError, match="at should be a revision string"):
        session.read_document("s", at="")


def test_load_at_is_all_or_nothing_and_remembers_nothing() -> None:
    session = KeepingDictSession({}, keep_history=3)
    session.save("s", counter=Counter(count=1), note=Note(text="a"))
    first = session.revision("s") or ""
    session.write_document("s", {"counter": {"count": "two"}, "note": {"text": "b"}})
    bad = session.revision("s") or ""
    counter, note = Counter(count=7), Note(text="kept")
    with pytest.raises(StateLoadError, match=rf"at revision {bad}.*counter\.count") as caught:
        session.load_at("s", bad, counter=counter, note=note)
    assert [problem.path for problem in caught.value.problems] == [("counter", "count")]
    assert (counter.count, note.text) == (7, "kept")
    session.load_at("s", first, counter=counter, note=note)
    session.write_document("s", {"counter": {"count": 3}, "note": {"text": "c"}})  # over the head it remembers, not `first`
    assert len(session.history("s")) == 3


def test_a_damaged_kept_revision_is_refused_not_loaded() -> None:
    session = KeepingDictSession({}, keep_history=2)
    session.save("s", counter=Counter(count=1))
    first = session.revision("s") or ""
    session.save("s", counter=Counter(count=2))
    session.blobs["", "s"][first] = b'{"__statekit__": {"format": 1}, "counter": {"count": 99}}'
    with pytest.raises(DocumentError, match=f"the kept bytes of revision {first} are not that revision"):
        session.load_at("s", first, counter=Counter())


def test_a_malformed_history_index_names_its_path() -> None:
    session = KeepingDictSession({}, keep_history=2)
    session.save("s", counter=Counter(count=1))
    session.save("s", counter=Counter(count=2))
    document = orjson.loads(session.docs["", "s"])
    document["__statekit__"]["history"]["kept"][0]["size"] = "big"
    session.docs["", "s"] = orjson.dumps(document)
    with pytest.raises(DocumentError, match=r"__statekit__\.history\.kept\[0\]\.size should be an integer >= 0, got 'big'"):
        session.history("s")
    with pytest.raises(DocumentError, match=r"kept\[0\]\.size"):
        session.load_at("s", "0" * 40, counter=Counter())
    counter = Counter()
    session.load("s", counter=counter)  # the head loads: only what reads the records checks them
    assert counter.count == 2
    document["__statekit__"]["history"]["keep"] = -3
    session.docs["", "s"] = orjson.dumps(document)
    with pytest.raises(DocumentError, match=r"__statekit__\.history\.keep should be an integer >= 0 or null, got -3"):
        session.load("s", counter=Counter())


def test_a_head_time_with_an_offset_is_read_as_utc_and_carried_on_in_z() -> None:
    """A hand-edited head whose time names an offset lists as that instant in UTC, and the next save's record
    of it (and every index written after) writes it in UTC with ``Z``; a time that is not ISO 8601 names its path."""
    session = KeepingDictSession({}, keep_history=2)
    session.save("s", counter=Counter(count=1))
    document = orjson.loads(session.docs["", "s"])
    written = document["__statekit__"]["history"]["saved_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", written)
    assert abs(datetime.fromisoformat(written) - datetime.now(timezone.utc)) < timedelta(minutes=5)
    document["__statekit__"]["history"]["saved_at"] = "2026-03-01T14:30:00.250000+02:00"
    session.docs["", "s"] = orjson.dumps(document)
    instant = datetime(2026, 3, 1, 12, 30, 0, 250000, tzinfo=timezone.utc)
    [head] = session.history("s")
    assert head.saved_at == instant and head.saved_at.tzinfo is timezone.utc
    session.load("s", counter=Counter())
    session.save("s", counter=Counter(count=2))
    newest, older = session.history("s")
    assert older.saved_at == instant and newest.saved_at is not None and newest.saved_at > instant
    kept = orjson.loads(session.docs["", "s"])["__statekit__"]["history"]["kept"]
    assert kept[0]["saved_at"] == "2026-03-01T12:30:00.250000Z"
    document = orjson.loads(session.docs["", "s"])
    document["__statekit__"]["history"]["saved_at"] = "yesterday"
    session.docs["", "s"] = orjson.dumps(document)
    with pytest.raises(DocumentError, match=r"history\.saved_at should be an ISO 8601 time with its offset, got 'yesterday'"):
        session.history("s")


def test_every_write_keeps_history_remove_modules_write_document_update() -> None:
    session = KeepingDictSession({}, keep_history=None)
    session.save("s", counter=Counter(count=1), note=Note(text="a"))
    session.remove_modules("s", "note")
    session.write_document("s", {"counter": {"count": 5}, "__statekit__": {"format": 3, "history": {"keep": 0}}})
    tally = Counter()

    def bump() -> None:
        tally.count += 1

    session.update("s", bump, counter=tally)
    listed = session.history("s")
    assert [r.modules for r in listed] == [("counter",), ("counter",), ("counter",), ("counter", "note")]
    assert [r.parent for r in listed[:-1]] == [r.revision for r in listed[1:]]
    assert _meta(session)["history"]["keep"] is None  # a written document cannot lower the retention
    assert tally.count == 6


def test_rollback_refuses_a_head_that_changed_and_changes_nothing() -> None:
    store: dict[str, Any] = {}
    session = KeepingDictSession(store, keep_history=5)
    session.save("s", counter=Counter(count=1))
    first = session.revision("s") or ""
    session.save("s", counter=Counter(count=2))
    before = dict(store["docs"])
    racing = KeepingDictSession(store)

    async def race() -> None:
        # the head changes between the rollback's read and its write
        original = session._read

        async def read_then_change(key: SessionKey) -> bytes | None:
            raw = await original(key)
            await racing.asave("s", counter=Counter(count=3))
            return raw

        session._read = read_then_change  # type: ignore[method-assign]
        with pytest.raises(ConflictError):
            await session.arollback("s", first)

    asyncio.run(race())
    assert store["docs"] != before  # the racing save landed
    counter = Counter()
    racing.load("s", counter=counter)
    assert counter.count == 3


def test_fork_checks_its_arguments_and_is_isolated() -> None:
    session = KeepingDictSession({}, keep_history=2)
    session.save("s", counter=Counter(count=1))
    with pytest.raises(SessionError, match="needs another session id"):
        session.fork("s", "s")
    with pytest.raises(SessionNotFoundError, match="no session 'none'"):
        session.fork("none", "t")
    revision = session.fork("s", "t", new_user_id="bob")
    assert session.history("t", "bob")[0].forked_from == ("", "s", session.revision("s"))
    assert _meta(session, "t", "bob")["history"]["keep"] == 2
    session.save("t", "bob", counter=Counter(count=9))
    counter = Counter()
    session.load("s", counter=counter)
    assert counter.count == 1
    assert session.history("t", "bob")[1].revision == revision


def test_append_only_sessions_keep_exact_revisions() -> None:
    session = KeepingDictSession({}, keep_history=None)
    journal = Journal()
    saved: list[tuple[str, list[str]]] = []
    for turn in range(5):
        journal.entries.append(f"e{turn}")
        session.save("j", journal=journal)
        saved.append((session.revision("j") or "", list(journal.entries)))
    for revision, entries in saved:
        loaded = Journal()
        session.load_at("j", revision, journal=loaded)
        assert loaded.entries == entries


def test_the_contract_runs_on_a_backend_without_history() -> None:
    from test_leases import LeasingDictSession  # noqa: PLC0415 - a shared reference backend

    store: dict[str, Any] = {}
    asyncio.run(check_backend(lambda: LeasingDictSession(store), skip=frozenset()))


def _opened(kind: str, where: str, prefix: str) -> SessionBase:
    if kind == "redis":
        return RedisSession.from_url(where, key_prefix=prefix, timeout=60)
    if kind == "postgres":
        return PostgresSession.from_url(where, table=prefix, timeout=60)
    if kind == "sqlite":
        return SQLiteSession(where, timeout=60)
    return JSONSession(where)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["json", "sqlite", pytest.param("redis", marks=pytest.mark.redis), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_rollback_racing_eight_updaters_loses_no_update_it_does_not_name(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each update lands, and is in the final head unless a rollback the test was told of left it out."""
    where, prefix = str(tmp_path), ""
    if kind == "sqlite":
        where = str(tmp_path / "sessions.db")
    elif kind == "redis":
        server = request.getfixturevalue("redis_server")
        where, prefix = f"redis://{server.host}:{server.port}/0", f"race-{uuid.uuid4().hex}:"
    elif kind == "postgres":
        where, prefix = request.getfixturevalue("postgres_dsn"), f"race_{uuid.uuid4().hex[:12]}"
    made = run_rollback_race(kind, where, prefix=prefix, turns=15, rollbacks=4)
    session = _opened(kind, where, prefix)
    listed = session.history("shared", "u")
    states: dict[str, set[str]] = {}
    for revision in listed:
        journal = Journal()
        session.load_at("shared", revision.revision, user_id="u", journal=journal)
        states[revision.revision] = set(journal.entries)
    session.close()
    parents = {revision.revision: revision.parent for revision in listed}
    assert len(made) == 4 and set(made) <= set(states)
    assert any(parent in made and name not in made for name, parent in parents.items()), "no update raced a rollback"
    for name, parent in parents.items():  # an update adds to what it read; only a rollback takes away
        if parent is not None and name not in made:
            assert states[parent] <= states[name], f"{name} lost {states[parent] - states[name]}"
    head = states[listed[0].revision]
    for worker in range(8):
        for turn in range(15):
            entry = f"w{worker}-{turn}"
            assert any(entry in state for state in states.values()), f"{entry} never landed"
            if entry in head:
                continue
            dropped_by = [r for r in made if entry not in states[r] and entry in states[parents[r] or ""]]
            assert dropped_by, f"{entry} is gone from the head, yet no rollback left it out"


def test_a_large_head_hashed_beside_its_write_is_named_by_its_revision(tmp_path: Path) -> None:
    """A head past INLINE_DECODE_BYTES // 4 is hashed in a thread during its write: the next save names it right."""
    session = JSONSession(tmp_path, keep_history=2)
    big = Note(text="x" * 400_000)
    session.save("s", note=big)
    first = session.revision("s")
    big.text = "y" * 400_000
    session.save("s", note=big)
    listed = session.history("s")
    assert [r.revision for r in listed] == [session.revision("s"), first]
    loaded = Note()
    session.load_at("s", first or "", note=loaded)
    assert loaded.text == "x" * 400_000
    session.close()


@stateful
class Keyed(StateModule):
    """A module with a secret field, for history across a key rotation."""

    api_key: str = state_field(default="", secret=True)


def test_kept_revisions_stay_sealed_with_the_key_they_were_saved_with(tmp_path: Path) -> None:
    old, new = generate_secret_key(), generate_secret_key()
    before = JSONSession(tmp_path, keep_history=3, secret_key=old)
    before.save("s", keyed=Keyed(api_key="sk-old"))
    first = before.revision("s") or ""
    assert b"sk-old" not in (tmp_path / "s.json").read_bytes()
    rotated = JSONSession(tmp_path, secret_key=[new, old])  # a rotation: the head is sealed anew, the past is not
    keyed = Keyed()
    rotated.load("s", keyed=keyed)
    rotated.save("s", keyed=keyed)
    only_new = JSONSession(tmp_path, secret_key=new)
    head = Keyed()
    only_new.load("s", keyed=head)
    assert head.api_key == "sk-old"
    with pytest.raises(StateLoadError, match=f"at revision {first}.*keyed.api_key: cannot decrypt the secret: wrong secret_key"):
        only_new.load_at("s", first, keyed=Keyed())
    past = Keyed()
    rotated.load_at("s", first, keyed=past)
    assert past.api_key == "sk-old"
    for session in (before, rotated, only_new):
        session.close()


def test_open_session_takes_keep_history_for_files(tmp_path: Path) -> None:
    session = open_session(tmp_path.as_uri(), keep_history=4)
    assert session.keep_history == 4 and session.supports_history
    session.save("s", counter=Counter(count=1))
    session.save("s", counter=Counter(count=2))
    assert len(session.history("s")) == 2
    session.close()


# -- history over deltas: turns of append-only lists (docs/history.md, "Append-only lists") --------------


def _files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` (hidden ones too): its inode and size."""
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_size) for p in folder.rglob("*") if p.is_file()}


def test_a_turn_that_keeps_history_writes_only_its_line(tmp_path: Path) -> None:
    """With keep_history=20, a turn of one message over 2,000 appends one line: the document and the
    kept revisions are untouched, and the turn is a revision of its own whose parent is the head before."""
    session = JSONSession(tmp_path, keep_history=20)
    journal = Journal(entries=[f"message {n}" for n in range(2_000)])
    session.save("s", journal=journal)
    journal.entries.append("one more")
    session.save("s", journal=journal)  # the first delta creates the companion
    before, parent = _files_of(tmp_path), session.revision("s")
    journal.entries.append("a turn")
    session.save("s", journal=journal)
    after = _files_of(tmp_path)
    assert {name: at for name, at in after.items() if name != "s.json.log"} == {
        name: at for name, at in before.items() if name != "s.json.log"
    }
    grown = after["s.json.log"][1] - before["s.json.log"][1]
    assert 0 < grown < 200, grown  # the item, its proof and the revision it was saved over
    listed = session.history("s")
    assert listed[0].revision == session.revision("s") and listed[0].parent == parent, listed[:2]
    assert [r.parent for r in listed[:-1]] == [r.revision for r in listed[1:]], listed
    assert listed[0].size == listed[1].size + grown
    loaded = Journal()
    JSONSession(tmp_path).load_at("s", parent or "", journal=loaded)
    assert loaded.entries == journal.entries[:-1]
    session.close()


def test_a_lineage_blob_stays_while_a_revision_is_in_it_and_goes_with_the_last(tmp_path: Path) -> None:
    """The old head a rewrite keeps holds the revisions its deltas named: dropped once none is kept."""
    session = JSONSession(tmp_path, keep_history=2)
    journal, counter = Journal(), Counter()
    for turn in range(3):
        journal.entries.append(f"turn {turn}")
        session.save("s", journal=journal, counter=counter)
    kept_dir = tmp_path / ".s.json.history"
    counter.count = 1  # a rewrite: the head (3 revisions in one document and its deltas) kept whole
    session.save("s", journal=journal, counter=counter)
    assert len(list(kept_dir.glob("*.json"))) == 1
    assert len(session.history("s")) == 3
    journal.entries.append("turn 3")
    session.save("s", journal=journal, counter=counter)  # two revisions of the old head still listed...
    assert len(list(kept_dir.glob("*.json"))) == 1
    journal.entries.append("turn 4")
    session.save("s", journal=journal, counter=counter)  # ...then none: its blob goes in that save
    assert list(kept_dir.glob("*.json")) == []
    assert [len(_entries(session, r.revision)) for r in session.history("s")] == [5, 4, 3]
    session.close()


@pytest.mark.parametrize("kind", ["json", pytest.param("redis", marks=pytest.mark.redis)])
def test_keeping_one_revision_a_rewrite_keeps_the_delta_revision_it_replaced(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """keep_history=1 and a rewrite over a turn's delta line: the old head's blob holds the one revision kept
    (the line's) and the one pruned (its document's); it stays."""
    if kind == "redis":
        server = request.getfixturevalue("redis_server")
        session: SessionBase = RedisSession(server.host, server.port, key_prefix=f"one-{uuid.uuid4().hex}:", keep_history=1)
    else:
        session = JSONSession(tmp_path, keep_history=1)
    journal, counter = Journal(), Counter()
    session.save("s", journal=journal, counter=counter)
    journal.entries.append("turn 0")
    session.save("s", journal=journal, counter=counter)  # a delta line: its revision is in the head
    turn = session.revision("s") or ""
    counter.count = 1
    session.save("s", journal=journal, counter=counter)  # a rewrite: the old head kept whole, its document pruned
    listed = session.history("s")
    assert listed[0].parent == turn and [r.revision for r in listed[1:]] == [turn]
    assert _entries(session, turn) == ["turn 0"]  # its bytes are still there
    session.close()


def _entries(session: SessionBase, revision: str) -> list[str]:
    loaded = Journal()
    session.load_at("s", revision, journal=loaded, counter=Counter())
    return loaded.entries


def test_a_delta_that_names_another_parent_is_refused(tmp_path: Path) -> None:
    session = JSONSession(tmp_path, keep_history=5)
    journal = Journal()
    for turn in range(3):
        journal.entries.append(f"turn {turn}")
        session.save("s", journal=journal)
    log = tmp_path / "s.json.log"
    lines = log.read_bytes().split(b"\n")
    named = lines[2].split(b'"')[3]
    lines[2] = lines[2].replace(named, b"0" * 40)
    log.write_bytes(b"\n".join(lines))
    with pytest.raises(DocumentError, match="delta 2 was saved over revision 0{40}, but the delta before it is"):
        JSONSession(tmp_path).load("s", journal=Journal())
    with pytest.raises(DocumentError, match="delta 2 was saved over"):
        JSONSession(tmp_path).history("s")
    session.close()


def test_history_turned_on_after_turns_saved_without_it_keeps_the_head_they_made(tmp_path: Path) -> None:
    """An object that saved turns as plain deltas, then is set to keep history: its next save is whole
    (over the head its deltas made, checked by token and size) and keeps that head."""
    session = JSONSession(tmp_path)
    journal = Journal()
    for turn in range(3):
        journal.entries.append(f"turn {turn}")
        session.save("s", journal=journal)
    plain_head = session.revision("s")
    session.keep_history = 2
    journal.entries.append("turn 3")
    session.save("s", journal=journal)
    listed = session.history("s")
    assert [r.revision for r in listed][1:] == [plain_head] and listed[0].parent == plain_head, listed
    assert listed[1].saved_at is None  # saved while the session kept no history
    loaded = Journal()
    JSONSession(tmp_path).load_at("s", plain_head or "", journal=loaded)
    assert loaded.entries == ["turn 0", "turn 1", "turn 2"]
    session.close()


def test_a_document_changed_under_its_deltas_is_refused_at_the_revisions_they_name(tmp_path: Path) -> None:
    """Deltas that name revisions chain back to their document: one changed by hand (token kept) is refused
    when a revision cut from it is asked for, instead of loading what was never saved."""
    session = JSONSession(tmp_path, keep_history=5)
    journal, counter = Journal(), Counter(count=1)
    for turn in range(3):
        journal.entries.append(f"turn {turn}")
        session.save("s", journal=journal, counter=counter)
    middle = session.history("s")[1].revision
    document = tmp_path / "s.json"
    edited = document.read_bytes().replace(b'"count": 1', b'"count": 7')
    assert edited != document.read_bytes()
    document.write_bytes(edited)
    with pytest.raises(DocumentError, match="the document was changed after the deltas that follow it were saved"):
        JSONSession(tmp_path).load_at("s", middle, journal=Journal(), counter=Counter())
    session.close()


class _UndroppableJSON(JSONSession):
    """A JSON backend whose kept revisions cannot be removed (as on a disk turned read-only)."""

    async def _drop_blobs(self, key: SessionKey, names: tuple[str, ...]) -> None:
        raise OSError("the history folder is read-only")


def test_a_turn_whose_pruning_fails_is_saved_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    session = _UndroppableJSON(tmp_path, keep_history=1)
    journal, counter = Journal(entries=["first"]), Counter()
    session.save("s", journal=journal, counter=counter)
    counter.count = 1
    session.save("s", journal=journal, counter=counter)  # a rewrite: keeps the first head
    journal.entries.append("a turn")
    with caplog.at_level("WARNING", logger="statekit"):
        session.save("s", journal=journal, counter=counter)  # pushes the first head out: its removal fails
    assert "the turn was saved to" in caplog.text and "1 kept revision(s) past its retention could not be removed" in caplog.text
    listed = session.history("s")
    assert len(listed) == 2 and _entries(JSONSession(tmp_path), listed[0].revision) == ["first", "a turn"]
    assert len(list((tmp_path / ".s.json.history").glob("*.json"))) == 1  # left behind, listed by none
    session.close()


def test_a_rewrite_that_prunes_a_turn_keeps_the_head_the_turn_is_in(tmp_path: Path) -> None:
    """keep_history=1: a rewrite over a head of one turn keeps that head whole, though the revision before
    the turn (the head's first lines, in the same blob) falls past the retention."""
    session = JSONSession(tmp_path, keep_history=1)
    journal, counter = Journal(entries=["first"]), Counter()
    session.save("s", journal=journal, counter=counter)
    journal.entries.append("a turn")
    session.save("s", journal=journal, counter=counter)
    turn = session.revision("s") or ""
    counter.count = 1
    session.save("s", journal=journal, counter=counter)
    assert [r.revision for r in session.history("s")][1:] == [turn]
    assert _entries(JSONSession(tmp_path), turn) == ["first", "a turn"]
    session.close()


def test_the_first_save_that_keeps_history_records_its_own_modules(tmp_path: Path) -> None:
    """The head a first history-keeping save replaces is recorded with its modules, and the new head with its own."""
    JSONSession(tmp_path).save("s", counter=Counter(count=1))
    session = JSONSession(tmp_path, keep_history=2)
    session.save("s", counter=Counter(count=2), note=Note(text="new"))
    listed = session.history("s")
    assert [r.modules for r in listed] == [("counter", "note"), ("counter",)], listed
    session.close()
