"""History's storage on the file backends (issue 30): blobs beside a session, kept by hard links, through the primitives.

The public history API is built on ``_write_keeping``, ``_put_blob``, ``_get_blob``,
``_drop_blobs`` and ``_list_blobs``; these tests hold those primitives of JSONSession
and YAMLSession to their contract on real folders, and kill writers mid-save.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from append_models import Agent, Msg
from statekit.errors import LeaseHeldError, LeaseLostError, SessionError
from statekit.session import JSONSession, SessionKey, YAMLSession, revision_of
from statekit.session import Expected
from statekit.session import _files
from statekit.session._archive import Archive
from statekit.session._files import FileSession
from statekit.session.files import read_session_file
from statekit.testing import Counter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL, hard links, flock")
KINDS = [JSONSession, YAMLSession]
NO_REVISION = "0" * 40


def _history(session: FileSession, session_id: str, user_id: str = "") -> Path:
    path = session.session_path(session_id, user_id)
    return path.with_name(f".{path.name}.history")


def _doc(number: int, kept: list[str] | None = None) -> bytes:
    return json.dumps({"n": number, "kept": kept or []}).encode() + b"\n"


async def _stored(session: FileSession, key: SessionKey) -> bytes:
    raw = await session._read(key)
    assert raw is not None
    return raw


async def _keep(session: FileSession, key: SessionKey, data: bytes, drop: tuple[str, ...] = ()) -> str:
    """Replace the head with ``data``, keeping the old one; its revision."""
    old = await _stored(session, key)
    kept = revision_of(old)
    assert await session._write_keeping(key, data, Expected(raw=old), Archive(kept, drop))
    return kept


@pytest.mark.parametrize("kind", KINDS)
async def test_a_keeping_write_keeps_the_exact_old_bytes_under_their_revision(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path, keep_history=3)
    key = session.key("chat", "alice")
    await session.asave("chat", "alice", counter=Counter(count=1))
    old = await _stored(session, key)
    kept = await _keep(session, key, _doc(2))
    assert await session._read(key) == _doc(2)
    assert await session._get_blob(key, kept) == old
    assert await session._list_blobs(key) == [kept]
    blob = _history(session, "chat", "alice") / f"{kept}{kind.codec.suffix}"
    assert blob.read_bytes() == old and os.stat(blob).st_nlink == 1  # the old file itself, its head name gone
    assert os.stat(session.session_path("chat", "alice")).st_nlink == 1
    assert await session._get_blob(key, "f" * 40) is None
    loaded = Counter()  # the head still loads as ever; only the kept file moved into the folder
    second = kind(tmp_path)
    assert sorted(p.name for p in (tmp_path / "@alice").iterdir()) == [f".chat{kind.codec.suffix}.history", f"chat{kind.codec.suffix}"]
    await second.asave("other", "alice", counter=Counter(count=5))
    await second.aload("other", "alice", counter=loaded)
    assert loaded.count == 5


class _BlobView(JSONSession):
    """Reads a kept blob as the session's head: the load pipeline decodes it as it decodes a read."""

    def __init__(self, save_dir: Path, blob: str) -> None:
        super().__init__(save_dir)
        self.blob = blob

    async def _read(self, key: SessionKey) -> bytes | None:
        return await self._get_blob(key, self.blob)


