"""Sessions: the shared contract on every backend, then what is particular to files."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from strategies import examples
from workers import run_forked
from statekit.cli import main as cli_main
from statekit.errors import (
    ConflictError,
    DocumentError,
    InvalidSessionIdError,
    LeaseHeldError,
    SessionError,
    StateLoadError,
)
from statekit.session import META_KEY, Expected, JSONSession, SessionBase, SessionKey, YAMLSession
from statekit.session._ids import MAX_ID_LENGTH
from statekit.session import _files, _read_threads
from statekit.session._file_names import USER_MARK, decode_id, encode_id
from statekit.session._files import FileSession
from append_models import Agent as AppendAgent, Memory, Msg
from statekit.testing import (
    CHECKS,
    HOSTILE_IDS,
    Chat,
    Counter,
    Message,
    SessionContract,
    SessionFactory,
    check_backend,
    check_blocking_twins,
)


class TestContract(SessionContract):
    """statekit.testing's contract, run on JSON, YAML and Redis."""

    @pytest.fixture(autouse=True)
    def _use_backend(self, backend: SessionFactory) -> None:
        self._factory = backend

    def make_session(self) -> SessionBase:
        return self._factory()

    @pytest.mark.slow
    def test_large_session(self) -> None:
        super().test_large_session()


def test_list_users_names_every_user_with_sessions(backend: SessionFactory) -> None:
    with backend() as session:
        before = set(session.list_users())  # Redis tests share a server: other tests' users may be there
        for user in ("alice", "b:o%b", ""):
            session.save("s:1", user, counter=Counter())
        session.save("s2", "alice", counter=Counter())
        assert set(session.list_users()) - before == {"alice", "b:o%b", ""} - before
        assert session.list_users() == sorted(session.list_users())
        session.delete("s:1", "b:o%b")
        assert "b:o%b" not in session.list_users()


def test_list_users_of_a_backend_that_cannot_tell_is_a_session_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="ReferenceLikeSession cannot list its users"):
        ReferenceLikeSession({}).list_users()
    with pytest.raises(SessionError, match="a folder in AgentScope's layout cannot tell its users apart"):
        JSONSession(tmp_path, layout="agentscope").list_users()
    assert JSONSession(tmp_path / "nothing-here").list_users() == []


# -- the contract catches a broken backend ------------------------------------------


class ReferenceLikeSession(SessionBase):
    """Stores sessions the way the reference names files: f"{user_id}_{session_id}"."""

    def __init__(self, store: dict[str, bytes]) -> None:
        self.store = store

    async def _read(self, key: SessionKey) -> bytes | None:
        return self.store.get(f"{key.user_id}_{key.session_id}")

    async def _write(self, key: SessionKey, data: bytes) -> None:
        self.store[f"{key.user_id}_{key.session_id}"] = data

    async def _delete(self, key: SessionKey) -> bool:
        return self.store.pop(f"{key.user_id}_{key.session_id}", None) is not None

    async def _list(self, user_id: str) -> list[str]:
        return [name.split("_", 1)[1] for name in self.store if name.startswith(f"{user_id}_")]


def test_contract_passes_a_correct_in_memory_backend() -> None:
    """A dict keyed by (user, session) tuples keeps the contract: the checks are not too strict."""
    store: dict[tuple[str, str], bytes] = {}

    class TupleSession(ReferenceLikeSession):
        async def _read(self, key: SessionKey) -> bytes | None:
            return store.get((key.user_id, key.session_id))

        async def _write(self, key: SessionKey, data: bytes) -> None:
            store[key.user_id, key.session_id] = data

        async def _delete(self, key: SessionKey) -> bool:
            return store.pop((key.user_id, key.session_id), None) is not None

        async def _list(self, user_id: str) -> list[str]:
            return [session for user, session in store if user == user_id]

    asyncio.run(check_backend(lambda: TupleSession({}), skip=frozenset({"large_session"})))
    check_blocking_twins(lambda: TupleSession({}))


@pytest.mark.parametrize("check", ["hostile_ids", "list_delete_exists"])
def test_contract_catches_colliding_names(check: str) -> None:
    store: dict[str, bytes] = {}
    with pytest.raises(AssertionError):
        asyncio.run(CHECKS[check](lambda: ReferenceLikeSession(store)))


# -- files: where they go ---------------------------------------------------------------


@pytest.fixture(params=[JSONSession, YAMLSession], ids=["json", "yaml"])
def file_session(request: pytest.FixtureRequest, tmp_path: Path) -> FileSession:
    session: FileSession = request.param(tmp_path / "a" / "sessions")
    return session


