"""Revisions, conflicts and update beyond the shared contract: blocking twins, files, bad arguments."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from workers import run_workers

from statekit import ConflictError, StateModule, StoredDocument, generate_secret_key, state_field, stateful
from statekit._limits import MAX_DEPTH
from statekit.errors import DocumentError, SessionError, StateDumpError
from statekit.session import MISSING_REVISION, Expected, JSONSession, SessionBase, SessionKey, YAMLSession, _revisions, revision_of
from statekit.session._files import FileSession
from statekit.session._safe_files import digest_regular, holds_exactly
from statekit.session.redis import RedisSession
from statekit.testing import CHECKS, Chat, Counter, RedisServer, SessionFactory


@pytest.fixture(params=[JSONSession, YAMLSession])
def file_session(request: pytest.FixtureRequest, tmp_path: Path) -> FileSession:
    session: FileSession = request.param(tmp_path)
    return session


def test_the_blocking_twins_of_the_document_api(file_session: FileSession) -> None:
    with file_session as session:
        assert session.read_document("s") is None
        created = session.write_document("s", {"counter": {"count": 1}}, expected_revision=MISSING_REVISION)
        stored = session.read_document("s")
        assert isinstance(stored, StoredDocument)
        assert stored.revision == created == session.revision("s") == revision_of(stored.raw)
        assert stored.data == {"__statekit__": {"format": 1}, "counter": {"count": 1}}
        assert stored.source == str(session.session_path("s"))
        counter = Counter()
        session.update("s", lambda: setattr(counter, "count", counter.count + 1), counter=counter)
        assert counter.count == 2


def test_resaving_unchanged_state_writes_identical_bytes(file_session: FileSession) -> None:
    with file_session as session:
        session.save("s", counter=Counter(count=5))
        before = session.session_path("s").read_bytes()
        session.load("s", counter=Counter())
        session.save("s", counter=Counter(count=5))
        assert session.session_path("s").read_bytes() == before
        assert [p.name for p in session.save_dir.iterdir()] == [session.session_path("s").name]


def test_a_stale_save_changes_no_byte_on_disk(file_session: FileSession, tmp_path: Path) -> None:
    other = type(file_session)(tmp_path)
    with file_session as session, other:
        session.save("s", counter=Counter(count=1))
        other.load("s", counter=Counter())
        session.save("s", counter=Counter(count=2))
        before = session.session_path("s").read_bytes()
        with pytest.raises(ConflictError, match=r"was changed \(or deleted\) by another writer") as caught:
            other.save("s", counter=Counter(count=3))
        assert caught.value.source == str(session.session_path("s"))
        assert session.session_path("s").read_bytes() == before


async def test_update_gives_up_after_its_retries_with_the_last_conflict(tmp_path: Path) -> None:
    session, meddler = JSONSession(tmp_path), JSONSession(tmp_path)
    calls = 0

    async def meddle() -> None:
        nonlocal calls
        calls += 1
        await meddler.asave("s", overwrite=True, counter=Counter(count=100 + calls))

    with pytest.raises(ConflictError):
        await session.aupdate("s", meddle, retries=2, counter=Counter())
    assert calls == 3
    counter = Counter()
    await session.aload("s", counter=counter)
    assert counter.count == 103


async def test_update_restarts_a_missing_session_from_the_modules_as_given(tmp_path: Path) -> None:
    """When a retry finds the session gone again, mutate sees the modules as first given."""
    session, meddler = JSONSession(tmp_path), JSONSession(tmp_path)
    counter = Counter(count=7)
    seen: list[int] = []

    async def bump() -> None:
        seen.append(counter.count)
        counter.count += 1
        if len(seen) == 1:  # someone creates it before our save...
            await meddler.asave("s", counter=Counter(count=50))
        elif len(seen) == 2:  # ...and deletes it before the next one
            await meddler.adelete("s")

    await session.aupdate("s", bump, counter=counter)
    assert seen == [7, 50, 7]
    assert counter.count == 8


async def test_update_restarts_from_the_modules_as_given_when_a_loaded_session_is_deleted(
    backend: SessionFactory,
) -> None:
    """The first attempt loaded the session and changed the modules; the retry finds it
    deleted and starts from the modules as given, not from that attempt's leftovers."""
    async with backend() as session, backend() as meddler:
        await meddler.asave("s", counter=Counter(count=50))
        counter = Counter(count=7)
        seen: list[int] = []

        async def bump() -> None:
            seen.append(counter.count)
            counter.count += 1
            if len(seen) == 1:
                await meddler.adelete("s")

        await session.aupdate("s", bump, counter=counter)
        stored = Counter()
        await meddler.aload("s", counter=stored)
    assert seen == [50, 7]
    assert counter.count == stored.count == 8