async def test_a_blob_keeps_the_appended_items_of_its_revision(tmp_path: Path) -> None:
    session, agent = JSONSession(tmp_path), Agent()  # a session that keeps no history yet: its saves append
    key = session.key("chat")
    agent.memory.content.append(Msg("user", "0"))
    await session.asave("chat", agent=agent)
    for text in ("1", "2"):
        agent.memory.content.append(Msg("user", text))
        agent.events.append(int(text))
        await session.asave("chat", agent=agent)  # a delta: one line in the companion
    old = await _stored(session, key)
    assert getattr(old, "log", b"").count(b"\n") == 3, "the session should hold its header and two deltas"
    before = read_session_file(str(session.session_path("chat"))).data
    kept = await _keep(session, key, _doc(9))
    blob = await session._get_blob(key, kept)
    assert blob is not None and blob == old and getattr(blob, "log", None) == getattr(old, "log", None)
    assert revision_of(blob) == kept
    blob_file = _history(session, "chat") / f"{kept}.json"
    assert read_session_file(str(blob_file)).data == before  # the document merged with its deltas, as they were
    again = Agent()
    await _BlobView(tmp_path, kept).aload("chat", agent=again)
    assert again == agent
    assert not Path(f"{session.session_path('chat')}.log").exists()  # the head's companion went with the old head


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stale_expected_writes_nothing_and_keeps_nothing(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path, keep_history=2)
    key = session.key("chat")
    await session.asave("chat", counter=Counter(count=1))
    old = await _stored(session, key)
    stale = Expected(raw=old + b" ")
    assert not await session._write_keeping(key, _doc(2), stale, Archive(revision_of(old)))
    assert not await session._write_keeping(key, _doc(2), Expected(revision=NO_REVISION), Archive(revision_of(old)))
    assert await session._read(key) == old
    assert await session._list_blobs(key) == []
    assert not _history(session, "chat").exists()
    ghost = session.key("ghost")  # nothing stored: "missing" expected, nothing to keep
    assert await session._write_keeping(ghost, _doc(1), Expected(revision=""), Archive(None))
    assert not await session._write_keeping(ghost, _doc(2), Expected(revision=""), Archive(None))
    assert await session._read(ghost) == _doc(1)


@pytest.mark.parametrize("kind", KINDS)
async def test_drop_removes_the_pruned_blobs_in_the_same_write(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path, keep_history=1)
    key = session.key("chat")
    await session._write(key, _doc(0))
    first = await _keep(session, key, _doc(1))
    second = await _keep(session, key, _doc(2), drop=(first,))
    assert await session._list_blobs(key) == [second]
    assert await session._get_blob(key, first) is None
    assert await session._get_blob(key, second) == _doc(1)
    await session._put_blob(key, first, _doc(0))  # put back (a fork's copy, say): the same name, the same bytes
    await session._put_blob(key, first, b"ignored: a blob never changes")
    assert await session._get_blob(key, first) == _doc(0)
    assert sorted(await session._list_blobs(key)) == sorted([first, second])
    await session._drop_blobs(key, (first, second, "e" * 40))  # an unknown one is ignored
    assert await session._list_blobs(key) == []
    assert await session._read(key) == _doc(2)


async def test_a_put_blob_keeps_its_deltas(tmp_path: Path) -> None:
    session, agent = JSONSession(tmp_path), Agent()
    key = session.key("chat")
    await session.asave("chat", agent=agent)
    agent.events.append(1)
    await session.asave("chat", agent=agent)
    stored = await _stored(session, key)
    name = revision_of(stored)
    await session._put_blob(session.key("copy"), name, stored)
    assert await session._get_blob(session.key("copy"), name) == stored
    assert await session._list_blobs(session.key("copy")) == [name]
    assert await session.alist_sessions() == ["chat"]  # blobs of a session not stored yet: still no session


@pytest.mark.parametrize("kind", KINDS)
async def test_a_delete_removes_the_history(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path, keep_history=None)
    key = session.key("chat", "bob")
    await session._write(key, _doc(0))
    for number in range(1, 4):
        await _keep(session, key, _doc(number))
    assert len(await session._list_blobs(key)) == 3
    assert await session.adelete("chat", "bob")
    assert await session._list_blobs(key) == []
    assert not _history(session, "chat", "bob").exists()
    assert list((tmp_path / "@bob").iterdir()) == []
    # a delete that a crash stopped after the document: the caller's sweep drops what is listed, and the folder goes
    await session._write(key, _doc(0))
    await _keep(session, key, _doc(1))
    session.session_path("chat", "bob").unlink()
    names = await session._list_blobs(key)
    assert len(names) == 1
    await session._drop_blobs(key, tuple(names))
    assert list((tmp_path / "@bob").iterdir()) == []