def test_layout_is_one_file_per_user_and_session(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    assert session.session_path("chat-1") == tmp_path / "chat-1.json"
    assert session.session_path("chat-1", "alice") == tmp_path / "@alice" / "chat-1.json"
    assert session.session_path("Chat 1", "Bob/x") == tmp_path / "@%42ob%2Fx" / "%43hat%201.json"
    assert session.session_path("../x", "Bob") == tmp_path / "@%42ob" / "%2E.%2Fx.json"  # docs/sessions.md
    assert YAMLSession(tmp_path).session_path("c", "u") == tmp_path / "@u" / "c.yaml"


def test_hostile_ids_stay_inside_save_dir(file_session: FileSession, tmp_path: Path) -> None:
    ids = [*HOSTILE_IDS, ("/etc", "/etc/passwd"), ("../..", "../../../tmp/x"), ("C:\\", "..\\..\\x")]
    for index, (user, session_id) in enumerate(ids):
        file_session.save(session_id, user, counter=Counter(count=index))
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len(written) == len(ids)
    assert all(path.is_relative_to(file_session.save_dir) for path in written)
    assert all(path.parent.parent in (file_session.save_dir, tmp_path / "a") for path in written)


@given(st.text(min_size=1, max_size=MAX_ID_LENGTH).filter(lambda s: "\x00" not in s))
@settings(max_examples=examples(300))
def test_encoded_ids_are_reversible_and_unique_ignoring_case(value: Any) -> None:
    assume(_utf8(value))
    name = encode_id(value)
    assert decode_id(name) == value
    assert unquote(name.lower()) == value  # so no two ids share a name on a case-insensitive disk
    assert "/" not in name and "\\" not in name and name not in (".", "..") and name[0] != "."
    assert name[0] != USER_MARK


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_windows_device_names_are_encoded() -> None:
    assert encode_id("con") == "%63on"
    assert encode_id("nul.txt") == "%6Eul.txt"
    assert encode_id("console") == "console"
    assert decode_id("%63on") == "con"


def test_listing_ignores_files_statekit_did_not_write(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("kept", counter=Counter())
    for stray in ("README.json", "notes.txt", ".statekit-abc.tmp", "%zz.json", "a%2fb.json"):
        (tmp_path / stray).write_text("{}")
    (tmp_path / "folder.json").mkdir()
    assert session.list_sessions() == ["kept"]


def test_ids_too_long_for_a_file_name_are_refused(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    with pytest.raises(InvalidSessionIdError, match="too long for a file name"):
        session.save("😀" * 100, counter=Counter())
    assert list(tmp_path.iterdir()) == []


def test_session_files_are_private_to_their_owner(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s", counter=Counter())
    assert stat.S_IMODE(session.session_path("s").stat().st_mode) == 0o600


# -- files: what is inside --------------------------------------------------------------


def test_json_file_is_pretty_utf8_with_the_format_version(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s", chat=Chat(name="Friday 😀"), counter=Counter(count=2))
    text = session.session_path("s").read_text(encoding="utf-8")
    assert text.startswith('{\n  "__statekit__": {\n    "format": 1\n  },\n  "chat": {\n    "name": "Friday 😀",')
    assert text.endswith("}\n")


def test_a_reference_written_file_loads(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text(json.dumps({"counter": {"count": 4}}))
    counter = Counter()
    JSONSession(tmp_path).load("old", counter=counter)
    assert counter.count == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "this one is list"),
        ("", "invalid JSON"),
        ('{"__statekit__": {"format": 99}}', "newer statekit"),
        ('{"__statekit__": "x"}', r"__statekit__ should be an object holding the format, got a string"),
        ('{"__statekit__": 3}', r"__statekit__ should be an object holding the format, got an integer"),
        ('{"__statekit__": {"format": "1"}}', r"__statekit__\.format should be an integer, got '1'"),
        ('{"counter": {"count": 1},\n "x": [1,,]}', r"s\.json:2:10: invalid JSON"),
    ],
)
def test_a_broken_document_is_a_document_error_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "s.json").write_text(content)
    counter = Counter(count=5)
    with pytest.raises(DocumentError, match=message):
        JSONSession(tmp_path).load("s", counter=counter)
    assert counter.count == 5


def test_load_errors_name_file_line_and_column(tmp_path: Path) -> None:
    session = YAMLSession(tmp_path)
    session.save("s", chat=Chat(name="x", messages=[Message("user", "hi"), Message("assistant", "yo")]))
    path = session.session_path("s")
    path.write_text(path.read_text().replace("role: assistant", "role: [1, 2]"))
    chat = Chat()
    with pytest.raises(StateLoadError) as caught:
        session.load("s", chat=chat)
    (problem,) = caught.value.problems
    assert (problem.source, problem.line, problem.column) == (str(path), 8, 5)
    assert problem.path == ("chat", "messages", 1, "role")
    assert chat == Chat()


# -- files: a failed save keeps the old file ---------------------------------------------


def test_a_failing_rename_keeps_the_old_file_and_no_temp(file_session: FileSession, monkeypatch: pytest.MonkeyPatch) -> None:
    file_session.save("s", counter=Counter(count=1))
    before = file_session.session_path("s").read_bytes()

    def refuse(*args: object) -> None:
        raise OSError(errno.EIO, "simulated I/O error")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(SessionError, match="simulated I/O error"):
        file_session.save("s", counter=Counter(count=2))
    assert file_session.session_path("s").read_bytes() == before
    assert sorted(p.name for p in file_session.save_dir.iterdir()) == [file_session.session_path("s").name]


FULL_DISK_CHILD = """
import resource, signal, sys
from statekit.session import JSONSession
from statekit.testing import Chat, Message
from statekit.errors import SessionError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # writes past 4 KiB fail with EFBIG
try:
    JSONSession(sys.argv[1]).save("s", chat=Chat(messages=[Message("user", "x" * 100)] * 100))
except SessionError as err:
    print("refused:", err)
"""


def test_a_full_disk_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    """A real failing write: the child process may not grow any file past 4 KiB."""
    session = JSONSession(tmp_path)
    session.save("s", counter=Counter(count=1))
    before = session.session_path("s").read_bytes()
    child = subprocess.run([sys.executable, "-c", FULL_DISK_CHILD, str(tmp_path)], capture_output=True, text=True, check=True)
    assert child.stdout.startswith("refused: cannot save"), child.stdout + child.stderr
    assert session.session_path("s").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


# -- reads off the event loop, on statekit's reader threads (_read_threads.py) ----------------


async def test_concurrent_loads_each_read_their_own_file(tmp_path: Path) -> None:
    """More loads at once than reader threads: each gets its own session, none waits forever."""
    session = JSONSession(tmp_path)
    ids = [f"s{index}" for index in range(3 * _read_threads.MAX_THREADS)]
    for index, session_id in enumerate(ids):
        await session.asave(session_id, chat=Chat(name=session_id, messages=[Message("user", "x" * index)]))
    loaded = {session_id: Chat() for session_id in ids}
    await asyncio.wait_for(
        asyncio.gather(*(JSONSession(tmp_path).aload(sid, chat=chat) for sid, chat in loaded.items())), timeout=60
    )
    assert [(chat.name, len(chat.messages[0].content)) for chat in loaded.values()] == [(sid, i) for i, sid in enumerate(ids)]


@pytest.fixture
def one_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool of one reader thread: its jobs run in the order given, each delivered before the next starts."""
    monkeypatch.setattr(_read_threads, "MAX_THREADS", 1)
    monkeypatch.setattr(_read_threads, "_readers", _read_threads._Readers())


def test_a_read_whose_caller_is_cancelled_or_whose_loop_closed_is_dropped(one_reader: None) -> None:
    """A cancelled caller's read ends in its thread without an error in the loop; a read that outlives
    its closed loop leaves its thread serving the next (else that read would wait forever)."""
    gate, handled = threading.Event(), []
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda _loop, context: handled.append(context))

    async def cancel_then_read() -> int:
        waiting = asyncio.ensure_future(_read_threads.off_loop(gate.wait, 60))
        await asyncio.sleep(0)  # handed to the reader
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gate.set()
        return await _read_threads.off_loop(int, "7")  # after the cancelled one was delivered (one thread)

    assert loop.run_until_complete(cancel_then_read()) == 7
    gate.clear()
    abandoned = asyncio.ensure_future(_read_threads.off_loop(gate.wait, 60), loop=loop)
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()  # with the read in flight
    gate.set()
    assert asyncio.run(asyncio.wait_for(_read_threads.off_loop(int, "8"), timeout=60)) == 8
    assert handled == [] and not abandoned.done()


async def test_a_read_raises_in_its_caller(one_reader: None) -> None:
    with pytest.raises(ZeroDivisionError):
        await _read_threads.off_loop(divmod, 1, 0)
    assert await _read_threads.off_loop(divmod, 7, 2) == (3, 1)


READ_AFTER_FORK = """
import asyncio
from statekit.session import JSONSession
from statekit.testing import Counter

def work(folder):
    loaded = Counter()
    asyncio.run(asyncio.wait_for(JSONSession(folder).aload("s", counter=loaded), timeout=60))
    print(loaded.count)

"""


def test_a_forked_child_reads_on_threads_of_its_own(tmp_path: Path) -> None:
    """The parent read before forking (its reader thread is not in the children): each child starts its own."""
    JSONSession(tmp_path).save("s", counter=Counter(count=3))
    code = READ_AFTER_FORK + f"JSONSession({str(tmp_path)!r}).load('s', counter=Counter())\n"  # before the forks
    assert run_forked(code, [[str(tmp_path)], [str(tmp_path)]], timeout=120) == ["3\n", "3\n"]


CONCURRENT_WRITER = """
from statekit.session import JSONSession
from statekit.testing import Chat, Message


def work(folder, me):
    session = JSONSession(folder)
    for turn in range(30):
        session.save("shared", overwrite=True, chat=Chat(name=f"{me}-{turn}", messages=[Message("user", me * 2000)] * 20))
    session.close()
"""


def test_concurrent_saves_from_processes_leave_one_whole_document(tmp_path: Path) -> None:
    run_forked(CONCURRENT_WRITER, [[str(tmp_path), name] for name in "abcd"], timeout=120)
    chat = Chat()
    JSONSession(tmp_path).load("shared", allow_not_exist=False, chat=chat)
    writer = chat.name.split("-")[0]
    assert chat.messages == [Message("user", writer * 2000)] * 20
    assert [p.name for p in tmp_path.iterdir()] == ["shared.json"]


async def test_big_saves_and_loads_let_other_tasks_run(tmp_path: Path) -> None:
    """Encoding and file I/O run in a worker thread, not on the event loop."""
    session = YAMLSession(tmp_path)
    big = Chat(messages=[Message("user", f"message {i}\nwith two lines") for i in range(20_000)])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await session.asave("big", chat=big)
    saved_ticks = ticks
    await session.aload("big", chat=Chat())
    task.cancel()
    assert saved_ticks > 10 and ticks - saved_ticks > 10, (saved_ticks, ticks)


# -- the blocking twins --------------------------------------------------------------------


def test_blocking_twins_work_from_several_threads(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: session.save(f"s{i}", counter=Counter(count=i)), range(16)))
    assert session.list_sessions() == sorted(f"s{i}" for i in range(16))
    session.close()


def test_close_waits_for_a_blocking_call_another_thread_has_in_flight(tmp_path: Path) -> None:
    """Stopping the helper loop under a call in flight left that call waiting for ever."""
    session, started = JSONSession(tmp_path), threading.Event()

    class Slow(Counter):
        def state_dict(self) -> dict[str, Any]:
            started.set()
            time.sleep(0.3)  # the save is in flight on the helper loop while close() runs
            return super().state_dict()

    saver = threading.Thread(target=session.save, args=("s",), kwargs={"counter": Slow(count=3)}, daemon=True)
    saver.start()  # a daemon: if the save hangs, the test fails instead of hanging too
    assert started.wait(10)
    session.close()
    saver.join(10)
    assert not saver.is_alive()
    loaded = Counter()
    JSONSession(tmp_path).load("s", counter=loaded)
    assert loaded.count == 3


def test_close_is_not_starved_by_threads_that_keep_calling(tmp_path: Path) -> None:
    """Calls that arrive while close() waits queue behind it, then run on a new helper loop."""
    session, stop, done = JSONSession(tmp_path), threading.Event(), []

    def keep_saving(index: int) -> None:
        while not stop.is_set():
            session.save(f"s{index}", counter=Counter(count=index))
        done.append(index)

    workers = [threading.Thread(target=keep_saving, args=(index,), daemon=True) for index in range(4)]
    for worker in workers:
        worker.start()
    time.sleep(0.2)
    closing = threading.Thread(target=session.close, daemon=True)
    closing.start()
    closing.join(10)
    assert not closing.is_alive(), "close() waited for the other threads to stop calling"
    stop.set()
    for worker in workers:
        worker.join(10)
    assert sorted(done) == [0, 1, 2, 3]
    session.close()


async def test_blocking_twins_refuse_a_running_loop(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    with pytest.raises(SessionError, match=r"use `await session.aload\(...\)`"):
        session.load("s", counter=Counter())


def test_reserved_module_name_is_refused(tmp_path: Path) -> None:
    modules: dict[str, Any] = {META_KEY: Counter()}
    with pytest.raises(SessionError, match="reserved"):
        JSONSession(tmp_path).save("s", **modules)
    assert list(tmp_path.iterdir()) == []


class _DictSession(SessionBase):
    """The docs' example backend: a dict keyed by (user_id, session_id)."""

    def __init__(self, store: dict[tuple[str, str], bytes]) -> None:
        self.store = store

    def k(self, key: SessionKey) -> tuple[str, str]:
        return key.user_id, key.session_id

    async def _read(self, key: SessionKey) -> bytes | None:
        return self.store.get(self.k(key))

    async def _write(self, key: SessionKey, data: bytes) -> None:
        self.store[self.k(key)] = data

    async def _delete(self, key: SessionKey) -> bool:
        return self.store.pop(self.k(key), None) is not None

    async def _list(self, user_id: str) -> list[str]:
        return [session_id for owner, session_id in self.store if owner == user_id]


class _ExistsIgnoresUser(_DictSession):
    async def _exists(self, key: SessionKey) -> bool:
        return any(session_id == key.session_id for _, session_id in self.store)


class _DefaultUserListsEveryone(_DictSession):
    async def _list(self, user_id: str) -> list[str]:
        return [session_id for owner, session_id in self.store if owner == user_id or user_id == ""]


class _NormalizingKeys(_DictSession):
    def k(self, key: SessionKey) -> tuple[str, str]:
        return key.user_id, unicodedata.normalize("NFC", key.session_id)


@pytest.mark.parametrize("broken", [_ExistsIgnoresUser, _DefaultUserListsEveryone, _NormalizingKeys])
def test_the_contract_catches_backends_that_mix_up_users_or_ids(broken: type[_DictSession]) -> None:
    store: dict[tuple[str, str], bytes] = {}
    with pytest.raises(AssertionError):
        asyncio.run(check_backend(lambda: broken(store)))
    right: dict[tuple[str, str], bytes] = {}
    asyncio.run(check_backend(lambda: _DictSession(right)))  # the same store done right passes


class _DeletesAnyUsersSession(_DictSession):
    async def _delete(self, key: SessionKey) -> bool:
        found = next((stored for stored in self.store if stored[1] == key.session_id), None)
        return found is not None and self.store.pop(found) is not None


class _ExistsFindsTheDefaultUsers(_DictSession):
    async def _exists(self, key: SessionKey) -> bool:
        return ("", key.session_id) in self.store or self.k(key) in self.store


class _ExistsAnswersTheBytes(_DictSession):
    async def _exists(self, key: SessionKey) -> Any:
        return self.store.get(self.k(key))


class _DeleteAnswersNothing(_DictSession):
    async def _delete(self, key: SessionKey) -> Any:
        return self.store.pop(self.k(key), None)


class _CreatesOverADeletion(_DictSession):
    """Compares only when something is stored: a session deleted meanwhile is written again."""

    async def _write_if(self, key: SessionKey, data: bytes, expected: Any) -> bool:
        stored = self.store.get(self.k(key))
        if stored is not None and not expected.matches(stored):
            return False
        self.store[self.k(key)] = data
        return True


class _HalfWrites(_DictSession):
    """Lets a reader in while only half of the new document is stored."""

    async def _write(self, key: SessionKey, data: bytes) -> None:
        self.store[self.k(key)] = data[: len(data) // 2]
        await asyncio.sleep(0)
        self.store[self.k(key)] = data


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_DeletesAnyUsersSession, r"delete\(\) deleted another user's session of the same id"),
        (_ExistsFindsTheDefaultUsers, r"exists\(\) found the default user's session for another user"),
        (_ExistsAnswersTheBytes, r"exists\(\) of a missing session did not return False"),
        (_DeleteAnswersNothing, r"delete\(\) of a stored session did not return True"),
        (_CreatesOverADeletion, "a save after another object deleted it: expected ConflictError"),
        (_HalfWrites, "found no whole document .*_write must replace the stored bytes atomically"),
    ],
)
def test_the_contract_tells_the_author_what_a_broken_backend_does_wrong(broken: type[_DictSession], message: str) -> None:
    store: dict[tuple[str, str], bytes] = {}
    with pytest.raises(AssertionError, match=message):
        asyncio.run(check_backend(lambda: broken(store), skip=frozenset({"large_session"})))