@stateful
class _Child(StateModule):
    n: int = state_field(default=0)


@stateful
class _Parent(StateModule):
    child: _Child = state_field(factory=_Child)
    count: int = state_field(default=0)
    tries: int = state_field(default=0, secret=True)  # no key: never saved, never loaded
    calls: list[int] = attrs.field(factory=list)  # not state: update() leaves it alone


async def test_update_restarts_from_the_passed_child_and_secret_when_mutate_replaced_them(tmp_path: Path) -> None:
    """A load fills a child module in place and leaves an unkeyed secret alone: what mutate()
    did to them (a new child, a changed secret) is taken back too."""
    session, meddler = JSONSession(tmp_path, omit_secrets=True), JSONSession(tmp_path, omit_secrets=True)
    await meddler.asave("s", parent=_Parent(_Child(50), 50))
    child = _Child(7)
    parent = _Parent(child, 7, tries=7)
    seen: list[tuple[int, int, int]] = []

    async def bump() -> None:
        seen.append((parent.child.n, parent.count, parent.tries))
        parent.child, parent.count, parent.tries = _Child(parent.child.n + 1), parent.count + 1, parent.tries + 1
        parent.calls = [*parent.calls, len(seen)]
        if len(seen) == 1:
            await meddler.adelete("s")

    await session.aupdate("s", bump, parent=parent)
    assert seen == [(50, 50, 7), (7, 7, 7)]
    assert (parent.child.n, parent.count, parent.tries, parent.calls) == (8, 8, 8, [1, 2])


@stateful
class Vault(StateModule):
    count: int = state_field(default=0)
    token: str = state_field(default="", secret=True)


async def test_update_restarts_a_missing_session_with_its_secret_fields_too(tmp_path: Path) -> None:
    """The restart puts secret fields back as well (they are sealed with the session's key)."""
    key = generate_secret_key()
    session, meddler = JSONSession(tmp_path, secret_key=key), JSONSession(tmp_path, secret_key=key)
    vault = Vault(count=7, token="a")
    seen: list[tuple[int, str]] = []

    async def bump() -> None:
        seen.append((vault.count, vault.token))
        vault.count, vault.token = vault.count + 1, vault.token + "x"
        if len(seen) == 1:
            await meddler.asave("s", vault=Vault(count=50, token="m"))
        elif len(seen) == 2:
            await meddler.adelete("s")

    await session.aupdate("s", bump, vault=vault)
    assert seen == [(7, "a"), (50, "m"), (7, "a")]
    stored = Vault()
    await meddler.aload("s", vault=stored)
    assert (stored.count, stored.token) == (vault.count, vault.token) == (8, "ax")


@pytest.mark.parametrize("retries", [-1, 1.5, True, "3"])
async def test_update_refuses_a_bad_retry_count(tmp_path: Path, retries: object) -> None:
    with pytest.raises(SessionError, match="retries must be a whole number >= 0"):
        await JSONSession(tmp_path).aupdate("s", lambda: None, retries=retries, counter=Counter())  # type: ignore[call-overload]