@pytest.mark.parametrize("kind", KINDS)
async def test_blobs_are_never_sessions_users_or_another_session(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path, keep_history=None)
    kept: dict[str, str] = {}
    for user in ("", "alice", "bob"):
        key = session.key("chat", user)
        await session._write(key, _doc(0, [user]))
        kept[user] = await _keep(session, key, _doc(1, [user]))
    assert len(set(kept.values())) == 3
    only_history = session.key("gone", "carol")  # a user whose folder holds nothing but a history
    await session._put_blob(only_history, kept["alice"], _doc(0, ["alice"]))
    assert await session.alist_sessions() == ["chat"]
    assert await session.alist_sessions("alice") == ["chat"] and await session.alist_sessions("carol") == []
    assert sorted(await session.alist_users()) == ["", "alice", "bob"]
    for user in ("", "alice", "bob"):  # the same session id under two users: each sees only its own
        others = [name for owner, name in kept.items() if owner != user]
        assert await session._list_blobs(session.key("chat", user)) == [kept[user]]
        for name in others:
            assert await session._get_blob(session.key("chat", user), name) is None
    hidden = _history(session, "chat").name
    for session_id in (hidden, kept[""], f"{kept['']}{kind.codec.suffix}", hidden[1:]):
        assert not await session.aexists(session_id)
        assert await session._list_blobs(session.key(session_id)) == []
    assert not await session.aexists("gone", "carol")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", [0.5, -1, True, "3", [3]])
def test_keep_history_is_checked_on_every_constructor(tmp_path: Path, kind: type[FileSession], bad: Any) -> None:
    with pytest.raises(SessionError, match=f"keep_history should be an integer >= 0 .*got {re.escape(repr(bad))}"):
        kind(tmp_path, keep_history=bad)
    for good in (0, 1, 50, None):
        assert kind(tmp_path, keep_history=good).keep_history == good
    assert kind(tmp_path).keep_history == 0
    assert kind(tmp_path, layout="agentscope", keep_history=2).keep_history == 2