def test_the_contract_names_a_duplicated_listing() -> None:
    class ListsTwice(_DictSession):
        async def _list(self, user_id: str) -> list[str]:
            return 2 * await super()._list(user_id)

    with pytest.raises(AssertionError, match=r"list_sessions\('contract-\w+'\) returned \['a', 'a', 'b', 'b', 'c', 'c'\], not"):
        asyncio.run(CHECKS["list_delete_exists"](lambda: ListsTwice({})))


class _DropsDeltas(JSONSession):
    async def _append(self, key: SessionKey, line: bytes, base: Any) -> int | None:
        return len(line)  # says it stored the delta


class _AppendsBehindOthers(JSONSession):
    """Appends whatever was stored meanwhile (its base unchecked): no ConflictError."""

    async def _append(self, key: SessionKey, line: bytes, base: Any) -> int | None:
        stored = await self._read(key)
        current = base if stored is None else attrs.evolve(base, log_len=len(getattr(stored, "log", b"")))
        return await super()._append(key, line, current)


@pytest.mark.parametrize(
    ("broken", "message"),
    [(_DropsDeltas, "appended items did not load back"), (_AppendsBehindOthers, "'a save behind appends': expected ConflictError")],
)
def test_the_contract_checks_the_deltas_of_append_only_lists(tmp_path: Path, broken: type[JSONSession], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        asyncio.run(CHECKS["appends"](lambda: broken(tmp_path)))
    asyncio.run(CHECKS["appends"](lambda: JSONSession(tmp_path)))


async def test_a_cancelled_save_ends_before_the_cancellation_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker thread goes on after a cancel: raising at once let it land after a later save."""
    gate, replace_if = threading.Event(), _files._replace_if

    def held(*args: Any) -> bool:
        assert gate.wait(10)
        return replace_if(*args)

    monkeypatch.setattr(_files, "_replace_if", held)
    session = JSONSession(tmp_path)
    saving = asyncio.create_task(session.asave("k", counter=Counter(count=-1)))
    await asyncio.sleep(0.05)  # the write waits in its thread
    saving.cancel()
    done, _ = await asyncio.wait({saving}, timeout=0.2)
    assert not done, "the cancellation was raised while the write was still going on"
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await saving
    await session.asave("k", counter=Counter(count=2))  # its memory holds what the cancelled save wrote: no conflict
    loaded = Counter()
    await JSONSession(tmp_path).aload("k", counter=loaded)
    assert loaded.count == 2


@pytest.mark.parametrize("kind", [JSONSession, YAMLSession])
def test_listing_says_what_is_wrong_as_the_other_methods_do(tmp_path: Path, kind: type[FileSession]) -> None:
    too_long = "A" * 100  # 300 characters once encoded
    session = kind(tmp_path / "sessions")
    with pytest.raises(InvalidSessionIdError, match="too long for a file name once encoded"):
        session.list_sessions(too_long)
    (tmp_path / "sessions").write_text("not a folder")
    with pytest.raises(SessionError, match="cannot list the sessions in .*sessions: Not a directory"):
        session.list_sessions()
    session.close()


# -- an own backend's faults reach the caller as statekit errors -------------------------


class _FaultySession(_DictSession):
    """Raises ``fault`` from the primitive named ``broken``; the others work."""

    def __init__(self, store: dict[tuple[str, str], bytes], broken: str, fault: Exception) -> None:
        super().__init__(store)
        self.broken, self.fault = broken, fault

    def _maybe_fail(self, primitive: str) -> None:
        if primitive == self.broken:
            raise self.fault

    async def _read(self, key: SessionKey) -> bytes | None:
        self._maybe_fail("_read")
        return await super()._read(key)

    async def _write(self, key: SessionKey, data: bytes) -> None:
        self._maybe_fail("_write")
        await super()._write(key, data)

    async def _write_if(self, key: SessionKey, data: bytes, expected: Any) -> bool:
        self._maybe_fail("_write_if")
        return await super()._write_if(key, data, expected)

    async def _delete(self, key: SessionKey) -> bool:
        self._maybe_fail("_delete")
        return await super()._delete(key)

    async def _list(self, user_id: str) -> list[str]:
        self._maybe_fail("_list")
        return await super()._list(user_id)

    async def _exists(self, key: SessionKey) -> bool:
        self._maybe_fail("_exists")
        return await super()._exists(key)

    async def _close(self) -> None:
        self._maybe_fail("_close")


_CALLS: dict[str, Any] = {
    "_read": lambda s: s.load("s", "u", counter=Counter()),
    "_write": lambda s: s.save("s", "u", overwrite=True, counter=Counter()),
    "_write_if": lambda s: s.save("s", "u", counter=Counter()),
    "_delete": lambda s: s.delete("s", "u"),
    "_list": lambda s: s.list_sessions("u"),
    "_exists": lambda s: s.exists("s", "u"),
    "_close": lambda s: s.close(),
}


@pytest.mark.parametrize("fault", [OSError(errno.EIO, "I/O error"), KeyError("u"), RuntimeError("pool closed")])
@pytest.mark.parametrize("primitive", sorted(_CALLS))
def test_a_raw_error_of_an_own_backend_is_a_session_error_naming_it(primitive: str, fault: Exception) -> None:
    """Every exception statekit raises is a StatekitError: a backend's own reaches the caller as one."""
    store: dict[tuple[str, str], bytes] = {}
    _DictSession(store).save("s", "u", counter=Counter(count=1))
    session = _FaultySession(store, primitive, fault)
    if primitive == "_write_if":
        session.load("s", "u", counter=Counter())  # the next save is conditional
    with pytest.raises(SessionError, match=rf"_FaultySession\.{primitive} raised {type(fault).__name__}") as caught:
        _CALLS[primitive](session)
    assert caught.value.__cause__ is fault
    if primitive != "_close":
        assert "'s'" in str(caught.value) or "'u'" in str(caught.value), caught.value
    session.broken = ""
    session.close()


def test_a_primitive_set_on_one_session_object_is_the_one_its_calls_use() -> None:
    """The pipelines call a backend class's primitives with the object; a stand-in set on the object itself
    (as a test does) still replaces its class's for that object, and for no other."""
    store: dict[tuple[str, str], bytes] = {}
    session = _DictSession(store)
    session.save("s", "u", counter=Counter(count=1))  # remembered: the next save is a compare-and-set
    asked: list[SessionKey] = []

    async def refusing(key: SessionKey, data: bytes, expected: Expected) -> bool:
        asked.append(key)
        return False  # "changed by another writer"

    session._write_if = refusing  # type: ignore[method-assign]
    with pytest.raises(ConflictError):
        session.save("s", "u", counter=Counter(count=2))
    assert asked == [SessionKey("u", "s")]
    other = _DictSession(store)  # the class is untouched
    other.load("s", "u", counter=Counter())
    other.save("s", "u", counter=Counter(count=3))
    assert json.loads(store["u", "s"])["counter"] == {"count": 3}
    session.close()
    other.close()


class _ReadsWrongly(_DictSession):
    """``_read`` hands back the stored bytes converted by ``wrap``."""

    def __init__(self, store: dict[tuple[str, str], bytes], wrap: Any) -> None:
        super().__init__(store)
        self.wrap = wrap

    async def _read(self, key: SessionKey) -> Any:
        raw = await super()._read(key)
        return None if raw is None else self.wrap(raw)


@pytest.mark.parametrize(("wrap", "what"), [(bytes.decode, "a string"), (lambda raw: [raw], "a list"), (lambda raw: 0, "an integer")])
def test_a_read_that_returns_no_bytes_is_a_session_error_saying_so(wrap: Any, what: str) -> None:
    store: dict[tuple[str, str], bytes] = {}
    _DictSession(store).save("s", "u", counter=Counter(count=1))
    session = _ReadsWrongly(store, wrap)
    message = rf"session 's' of user 'u': _ReadsWrongly\._read returned {what}; it must return the stored bytes"
    for call in (
        lambda: session.load("s", "u", counter=Counter()),
        lambda: session.exists("s", "u"),
        lambda: session.revision("s", "u"),
        lambda: session.read_document("s", "u"),
    ):
        with pytest.raises(SessionError, match=message):
            call()
    blind = _ReadsWrongly(store, wrap)
    blind._revisions.remember(SessionKey("u", "s"), Expected(raw=store["u", "s"]))  # a conditional save reads first
    with pytest.raises(SessionError, match=message):
        blind.save("s", "u", counter=Counter(count=2))
    session.close()
    blind.close()


@pytest.mark.parametrize("wrap", [bytearray, memoryview])
def test_a_read_that_returns_a_bytes_like_buffer_works(wrap: Any) -> None:
    """A driver may hand back a memoryview (psycopg's bytea) or a bytearray: statekit takes their bytes."""
    store: dict[tuple[str, str], bytes] = {}
    session = _ReadsWrongly(store, wrap)
    session.save("s", "u", counter=Counter(count=1))
    loaded = Counter()
    session.load("s", "u", counter=loaded)
    session.save("s", "u", counter=Counter(count=2))  # a conditional save, comparing what was read
    assert loaded.count == 1 and session.exists("s", "u")
    assert session.read_document("s", "u").data["counter"] == {"count": 2}  # type: ignore[union-attr]
    session.close()


class _ListsWrongly(_DictSession):
    def __init__(self, store: dict[tuple[str, str], bytes], listed: Any) -> None:
        super().__init__(store)
        self.listed = listed

    async def _list(self, user_id: str) -> Any:
        return self.listed


@pytest.mark.parametrize(
    ("listed", "what"),
    [(["a", b"b"], "an id that is a bytes"), ("ab", "a string"), (None, "null"), ([("u", "a")], "an id that is a tuple")],
)
def test_a_list_of_other_than_str_ids_is_a_session_error_saying_so(listed: Any, what: str) -> None:
    session = _ListsWrongly({}, listed)
    with pytest.raises(SessionError, match=rf"sessions of user 'u': _ListsWrongly\._list returned {what}; it must return"):
        session.list_sessions("u")
    session.close()


def test_a_list_may_be_any_iterable_of_ids() -> None:
    assert _ListsWrongly({}, iter(["b", "a"])).list_sessions("u") == ["a", "b"]
    assert _ListsWrongly({}, ("b", "a")).list_sessions("u") == ["a", "b"]


def test_a_raw_error_of_an_own_append_is_a_session_error_naming_it(tmp_path: Path) -> None:
    fault = KeyError("token")

    class FaultyAppends(JSONSession):
        async def _append(self, key: SessionKey, line: bytes, base: Any) -> int | None:
            raise fault

    session = FaultyAppends(tmp_path)
    memory = Memory(content=[Msg("user", "hi")])
    session.save("s", "u", memory=memory)
    memory.content.append(Msg("assistant", "hello"))
    with pytest.raises(SessionError, match=r"FaultyAppends\._append raised KeyError") as caught:
        session.save("s", "u", memory=memory)
    assert caught.value.__cause__ is fault
    session.close()


# -- issue 23, item 2: a save keeps the stored modules it does not name ------------------


def _memory(*texts: str) -> Memory:
    return Memory(content=[Msg("user", text) for text in texts])


def test_a_partial_save_keeps_the_other_modules_with_their_appended_items(backend: SessionFactory) -> None:
    with backend() as writer, backend() as blind:
        agent = AppendAgent(memory=_memory("a"), events=[1])
        writer.save("chat", agent=agent, counter=Counter(count=1))
        agent.memory.content.append(Msg("user", "b"))
        agent.events.append(2)
        writer.save("chat", agent=agent)  # a delta where the backend stores them
        blind.save("chat", counter=Counter(count=2))  # never loaded it: reads, keeps agent, writes over what it read
        loaded, counter = AppendAgent(), Counter()
        blind.load("chat", allow_not_exist=False, agent=loaded, counter=counter)
        assert (loaded.memory.content, loaded.events, counter.count) == (agent.memory.content, [1, 2], 2)
        agent.memory.content.append(Msg("user", "c"))
        with pytest.raises(ConflictError):  # the blind save changed the session since writer saved it
            writer.save("chat", agent=agent)
        writer.update("chat", lambda: agent.memory.content.append(Msg("user", "d")), agent=agent)
        writer.load("chat", agent=loaded, counter=counter)
        assert [m.text for m in loaded.memory.content] == ["a", "b", "d"] and counter.count == 2


def test_a_save_of_one_module_conflicts_rather_than_write_back_a_stale_copy_of_another(backend: SessionFactory) -> None:
    with backend() as one, backend() as two:
        agent = AppendAgent(memory=_memory("a"))
        one.save("chat", agent=agent, counter=Counter(count=1))
        two.load("chat", counter=Counter())  # remembers the document holding agent with one message
        agent.memory.content.append(Msg("user", "b"))
        one.save("chat", agent=agent)  # another writer appends to agent (a delta)
        with pytest.raises(ConflictError):
            two.save("chat", counter=Counter(count=2))
        two.update("chat", lambda: None, counter=Counter(count=3))
        loaded, counter = AppendAgent(), Counter()
        one.load("chat", agent=loaded, counter=counter)
        assert [m.text for m in loaded.memory.content] == ["a", "b"]


def test_overwrite_keeps_the_modules_it_does_not_name_and_remove_modules_drops_them(backend: SessionFactory) -> None:
    with backend() as session:
        session.save("chat", counter=Counter(count=1), memory=_memory("kept"))
        session.save("chat", overwrite=True, counter=Counter(count=2))
        memory = Memory()
        session.load("chat", memory=memory)
        assert memory.content == [Msg("user", "kept")]
        session.remove_modules("chat", "memory")
        document = session.read_document("chat")
        assert document is not None and [name for name in document.data if name != META_KEY] == ["counter"]
        with pytest.raises(SessionError, match="holds no module 'memroy'"):
            session.remove_modules("chat", "memroy")


def test_a_save_naming_every_stored_module_reads_nothing_more(tmp_path: Path) -> None:
    """The common save (the object knows the document holds only the modules named) reads nothing to keep."""
    reads: list[SessionKey] = []

    class Counting(JSONSession):
        async def _read(self, key: SessionKey) -> bytes | None:
            reads.append(key)
            return await super()._read(key)

    session = Counting(tmp_path)
    session.save("chat", counter=Counter(count=1), memory=_memory("a"))
    session.load("chat", counter=Counter(), memory=Memory())
    reads.clear()
    for count in range(3):
        session.save("chat", counter=Counter(count=count), memory=_memory("a", "b"))
    assert reads == []
    session.close()


def test_a_blind_save_over_a_damaged_document_is_refused_unless_it_overwrites(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.session_path("chat").write_bytes(b'{"counter": ')
    with pytest.raises(DocumentError, match="overwrite=True to replace it whole"):
        session.save("chat", counter=Counter(count=1))
    assert session.session_path("chat").read_bytes() == b'{"counter": '
    session.save("chat", overwrite=True, counter=Counter(count=1))
    counter = Counter()
    session.load("chat", counter=counter)
    assert counter.count == 1
    session.close()


# -- issue 23, item 6: a load that finds nothing names what it may have meant ------------


def test_a_missing_load_names_the_near_matches_at_warning(backend: SessionFactory, caplog: pytest.LogCaptureFixture) -> None:
    with backend() as session:
        session.save("chat-1", "alice", counter=Counter(count=1))
        with caplog.at_level("INFO", logger="statekit"):
            assert session.load("chat-1", "bob", counter=Counter()) == {}
            assert session.load("caht-1", "alice", counter=Counter()) == {}
            assert session.load("first-run", "carol", counter=Counter()) == {}
    records = [(record.levelname, record.getMessage()) for record in caplog.records if "does not exist" in record.getMessage()]
    assert len(records) == 3, records
    (level_user, wrong_user), (level_id, wrong_id), (level_first, first_run) = records
    assert level_user == "WARNING" and "the same id under user_id='alice'" in wrong_user, wrong_user
    assert level_id == "WARNING" and "session 'chat-1' of this user" in wrong_id, wrong_id
    assert level_first == "INFO" and "Did you mean" not in first_run, first_run


def test_the_near_match_hint_looks_at_a_bounded_number_of_ids(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from statekit.session._near import NEAR_LIMIT

    folder = tmp_path / "@alice"
    folder.mkdir()
    for index in range(NEAR_LIMIT + 5):
        (folder / f"s{index:05}.json").write_bytes(b"{}")
    with JSONSession(tmp_path) as session, caplog.at_level("INFO", logger="statekit"):
        session.load("s00001x", "alice", counter=Counter())
    messages = [record.getMessage() for record in caplog.records if "does not exist" in record.getMessage()]
    assert len(messages) == 1 and f"looked at the first {NEAR_LIMIT} only" in messages[0], messages


def test_a_full_rewrite_after_a_delta_save_keeps_the_other_modules_and_checks_the_base(backend: SessionFactory) -> None:
    """After a delta save only the delta base is remembered: a rewrite that must keep another
    module reads the stored document and keeps it only if it is still that base."""
    with backend() as writer, backend() as other:
        agent = AppendAgent(memory=_memory("a"))
        writer.save("chat", agent=agent, counter=Counter(count=1))
        agent.memory.content.append(Msg("user", "b"))
        writer.save("chat", agent=agent)  # a delta where the backend stores them
        agent.memory.note = "changed"  # not an append: the next save rewrites the document
        writer.save("chat", agent=agent)
        loaded, counter = AppendAgent(), Counter()
        other.load("chat", agent=loaded, counter=counter)
        assert (loaded.memory.note, [m.text for m in loaded.memory.content], counter.count) == ("changed", ["a", "b"], 1)
        agent.memory.content.append(Msg("user", "c"))
        writer.save("chat", agent=agent)  # a delta again: only its base is remembered
        other.load("chat", agent=loaded, counter=counter)
        loaded.memory.content.append(Msg("user", "from other"))
        other.save("chat", agent=loaded, counter=counter)  # another writer changes the session
        agent.memory.note = "stale"
        with pytest.raises(ConflictError):
            writer.save("chat", agent=agent)  # a rewrite over a base that is gone
        final, counter = AppendAgent(), Counter()
        writer.load("chat", agent=final, counter=counter)
        assert final.memory.note == "changed" and final.memory.content[-1] == Msg("user", "from other")
        assert counter.count == 1


# -- leases on files: the record beside the session -------------------------------------


def _lease_record(session: FileSession, session_id: str, user_id: str = "") -> Path:
    path = session.session_path(session_id, user_id)
    return path.with_name(f".{path.name}.lease")


@pytest.mark.parametrize("kind", [JSONSession, YAMLSession])
def test_a_lease_record_is_no_session_and_keeps_its_token_after_release_and_delete(
    tmp_path: Path, kind: type[FileSession], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with kind(tmp_path) as session, kind(tmp_path) as other:
        tokens = {}
        for user in ("", "alice"):
            with session.lease("chat", user, ttl=60) as lease:
                session.save("chat", user, counter=Counter(count=1))
            assert session.delete("chat", user)
            tokens[user] = lease.token
            record = json.loads(_lease_record(session, "chat", user).read_bytes())
            assert record == {"token": lease.token, "expires_at": 0.0}, record  # released, the token kept
        assert (tmp_path / "@alice").is_dir()  # a folder holding only a lease record
        assert session.list_sessions() == [] and session.list_sessions("alice") == []
        assert session.list_users() == []
        with caplog.at_level("INFO", logger="statekit"):
            assert other.load("chat", "bob", counter=Counter()) == {}
        assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text  # alice holds no "chat"
        argv = ["list", "--dir", str(tmp_path), "--all-users"] + (["--yaml"] if kind is YAMLSession else [])
        assert cli_main(argv) == 0
        assert capsys.readouterr().out == ""
        for user in ("", "alice"):
            with other.lease("chat", user) as again:  # a new object, after the release and the delete
                assert again.token > tokens[user], (again.token, tokens)


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
@pytest.mark.parametrize("kind", [JSONSession, YAMLSession])
def test_the_leftovers_sweep_keeps_lease_records_and_removes_a_killed_lease_write(
    tmp_path: Path, kind: type[FileSession]
) -> None:
    suffix = kind.codec.suffix
    with kind(tmp_path) as session:
        session.lease("gone", ttl=60).release()
        session.lease("kept", ttl=60).release()
        record = _lease_record(session, "gone").read_bytes()
    (tmp_path / f".gone{suffix}.lock").write_bytes(b"")  # a writer of the deleted session killed mid-write
    (tmp_path / f"..gone{suffix}.lease.tmp").write_bytes(b'{"tok')  # a lease write killed before its rename
    (tmp_path / f"..kept{suffix}.lease.tmp").write_bytes(b'{"tok')
    with kind(tmp_path) as session:  # this folder's first write in this process: it sweeps the folder
        session.save("a", counter=Counter())
        assert sorted(p.name for p in tmp_path.iterdir()) == [f".gone{suffix}.lease", f".kept{suffix}.lease", f"a{suffix}"]
        assert _lease_record(session, "gone").read_bytes() == record
        with session.lease("gone") as lease:
            assert lease.token == 2


@pytest.mark.parametrize("kind", [JSONSession, YAMLSession])
@pytest.mark.parametrize(
    "bad",
    ["not json", "[1, 2]", '{"token": 3}', '{"token": true, "expires_at": 1}', '{"token": 3, "expires_at": NaN}', "link", "folder"],
)
def test_a_bad_lease_record_is_a_clear_error_and_no_write_goes_through(tmp_path: Path, kind: type[FileSession], bad: str) -> None:
    with kind(tmp_path) as session:
        session.save("chat", counter=Counter(count=1))
        stored = session.session_path("chat").read_bytes()
        record = _lease_record(session, "chat")
        if bad == "link":
            (tmp_path / "elsewhere").write_text('{"token": 1, "expires_at": 0}')
            record.symlink_to(tmp_path / "elsewhere")
        elif bad == "folder":
            record.mkdir()
        else:
            record.write_text(bad)
        what = {"link": "is a symbolic link", "folder": "is a folder"}.get(bad, "is not a lease record statekit wrote")
        message = f"{re.escape(str(record))} {what}"
        with pytest.raises(SessionError, match=message):
            session.save("chat", counter=Counter(count=2))
        with pytest.raises(SessionError, match=message):
            session.save("chat", overwrite=True, counter=Counter(count=2))
        with pytest.raises(SessionError, match=message):
            session.delete("chat")
        with pytest.raises(SessionError, match=message):
            session.lease("chat")
        assert session.session_path("chat").read_bytes() == stored


@pytest.mark.parametrize("kind", [JSONSession, YAMLSession])
def test_a_delete_of_a_missing_session_is_fenced_and_one_never_leased_creates_nothing(
    tmp_path: Path, kind: type[FileSession]
) -> None:
    with kind(tmp_path / "sessions") as holder, kind(tmp_path / "sessions") as other:
        assert not other.delete("ghost", "alice")
        assert not (tmp_path / "sessions").exists()
        with holder.lease("ghost", "alice", ttl=60):
            with pytest.raises(LeaseHeldError):
                other.delete("ghost", "alice")
            assert not holder.delete("ghost", "alice")
        assert not other.delete("ghost", "alice")


def test_leases_in_agentscope_layout_sit_beside_its_files(tmp_path: Path) -> None:
    with JSONSession(tmp_path, layout="agentscope") as holder, JSONSession(tmp_path, layout="agentscope") as other:
        with holder.lease("chat", "alice", ttl=60) as lease:
            holder.save("chat", "alice", counter=Counter(count=1))
            with pytest.raises(LeaseHeldError, match=re.escape(str(tmp_path / "alice_chat.json"))):
                other.save("chat", "alice", overwrite=True, counter=Counter(count=2))
        assert sorted(p.name for p in tmp_path.iterdir()) == [".alice_chat.json.lease", "alice_chat.json"]
        assert other.list_sessions("alice") == ["chat"] and other.list_sessions() == ["alice_chat"]
        with other.lease("chat", "alice") as again:
            assert again.token == lease.token + 1


@pytest.mark.parametrize("name", sorted(name for name in CHECKS if name.startswith("lease_")))
def test_the_contract_lease_checks_hold_in_agentscope_layout(tmp_path: Path, name: str) -> None:
    asyncio.run(CHECKS[name](lambda: JSONSession(tmp_path, layout="agentscope")))