async def test_update_refuses_a_mutate_it_cannot_call_before_loading(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    await session.asave("s", counter=Counter(count=5))
    counter = Counter()
    with pytest.raises(SessionError, match="mutate must be a function of no arguments .*, got null"):
        await session.aupdate("s", None, counter=counter)  # type: ignore[call-overload]
    assert counter.count == 0  # nothing was loaded into it


async def test_write_document_refuses_bad_arguments(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    with pytest.raises(SessionError, match="expected_revision or overwrite=True, not both"):
        await session.awrite_document("s", {}, expected_revision="x", overwrite=True)
    with pytest.raises(SessionError, match="expected_revision must be a revision string, got an integer"):
        await session.awrite_document("s", {}, expected_revision=5)  # type: ignore[arg-type]
    with pytest.raises(DocumentError, match="maps module names to states, not a list"):
        await session.awrite_document("s", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(DocumentError, match="newer statekit"):
        await session.awrite_document("s", {"__statekit__": {"format": 99}})
    assert not session.session_path("s").exists()


async def test_write_document_refuses_what_a_codec_would_write_changed(backend: SessionFactory) -> None:
    bad = {"agent": {"score": float("nan"), "limit": float("-inf"), "pair": (1, 2), "ok": [1.5, {"a": None}]}}
    async with backend() as session:
        with pytest.raises(StateDumpError) as caught:
            await session.awrite_document("s", bad)
        assert [(p.path, p.message) for p in caught.value.problems] == [
            (("agent", "score"), "nan (not a finite number) is not JSON data"),
            (("agent", "limit"), "-inf (not a finite number) is not JSON data"),
            (("agent", "pair"), "a tuple is not JSON data"),
        ]
        assert await session.aread_document("s") is None
        deep: Any = "leaf"
        for _ in range(MAX_DEPTH):
            deep = [deep]
        with pytest.raises(StateDumpError, match=f"nested deeper than {MAX_DEPTH} levels"):
            await session.awrite_document("s", {"agent": deep})
        assert await session.aread_document("s") is None


async def test_concurrent_tasks_with_separate_objects_lose_no_update(backend: SessionFactory) -> None:
    """32 asyncio tasks, each with its own session object, 5 updates each: exactly 160."""

    async def worker() -> None:
        counter = Counter()

        def bump() -> None:
            counter.count += 1

        async with backend() as session:
            for _ in range(5):
                await session.aupdate("shared", bump, user_id="u", retries=200, counter=counter)

    await asyncio.gather(*(worker() for _ in range(32)))
    final = Counter()
    async with backend() as session:
        await session.aload("shared", "u", allow_not_exist=False, counter=final)
    assert final.count == 160


# -- proof: processes, locks --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["json", "yaml"])
def test_eight_processes_lose_no_update_on_files(tmp_path: Path, kind: str) -> None:
    run_workers(kind, str(tmp_path))
    counter = Counter()
    with (JSONSession if kind == "json" else YAMLSession)(tmp_path) as session:
        session.load("shared", "u", allow_not_exist=False, counter=counter)
    assert counter.count == 8 * 50
    assert sorted(p.name for p in (tmp_path / "@u").iterdir()) == [f"shared.{kind}"]


@pytest.mark.slow
@pytest.mark.redis
def test_eight_processes_lose_no_update_on_redis(redis_server: RedisServer) -> None:
    prefix = f"proof-{uuid.uuid4().hex}:"
    url = f"redis://{redis_server.host}:{redis_server.port}/0"
    run_workers("redis", url, prefix=prefix)
    counter = Counter()
    with RedisSession.from_url(url, key_prefix=prefix) as session:
        session.load("shared", "u", allow_not_exist=False, counter=counter)
    assert counter.count == 8 * 50


HOLD_LOCK = """
import sys, time
from pathlib import Path
from statekit.session._filelock import session_lock
with session_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_a_writer_killed_while_holding_the_lock_leaves_no_stale_lock(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s", counter=Counter(count=1))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(session.session_path("s"))], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    session.lock_timeout = 0.3  # type: ignore[misc]
    with pytest.raises(SessionError, match="held its lock"):  # while it lives, writers wait, then give up
        session.save("s", counter=Counter(count=2))
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    started = time.monotonic()
    session.save("s", counter=Counter(count=3))
    assert time.monotonic() - started < 0.25
    assert os.listdir(tmp_path) == ["s.json"]
    session.close()


def test_memory_keeps_recent_bytes_and_only_hashes_of_older_sessions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_revisions, "MEMORY_BYTES", 300)
    memory = _revisions.RevisionMemory()
    first, second = b"a" * 200, b"b" * 200
    memory.remember(SessionKey("", "first"), _revisions.Expected(raw=first))
    memory.remember(SessionKey("", "second"), _revisions.Expected(raw=second))
    old, new = memory.get(SessionKey("", "first")), memory.get(SessionKey("", "second"))
    assert old is not None and old.raw is None and old.revision == revision_of(first)
    assert new is not None and new.raw == second
    assert old.matches(first) and not old.matches(second) and not old.matches(None)
    session, other = JSONSession(tmp_path), JSONSession(tmp_path)  # a stale save is caught by the hash too
    session.save("big", counter=Counter(count=1))
    session.save("filler", chat=Chat(name="x" * 400))
    remembered = session._revisions.get(session.key("big"))  # noqa: SLF001
    assert remembered is not None and remembered.raw is None
    other.save("big", counter=Counter(count=2))
    with pytest.raises(ConflictError):
        session.save("big", counter=Counter(count=3))
    session.close()
    other.close()


async def test_tasks_sharing_one_session_object_lose_no_update(backend: SessionFactory) -> None:
    """aupdate compares against what its own load saw, not what the shared object saw last."""

    async def worker(session: SessionBase) -> None:
        counter = Counter()

        def bump() -> None:
            counter.count += 1

        for _ in range(5):
            await session.aupdate("one-object", bump, user_id="u", retries=200, counter=counter)

    async with backend() as session:
        await asyncio.gather(*(worker(session) for _ in range(16)))
        final = Counter()
        await session.aload("one-object", "u", allow_not_exist=False, counter=final)
    assert final.count == 80


def test_the_contract_catches_a_compare_and_set_that_is_not_atomic() -> None:
    """A backend that yields between reading and writing loses updates; check_update_races says so."""
    store: dict[tuple[str, str], bytes] = {}

    class SlowDictSession(SessionBase):
        async def _read(self, key: SessionKey) -> bytes | None:
            await asyncio.sleep(0)
            return store.get((key.user_id, key.session_id))

        async def _write(self, key: SessionKey, data: bytes) -> None:
            await asyncio.sleep(0)
            store[key.user_id, key.session_id] = data

        async def _delete(self, key: SessionKey) -> bool:
            return store.pop((key.user_id, key.session_id), None) is not None

        async def _list(self, user_id: str) -> list[str]:
            return [session_id for owner, session_id in store if owner == user_id]

    with pytest.raises(AssertionError, match=r"racing update\(\) tasks lost \d+ of 48 increments: _write_if must compare"):
        asyncio.run(CHECKS["update_races"](SlowDictSession))
    asyncio.run(CHECKS["stale_save_conflicts"](SlowDictSession))  # one writer at a time is fine


@pytest.mark.parametrize("size", [0, 5, (1 << 18) - 1, 1 << 18, (1 << 18) * 2 + 7])
def test_a_conditional_file_save_compares_the_stored_bytes_a_chunk_at_a_time(tmp_path: Path, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    path = tmp_path / "doc.json"
    assert not holds_exactly(path, data)  # no file
    path.write_bytes(data)
    assert holds_exactly(path, data)
    assert not holds_exactly(path, data + b"!")
    if size:
        for where in (0, size // 2, size - 1):  # the first, a middle and the last chunk
            changed = bytearray(data)
            changed[where] ^= 1
            assert not holds_exactly(path, bytes(changed))


def test_a_conditional_file_save_never_follows_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_bytes(b"{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(SessionError, match="symbolic link"):
        holds_exactly(tmp_path / "link.json", b"{}")


def test_a_large_document_known_by_its_revision_only_is_hashed_as_it_is_read(tmp_path: Path) -> None:
    from statekit.session._files import _holds
    from statekit.session._revisions import Expected

    data = b'{"a": "' + b"x" * (3 << 20) + b'"}'
    path = tmp_path / "doc.json"
    path.write_bytes(data)
    assert digest_regular(path) == (revision_of(data), data[: 1 << 18])
    assert _holds(path, Expected(revision=revision_of(data)))
    assert not _holds(path, Expected(revision=revision_of(data + b" ")))
    assert not _holds(path, Expected(revision=MISSING_REVISION))
    path.unlink()
    assert digest_regular(path) is None
    assert not _holds(path, Expected(revision=revision_of(data)))
    assert _holds(path, Expected(revision=MISSING_REVISION))


async def test_a_blind_save_that_lost_a_race_reads_again_and_lands(tmp_path: Path) -> None:
    """A save by an object that remembers nothing writes over what it reads; another writer landing between
    that read and the write makes it read again (not raise), up to BLIND_ATTEMPTS times."""
    meddler, meddled = JSONSession(tmp_path), [0]

    class Raced(JSONSession):
        async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
            if meddled[0] < 2:  # the first two writes each lose a race
                meddled[0] += 1
                await meddler.asave("s", overwrite=True, counter=Counter(count=100 + meddled[0]))
            return await super()._write_if(key, data, expected)

    await meddler.asave("s", counter=Counter(count=1))
    session = Raced(tmp_path)
    await session.asave("s", counter=Counter(count=7))
    assert meddled[0] == 2
    counter = Counter()
    await meddler.aload("s", counter=counter)
    assert counter.count == 7