@pytest.mark.parametrize("name", ["../../escape", "A" * 40, "0" * 39, "0" * 41, "", "0" * 39 + "/"])
async def test_a_blob_name_that_is_not_a_revision_is_refused(tmp_path: Path, name: str) -> None:
    session = JSONSession(tmp_path)
    key = session.key("chat")
    await session._write(key, _doc(0))
    message = "is not a revision \\(40 lower-case hex digits\\)"
    with pytest.raises(SessionError, match=message):
        await session._get_blob(key, name)
    with pytest.raises(SessionError, match=message):
        await session._put_blob(key, name, b"{}")
    with pytest.raises(SessionError, match=message):
        await session._write_keeping(key, _doc(1), Expected(raw=_doc(0)), Archive(name))
    assert await session._read(key) == _doc(0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json"]


@pytest.mark.parametrize("odd", ["link", "file"])
async def test_a_history_folder_that_is_a_link_or_a_file_is_never_followed(tmp_path: Path, odd: str) -> None:
    session = JSONSession(tmp_path / "s", keep_history=3)
    key = session.key("chat")
    await session._write(key, _doc(0))
    folder = _history(session, "chat")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{NO_REVISION}.json").write_bytes(b"{}")
    if odd == "link":
        folder.symlink_to(elsewhere)
    else:
        folder.write_bytes(b"x")
    message = "history is not a folder \\(a link, a file...\\)"
    with pytest.raises(SessionError, match=message):
        await _keep(session, key, _doc(1))
    with pytest.raises(SessionError, match=message):
        await session._get_blob(key, NO_REVISION)
    with pytest.raises(SessionError, match=message):
        await session._list_blobs(key)
    with pytest.raises(SessionError, match=message):
        await session._drop_blobs(key, (NO_REVISION,))
    with pytest.raises(SessionError, match=message):
        await session.adelete("chat")
    assert await session._read(key) == _doc(0)  # nothing written, nothing deleted
    assert sorted(p.name for p in elsewhere.iterdir()) == [f"{NO_REVISION}.json"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_lease_fence_refuses_keeping_writes_of_others(tmp_path: Path, kind: type[FileSession]) -> None:
    with kind(tmp_path, keep_history=5) as holder, kind(tmp_path, keep_history=5) as other:
        key = holder.key("chat")
        holder.save("chat", counter=Counter(count=1))
        old = holder.session_path("chat").read_bytes()
        name = revision_of(old)
        with holder.lease("chat", ttl=60):
            with pytest.raises(LeaseHeldError):
                asyncio.run(other._write_keeping(key, _doc(1), Expected(raw=old), Archive(name)))
            with pytest.raises(LeaseHeldError):
                asyncio.run(other._put_blob(key, name, old))
            with pytest.raises(LeaseHeldError):
                asyncio.run(other._drop_blobs(key, (name,)))
            assert holder.session_path("chat").read_bytes() == old
            assert not _history(holder, "chat").exists()
        lease = holder.lease("chat", ttl=0.2)
        time.sleep(0.5)  # past its end: then another takes the session over
        with other.lease("chat", ttl=60):
            with pytest.raises(LeaseLostError):
                asyncio.run(holder._write_keeping(key, _doc(1), Expected(raw=old), Archive(name)))
            assert holder.session_path("chat").read_bytes() == old
            assert not _history(holder, "chat").exists()
            assert asyncio.run(other._write_keeping(key, _doc(1), Expected(raw=old), Archive(name)))
        lease.release()  # a lost lease: nothing to end
        assert asyncio.run(other._list_blobs(key)) == [name]


def test_readers_never_trip_over_the_link_a_keeping_save_makes(tmp_path: Path) -> None:
    """While saves link the old document into the history before renaming, loads and checks in other threads go on."""
    session = JSONSession(tmp_path, keep_history=2)
    key = session.key("chat")
    asyncio.run(session._write(key, _doc(0)))
    failures: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        reader = JSONSession(tmp_path)
        while not done.is_set():
            try:
                raw = asyncio.run(reader._read(key))
                assert raw is not None and json.loads(raw)["n"] >= 0
                assert reader.exists("chat") and reader.list_sessions() == ["chat"]
            except BaseException as err:  # noqa: BLE001 - reported below
                failures.append(err)
                return

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for number in range(1, 150):
            old = asyncio.run(_stored(session, key))
            state = json.loads(old)
            kept = [revision_of(old), *state["kept"]]
            archive = Archive(kept[0], tuple(kept[2:]))
            assert asyncio.run(session._write_keeping(key, _doc(number, kept[:2]), Expected(raw=old), archive))
    finally:
        done.set()
        for thread in readers:
            thread.join(60)
    assert failures == []
    assert len(asyncio.run(session._list_blobs(key))) == 2


async def test_history_in_agentscope_layout_sits_beside_its_file(tmp_path: Path) -> None:
    session = JSONSession(tmp_path, layout="agentscope", keep_history=1)
    key = session.key("chat", "alice")
    await session._write(key, _doc(0))
    kept = await _keep(session, key, _doc(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".alice_chat.json.history", "alice_chat.json"]
    assert await session._get_blob(key, kept) == _doc(0)
    assert await session.alist_sessions("alice") == ["chat"] and await session.alist_sessions() == ["alice_chat"]
    assert await session.adelete("chat", "alice")
    assert list(tmp_path.iterdir()) == []


# -- a writer killed between keeping the old head and replacing it -------------------------------------------------------


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _killed_keeping(session: FileSession, key: SessionKey, data: bytes, where: str) -> None:
    """In a forked child: a keeping write killed after its links, before the rename (``where``: in which call)."""
    pid = os.fork()
    if pid == 0:
        try:
            setattr(_files, where, lambda *args, **kwargs: _die())
            old = asyncio.run(session._read(key))
            assert old is not None
            asyncio.run(session._write_keeping(key, data, Expected(raw=old), Archive(revision_of(old))))
        finally:
            os._exit(3)  # never reached: the child dies in the write
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


@pytest.mark.parametrize("kind", KINDS)
def test_a_kill_between_link_and_rename_leaves_the_old_head_readable_and_writable(tmp_path: Path, kind: type[FileSession]) -> None:
    with kind(tmp_path, keep_history=3) as session:
        key = session.key("chat")
        session.save("chat", counter=Counter(count=1))
        first = session.session_path("chat").read_bytes()
        _killed_keeping(session, key, _doc(2), "atomic_write")
        assert os.stat(session.session_path("chat")).st_nlink == 2  # the killed write's link is there
        loaded = Counter()
        session.load("chat", counter=loaded)  # the old head, whole, read strictly
        assert loaded.count == 1
        assert session.exists("chat") and session.list_sessions() == ["chat"]
        assert asyncio.run(session._get_blob(key, revision_of(first))) == first  # kept, though no head lists it yet
        session.save("chat", counter=Counter(count=2))  # a write without history goes on as ever
        kept = asyncio.run(session._list_blobs(key))
        assert kept == [revision_of(first)]
        second = session.session_path("chat").read_bytes()
        _killed_keeping(session, key, _doc(3), "atomic_write")
        assert asyncio.run(_keep(session, key, _doc(3))) == revision_of(second)  # the same name: kept as it was
        assert asyncio.run(session._get_blob(key, revision_of(second))) == second
        assert asyncio.run(session._get_blob(key, revision_of(first))) == first
        assert os.stat(session.session_path("chat")).st_nlink == 1


@pytest.mark.parametrize("where", ["retire", "atomic_write"])
def test_a_kill_after_the_companion_is_linked_leaves_appends_working(tmp_path: Path, where: str) -> None:
    """The companion and the document linked (the companion put aside, or not yet), the writer killed:
    reads allow the links, an append removes them first."""
    with JSONSession(tmp_path) as session:  # a session that keeps no history: its saves append
        key, agent = session.key("chat"), Agent()
        session.save("chat", agent=agent)
        agent.events.append(1)
        session.save("chat", agent=agent)  # a companion now
        _killed_keeping(session, key, _doc(2), where)
        path = session.session_path("chat")
        deltas = Path(f"{path}.log") if where == "retire" else path.with_name(f".{path.name}.log.old")
        assert os.stat(path).st_nlink == 2 and os.stat(deltas).st_nlink == 2
        again = Agent()
        session.load("chat", agent=again)
        assert again == agent
        agent.events.append(2)
        session.save("chat", agent=agent)  # a delta written in place: the history's names of these files went first
        assert os.stat(path).st_nlink == 1 and os.stat(f"{path}.log").st_nlink == 1
        assert asyncio.run(session._list_blobs(key)) == []
        again = Agent()
        JSONSession(tmp_path).load("chat", agent=again)
        assert again.events == [1, 2]


def test_a_foreign_hard_link_is_still_refused_beside_a_history(tmp_path: Path) -> None:
    with JSONSession(tmp_path / "s", keep_history=3) as session:
        key = session.key("chat")
        asyncio.run(session._write(key, _doc(0)))
        asyncio.run(_keep(session, key, _doc(1)))
        os.link(session.session_path("chat"), tmp_path / "outside.json")
        with pytest.raises(SessionError, match=r"chat\.json has 2 hard links"):
            asyncio.run(session._read(key))
        with pytest.raises(SessionError, match=r"chat\.json has 2 hard links"):
            asyncio.run(_keep(session, key, _doc(2)))


def _keeper(folder: Path, kind: type[FileSession], progress: int) -> None:
    """A forked child: replace the head forever, keeping the last 3 revisions (each head lists them), reporting each save."""

    async def loop() -> None:
        session = kind(folder, keep_history=3)
        key = session.key("chat")
        while True:
            old = await _stored(session, key)
            state = json.loads(old)
            kept = [revision_of(old), *state["kept"]]
            archive = Archive(kept[0], tuple(kept[3:]))
            assert await session._write_keeping(key, _doc(state["n"] + 1, kept[:3]), Expected(raw=old), archive)
            os.write(progress, f"{state['n'] + 1}\n".encode())

    asyncio.run(loop())


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_kills_mid_keeping_save_never_lose_a_listed_blob(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path, keep_history=3)
    key = session.key("chat")
    asyncio.run(session._write(key, _doc(0)))
    rng, completed, kills = random.Random(30), 0, 0
    while kills < 30 or completed < 200:
        assert kills < 400, f"{kills} kills and only {completed} saves completed"
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            try:
                _keeper(tmp_path, kind, write_end)
            finally:
                os._exit(0)
        os.close(write_end)
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            printed = pipe.read().split()
        completed = int(printed[-1]) if printed else completed
        head = asyncio.run(_stored(session, key))
        state = json.loads(head)
        assert state["n"] in (completed, completed + 1), (state, completed)
        for number, name in enumerate(state["kept"], start=1):  # every listed revision is there, exactly
            blob = asyncio.run(session._get_blob(key, name))
            assert blob is not None and revision_of(blob) == name
            assert json.loads(blob)["n"] == state["n"] - number
        for name in asyncio.run(session._list_blobs(key)):  # a pruned one a kill left lingers, never torn
            blob = asyncio.run(session._get_blob(key, name))
            assert blob is not None and revision_of(blob) == name
        completed = state["n"]
        kills += 1
    assert session.list_sessions() == ["chat"]
