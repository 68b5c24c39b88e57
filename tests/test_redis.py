"""What only RedisSession has: keys, sliding TTL, clients, a server that is down.

Against the real redis-server of conftest.py; fakeredis serves a few quick
unit tests beside them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import fakeredis
import orjson
import pytest
from redis.asyncio import Connection, ConnectionPool, Redis
from redis.exceptions import NoPermissionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from append_models import Agent
from redis_proxy import LosingProxy
from statekit.cli import main as cli_main
from statekit.codecs import JSON_COMPACT
from statekit.errors import (
    BackendAuthError,
    BackendUnavailableError,
    ConflictError,
    LeaseHeldError,
    MissingExtraError,
    SessionError,
    WriteOutcomeUnknownError,
)
from statekit.session import _redis_ids
from statekit.session._redis_packing import LARGE, packed
from statekit.session._redis_pipe import Replies
from statekit.session.redis import TIMEOUT, RedisSession
from statekit.testing import CHECKS, Chat, Counter, Message, RedisServer, free_port, local_redis_server

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex}:"


async def test_key_pattern_is_the_reference_one(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        await session.asave("s1", "bob", counter=Counter(count=3))
        raw = await session.get_client().get(f"{prefix}user_id:bob:session:s1:state")
        assert session.session_key("s1", "bob") == f"{prefix}user_id:bob:session:s1:state"
    assert raw is not None
    assert orjson.loads(raw) == {"__statekit__": {"format": 1}, "counter": {"count": 3}}


async def test_colons_and_percents_in_ids_are_quoted(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        assert session.session_key("b:session:c", "a") == f"{prefix}user_id:a:session:b%3Asession%3Ac:state"
        assert session.session_key("100%", "") == f"{prefix}user_id::session:100%25:state"
        await session.asave("b:session:c", "a", counter=Counter(count=1))
        await session.asave("c", "a:session:b", counter=Counter(count=2))
        assert await session.alist_sessions("a") == ["b:session:c"]


async def test_data_written_by_the_reference_loads(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        await session.get_client().set(f"{prefix}user_id:u:session:old:state", b'{"counter": {"count": 9}}')
        counter = Counter()
        await session.aload("old", "u", allow_not_exist=False, counter=counter)
    assert counter.count == 9


async def test_the_default_user_is_the_reference_one(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        await session.get_client().set(f"{prefix}user_id:default_user:session:old:state", b'{"counter": {"count": 4}}')
        counter = Counter()
        await session.aload("old", allow_not_exist=False, counter=counter)
        assert session.session_key("old") == f"{prefix}user_id:default_user:session:old:state"
        assert await session.alist_sessions() == ["old"]
        assert await session.aexists("old") and not await session.aexists("old", "")
    assert counter.count == 4


async def test_ttl_slides_on_save_and_on_load(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix, key_ttl=300) as session:
        client, key = session.get_client(), session.session_key("s", "u")
        await session.asave("s", "u", counter=Counter())
        assert 295 <= await client.ttl(key) <= 300
        await client.expire(key, 5)
        await session.aload("s", "u", counter=Counter())
        assert 295 <= await client.ttl(key) <= 300
        await client.expire(key, 5)
        await session.asave("s", "u", counter=Counter())
        assert 295 <= await client.ttl(key) <= 300


async def test_without_ttl_keys_do_not_expire(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        await session.asave("s", "u", counter=Counter())
        await session.aload("s", "u", counter=Counter())
        assert await session.get_client().ttl(session.session_key("s", "u")) == -1


async def test_keep_ttl_keeps_the_expiry_a_key_has(redis_server: RedisServer, prefix: str) -> None:
    url = f"redis://{redis_server.host}:{redis_server.port}/0"
    for keep, expected in ((True, range(295, 301)), (False, range(-1, 0))):
        async with RedisSession.from_url(url, key_prefix=prefix, keep_ttl=keep) as session:
            key = session.session_key(f"s{keep}", "u")
            await session.asave(f"s{keep}", "u", counter=Counter(count=1))
            await session.get_client().expire(key, 300)
            await session.asave(f"s{keep}", "u", counter=Counter(count=2))
            assert await session.get_client().ttl(key) in expected
            counter = Counter()
            await session.aload(f"s{keep}", "u", counter=counter)
            assert counter.count == 2


def test_a_bad_keep_ttl_is_refused() -> None:
    with pytest.raises(SessionError, match="keep_ttl"):
        RedisSession(keep_ttl="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl", [0, -1, 1.5, True, "60"])
def test_a_bad_ttl_is_refused(ttl: object) -> None:
    with pytest.raises(SessionError, match="key_ttl must be a positive whole number"):
        RedisSession(key_ttl=ttl)  # type: ignore[arg-type]


async def test_a_passed_client_is_used_and_not_closed(redis_server: RedisServer, prefix: str) -> None:
    client = Redis(host=redis_server.host, port=redis_server.port)
    async with RedisSession(client=client, key_prefix=prefix) as session:
        assert session.get_client() is client
        await session.asave("s", counter=Counter(count=4))
    assert await client.exists(f"{prefix}user_id:default_user:session:s:state") == 1  # still open
    await client.aclose()


async def test_a_passed_pool_is_used(redis_server: RedisServer, prefix: str) -> None:
    pool = ConnectionPool(host=redis_server.host, port=redis_server.port, db=2)
    async with RedisSession(connection_pool=pool, key_prefix=prefix) as session:
        assert session.address == f"{redis_server.host}:{redis_server.port}/2"
        await session.asave("s", counter=Counter(count=4))
    async with Redis(host=redis_server.host, port=redis_server.port, db=2) as check:
        assert await check.exists(f"{prefix}user_id:default_user:session:s:state") == 1
    await pool.aclose()


async def test_a_client_decoding_responses_still_works(redis_server: RedisServer, prefix: str) -> None:
    client = Redis(host=redis_server.host, port=redis_server.port, decode_responses=True)
    async with RedisSession(client=client, key_prefix=prefix) as session:
        await session.asave("s 😀", "ü", chat=Chat(name="é", messages=[Message("user", "😀")]))
        chat = Chat()
        await session.aload("s 😀", "ü", chat=chat)
        assert await session.alist_sessions("ü") == ["s 😀"]
    assert chat == Chat(name="é", messages=[Message("user", "😀")])
    await client.aclose()


async def test_a_server_that_is_down_is_reported_quickly_by_host_and_port() -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    async with RedisSession("127.0.0.1", port) as session:
        with pytest.raises(BackendUnavailableError, match=rf"Redis at 127\.0\.0\.1:{port}/0 is unavailable"):
            await session.asave("s", counter=Counter())
    assert time.monotonic() - started < 5


def test_a_server_that_is_down_is_reported_by_the_blocking_twins_too() -> None:
    port = free_port()
    with RedisSession("127.0.0.1", port) as session, pytest.raises(BackendUnavailableError, match=str(port)):
        session.load("s", counter=Counter())


def test_without_the_extra_the_import_names_it() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "try:\n    import statekit.session.redis\n"
        "except ImportError as err:\n    print(type(err).__name__, err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith(MissingExtraError.__name__)
    assert "pip install 'statekit[redis]'" in out


def test_statekit_session_imports_without_redis() -> None:
    code = "import sys; sys.modules['redis'] = None\nimport statekit.session\nprint(statekit.session.JSONSession)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "JSONSession" in out


# -- quick unit tests on fakeredis (beside the real server, never instead of it) ---------


async def test_fakeredis_round_trip_and_ttl() -> None:
    client = fakeredis.FakeAsyncRedis()
    session = RedisSession(client=client, key_ttl=60)
    await session.asave("s", "u", chat=Chat(name="fake"))
    chat = Chat()
    await session.aload("s", "u", chat=chat)
    assert chat == Chat(name="fake")
    assert 0 < await client.ttl("user_id:u:session:s:state") <= 60
    assert await session.alist_sessions("u") == ["s"]
    await session.aclose()
    await client.aclose()


async def test_fakeredis_glob_characters_in_user_ids_do_not_widen_listing() -> None:
    client = fakeredis.FakeAsyncRedis()
    session = RedisSession(client=client)
    await session.asave("mine", "a*", counter=Counter())
    await session.asave("theirs", "ab", counter=Counter())
    await session.asave("other", "a?", counter=Counter())
    assert await session.alist_sessions("a*") == ["mine"]
    assert await session.alist_sessions("a?") == ["other"]
    await client.aclose()


# -- from_url, timeouts, credentials ------------------------------------------------------


async def test_from_url_opens_and_owns_its_client(redis_server: RedisServer, prefix: str) -> None:
    url = f"redis://{redis_server.host}:{redis_server.port}/3"
    async with RedisSession.from_url(url, key_prefix=prefix, key_ttl=60, timeout=2) as session:
        await session.asave("s", "u", counter=Counter(count=2))
        assert session.address == f"{redis_server.host}:{redis_server.port}/3"
        assert (session.key_prefix, session.key_ttl, session.timeout) == (prefix, 60, 2.0)
        assert 0 < await session.get_client().ttl(session.session_key("s", "u")) <= 60
    async with Redis(host=redis_server.host, port=redis_server.port, db=3) as check:
        assert await check.exists(f"{prefix}user_id:u:session:s:state") == 1


@pytest.mark.parametrize("url", ["http://user:s3cret@host", "redis://user:s3cret@host:port/0", "nonsense"])
def test_from_url_refuses_a_bad_url_without_echoing_the_password(url: str) -> None:
    with pytest.raises(SessionError, match="not a usable Redis URL") as caught:
        RedisSession.from_url(url)
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("url", ["redis://localhost:6379/abc", "redis://localhost/3/4", "rediss://localhost/-1"])
def test_from_url_refuses_a_database_that_is_not_a_number(url: str) -> None:
    with pytest.raises(SessionError, match="the path must be a database number"):
        RedisSession.from_url(url)  # redis-py reads /abc as database 0 and /3/4 as 34


def test_the_cli_reports_a_bad_url_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli_main(["list", "--redis-url", "http://user:s3cret@x"])
    stderr = capsys.readouterr().err
    assert status == 2, stderr
    assert "not a usable Redis URL" in stderr and "Traceback" not in stderr
    assert "s3cret" not in stderr


async def test_a_server_that_never_answers_is_unavailable_within_the_timeout() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # accepts connections (the kernel does), never replies
        port = silent.getsockname()[1]
        started = time.monotonic()
        async with RedisSession("127.0.0.1", port, timeout=1) as session:
            with pytest.raises(BackendUnavailableError, match=rf"127\.0\.0\.1:{port}/0 is unavailable"):
                await session.aload("s", counter=Counter())
        assert time.monotonic() - started < 2.5
    assert RedisSession().timeout == TIMEOUT <= 5


async def test_a_timed_out_operation_leaves_its_task_uncancelled_and_an_outside_cancel_stays_a_cancel() -> None:
    """The operation's deadline cancels the task and takes that cancel back (as ``asyncio.timeout``):
    the task goes on awaiting; a cancel from outside is not told as unavailability."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # accepts connections (the kernel does), never replies
        port = silent.getsockname()[1]
        async with RedisSession("127.0.0.1", port, timeout=0.5) as session:
            with pytest.raises(BackendUnavailableError, match=r"no answer within 0\.5 s"):
                await session.aload("s", counter=Counter())
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0
            await asyncio.sleep(0.01)  # a stray cancel would raise here

            loading = asyncio.ensure_future(session.aload("s", counter=Counter()))
            await asyncio.sleep(0.1)
            loading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await loading


async def test_waiting_for_a_pooled_connection_counts_in_the_timeout() -> None:
    """With one connection, held by an operation the server never answers, the next one waits for
    it and fails within its own timeout as unavailable (redis-py would raise "Too many connections")."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        async with RedisSession("127.0.0.1", port, timeout=1, max_connections=1) as session:
            started = time.monotonic()
            first = asyncio.ensure_future(session.aload("a", counter=Counter()))
            await asyncio.sleep(0.3)  # the first one holds the only connection
            with pytest.raises(BackendUnavailableError, match=r"no answer within 1 s"):
                await session.aload("b", counter=Counter())
            with pytest.raises(BackendUnavailableError, match=r"no answer within 1 s"):
                await first
        assert time.monotonic() - started < 5


async def test_each_operation_gets_its_own_timeout_from_its_own_start() -> None:
    """Operations share one timer: one that starts later is not cut short at the first one's deadline."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        async with RedisSession("127.0.0.1", port, timeout=1) as session:

            async def timed(session_id: str) -> float:
                started = time.monotonic()
                with pytest.raises(BackendUnavailableError, match=r"no answer within 1 s"):
                    await session.aload(session_id, counter=Counter())
                return time.monotonic() - started

            first = asyncio.ensure_future(timed("a"))
            await asyncio.sleep(0.5)
            later = await timed("b")
            assert 0.95 <= await first < 5
            assert 0.95 <= later < 5


def test_a_session_timed_out_in_one_event_loop_times_out_in_the_next() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        session = RedisSession("127.0.0.1", port, timeout=0.5)

        async def load() -> None:
            with pytest.raises(BackendUnavailableError, match=r"no answer within 0\.5 s"):
                await session.aload("s", counter=Counter())

        started = time.monotonic()
        asyncio.run(load())
        asyncio.run(load())
        assert time.monotonic() - started < 5


@pytest.mark.parametrize("size", [10, 10_000])  # below and above the size statekit packs writes itself
async def test_writes_of_unicode_ids_and_text_land_as_redis_py_would_send_them(
    redis_server: RedisServer, prefix: str, size: int
) -> None:
    chat = Chat(name="héllo ✓", messages=[Message(role="user", content="ü" * size)])
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        await session.asave("séssion ✓", "üser", chat=chat)
        chat.name = "changed"  # a conditional save (the script with every argument) over the first one
        await session.asave("séssion ✓", "üser", chat=chat)
        stored = await session.get_client().get(session.session_key("séssion ✓", "üser").encode())
        loaded = Chat()
        await session.aload("séssion ✓", "üser", chat=loaded)
    assert stored is not None and orjson.loads(stored)["chat"]["messages"][0]["content"] == "ü" * size
    assert (loaded.name, loaded.messages) == ("changed", chat.messages)


@pytest.mark.parametrize("size", [0, 1, 9, 10, 999, 1023, 1024, 1025, 5999, 6000, 6001, 70_000])
def test_commands_are_packed_byte_for_byte_as_redis_py_packs_them(size: int) -> None:
    """statekit packs its commands itself (_redis_packing, one join and length lines looked up below 1 KiB):
    the bytes must be redis-py's, for every argument kind and size, and a large one goes out uncopied."""
    connection = Connection()
    text, blob = "é" * (size // 2) + "x" * (size % 2), b"b" * size  # the text's size in bytes is size
    command = ("EVALSHA", "a" * 40, 2, "key:é", f"k{size}", blob, text, size, -size, "", b"")
    chunks = packed(connection, command)
    assert b"".join(chunks) == b"".join(connection.pack_command(*command))
    assert any(chunk is blob for chunk in chunks) == (size > LARGE)


@pytest.mark.parametrize("key_ttl", [None, 60])
async def test_a_read_on_a_pooled_connection_the_server_closed_is_sent_again(
    redis_server: RedisServer, prefix: str, key_ttl: int | None
) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix, key_ttl=key_ttl) as session:
        await session.asave("s", counter=Counter(count=7))
        admin = Redis(host=redis_server.host, port=redis_server.port)
        try:
            assert await admin.client_kill_filter(_type="normal", skipme=True) >= 1  # the session's pooled connection
        finally:
            await admin.aclose()
        loaded = Counter()
        await session.aload("s", counter=loaded)
        assert loaded.count == 7


async def test_a_wrong_password_is_not_unavailability() -> None:
    with local_redis_server(options=["--requirepass", "right"]) as server:
        for password in ("wrong", None):
            async with RedisSession(server.host, server.port, password=password) as session:
                with pytest.raises(BackendAuthError, match="refused our credentials"):
                    await session.asave("s", counter=Counter())
        async with RedisSession.from_url(f"redis://:right@{server.host}:{server.port}/0") as session:
            await session.asave("s", counter=Counter())


async def test_a_server_that_needs_a_password_given_none_says_how_to_give_one(capsys: pytest.CaptureFixture[str]) -> None:
    hint = "the server needs a password and none was given: put it in the URL (redis://:PASSWORD@host:6379/0"
    with local_redis_server(options=["--requirepass", "right"]) as server:
        async with RedisSession(server.host, server.port) as session:
            with pytest.raises(BackendAuthError, match="refused our credentials") as refused:
                await session.asave("s", counter=Counter())
        assert hint in str(refused.value) and "or pass password=... to RedisSession" in str(refused.value)
        async with RedisSession(server.host, server.port, password="wrong") as session:
            with pytest.raises(BackendAuthError, match="refused our credentials") as refused:
                await session.aload("s", counter=Counter())
        assert "needs a password" not in str(refused.value)  # one was given: it is wrong, not missing
        url = f"redis://{server.host}:{server.port}/0"
        capsys.readouterr()
        status = await asyncio.to_thread(cli_main, ["list", "--redis-url", url])  # the command runs its own event loop
        assert status == 1
        assert hint in capsys.readouterr().err


# -- servers that run no Lua: WATCH/MULTI stands in for the compare-and-set script --------


@pytest.mark.parametrize("name", sorted(CHECKS))
async def test_the_contract_holds_on_a_server_without_lua(scriptless_server: RedisServer, name: str) -> None:
    prefix = f"test-{uuid.uuid4().hex}:"
    await CHECKS[name](lambda: RedisSession(scriptless_server.host, scriptless_server.port, key_prefix=prefix))


async def test_a_stale_save_conflicts_on_a_server_without_lua(scriptless_server: RedisServer, prefix: str) -> None:
    address = (scriptless_server.host, scriptless_server.port)
    async with RedisSession(*address, key_prefix=prefix) as first, RedisSession(*address, key_prefix=prefix) as second:
        await first.asave("s", counter=Counter(count=1))
        await second.aload("s", counter=Counter())
        await first.asave("s", counter=Counter(count=2))
        with pytest.raises(ConflictError):
            await second.asave("s", counter=Counter(count=99))
        stored = await first.aread_document("s")
        assert stored is not None and stored.data["counter"] == {"count": 2}


async def test_fakeredis_without_lupa_saves_a_session_twice() -> None:
    """AgentScope's tests use fakeredis, which runs no Lua unless ``lupa`` is installed."""
    session = RedisSession(client=fakeredis.FakeAsyncRedis())
    await session.asave("s", counter=Counter(count=1))
    await session.asave("s", counter=Counter(count=2))
    other = RedisSession(client=session.get_client())
    loaded = Counter()
    await other.aload("s", counter=loaded)
    assert loaded.count == 2
    await session.asave("s", counter=Counter(count=3))
    with pytest.raises(ConflictError):
        await other.asave("s", counter=Counter(count=4))


async def test_operations_in_flight_when_the_session_is_closed_end_in_a_statekit_error(redis_server: RedisServer) -> None:
    """They end first, then the client closes (redis-py raised AttributeError for a command
    whose connection aclose() dropped, and left sockets open)."""
    outcomes: set[str] = set()
    for round_ in range(30):
        session = RedisSession(redis_server.host, redis_server.port, key_prefix=f"closing-{uuid.uuid4().hex}:")
        await session.asave("x", counter=Counter(count=1))
        tasks = [
            asyncio.create_task(session.aload("x", counter=Counter()) if i % 2 else session.asave(f"y{i}", counter=Counter()))
            for i in range(20)
        ]
        await asyncio.sleep(round_ % 10 / 1000)
        await session.aclose()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            assert result is None or isinstance(result, (dict, SessionError)), repr(result)
            outcomes.add(type(result).__name__)
    assert "NoneType" in outcomes or "dict" in outcomes
    with pytest.raises(SessionError, match="this session is closed"):  # redis-py would open a new connection
        await session.aload("x", counter=Counter())


_OTHER_LOOPS = """
import asyncio, sys
from statekit.errors import SessionError
from statekit.session.redis import RedisSession
from statekit.testing import Counter
session = RedisSession("127.0.0.1", int(sys.argv[1]), key_prefix=sys.argv[2])
asyncio.run(session.asave("x", counter=Counter(count=1)))
for _ in range(3):
    try:
        asyncio.run(session.aload("x", counter=Counter()))
        print("ok")
    except SessionError as err:
        print("belongs to another event loop" in str(err))
"""


def test_a_session_used_from_another_event_loop_says_so(redis_server: RedisServer) -> None:
    """redis-py binds connections to the loop that opened them; its RuntimeError was raised raw.
    (In a child process: the misuse leaks the closed loops' sockets, which redis-py cannot close.)"""
    prefix = f"loops-{uuid.uuid4().hex}:"
    run = subprocess.run(
        [sys.executable, "-c", _OTHER_LOOPS, str(redis_server.port), prefix], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert set(run.stdout.split()) == {"ok", "True"}, run.stdout


async def test_more_tasks_than_pooled_connections_wait_their_turn(redis_server: RedisServer) -> None:
    """redis-py raises "Too many connections" instead of waiting; reported as an unavailable server."""
    prefix = f"crowd-{uuid.uuid4().hex}:"
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix, max_connections=5) as session:
        await asyncio.gather(*(session.asave(f"s{index}", counter=Counter(count=index)) for index in range(60)))
        counters = [Counter() for _ in range(60)]
        await asyncio.gather(*(session.aload(f"s{index}", counter=counters[index]) for index in range(60)))
    assert [counter.count for counter in counters] == list(range(60))


# -- late replies: a server paused between an update's load and its save -------------------


@pytest.fixture(scope="module")
def pausable() -> Iterator[RedisServer]:
    """A redis-server of this module's own, to pause with SIGSTOP (the run's server is shared)."""
    with local_redis_server() as server:
        yield server


@pytest.fixture(scope="module")
def pausable_scriptless() -> Iterator[RedisServer]:
    """The same, running no scripts: the WATCH/MULTI path."""
    with local_redis_server(options=["--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""]) as server:
        yield server


class Pause:
    """``SIGSTOP`` a server now, ``SIGCONT`` it ``seconds`` later from a timer thread."""

    def __init__(self, server: RedisServer, seconds: float) -> None:
        self._pid = server.pid
        os.kill(self._pid, signal.SIGSTOP)
        self._timer = threading.Timer(seconds, os.kill, (self._pid, signal.SIGCONT))
        self._timer.start()

    def over(self) -> None:
        """Wait for the timer (then the server runs again)."""
        self._timer.join()
        os.kill(self._pid, signal.SIGCONT)


class Kind:
    """A change made by one update: a counter's increment (compare-and-set) or one appended item (a delta)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def module(self) -> Counter | Agent:
        return Counter() if self.name == "counter" else Agent(events=[0])

    def named(self, module: Counter | Agent) -> dict[str, Any]:
        """The keyword arguments that pass ``module`` to a session."""
        return {self.name: module}

    def change(self, module: Counter | Agent) -> None:
        if isinstance(module, Counter):
            module.count += 1
        else:
            module.events.append(len(module.events))

    def changes(self, module: Counter | Agent) -> int:
        """How many changes the stored module holds."""
        if isinstance(module, Counter):
            return module.count
        assert module.events == list(range(len(module.events))), module.events  # none twice, none lost
        return len(module.events) - 1


async def _stored(server: RedisServer, prefix: str, kind: Kind) -> int:
    module = kind.module()
    async with RedisSession(server.host, server.port, key_prefix=prefix, timeout=30) as session:
        await session.aload("s", allow_not_exist=False, **kind.named(module))
    return kind.changes(module)


async def _update_paused_before_its_save(
    server: RedisServer, stall: float, kind: Kind, after: str = "", skip: int = 0
) -> None:
    """An update of a session, the server paused after its load (or, ``after`` a command's reply, later;
    ``skip``: after that many replies of that command are let through)."""
    prefix = f"stall-{uuid.uuid4().hex}:"
    armed, pauses, skipped = [False], list[Pause](), [0]
    client = Redis(host=server.host, port=server.port, socket_timeout=2)
    if after:  # a reply parsed after mutate() armed it pauses the server: the WATCH path's last read before EXEC

        def pausing(response: Any, **options: Any) -> Any:
            if armed[0] and skipped[0] < skip:
                skipped[0] += 1
                return response
            _pause_if(armed, pauses, server, stall)
            return response

        client.set_response_callback(after, pausing)
    async with RedisSession(client=client, key_prefix=prefix) as session:
        module = kind.module()
        await session.asave("s", **kind.named(module))
        await session.aload("s", **kind.named(module))  # a delta base, for the appends
        # the same update unpaused first: the server knows the script, so the paused write is
        # run when the server resumes (a first EVALSHA would answer NOSCRIPT and change nothing)
        await session.aupdate("s", lambda: kind.change(module), **kind.named(module))
        calls = [0]

        def change() -> None:
            kind.change(module)
            calls[0] += 1
            armed[0] = calls[0] == 1
            if not after:  # between this update's load and its save
                _pause_if(armed, pauses, server, stall)

        try:
            await session.aupdate("s", change, **kind.named(module))
        finally:
            for pause in pauses:
                pause.over()
        assert len(pauses) == 1 and calls == [1]  # paused once; mutate() ran once: no conflict was made up
        assert await _stored(server, prefix, kind) == 2
        await session.aupdate("s", lambda: kind.change(module), **kind.named(module))  # the object still knows
    await client.aclose()
    assert await _stored(server, prefix, kind) == 3


def _pause_if(armed: list[bool], pauses: list[Pause], server: RedisServer, stall: float) -> None:
    if armed[0]:
        armed[0] = False
        pauses.append(Pause(server, stall))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["counter", "agent"])
@pytest.mark.parametrize("stall", [1.5, 3.0, 4.5])
async def test_an_update_whose_server_pauses_before_the_save_applies_its_change_once(
    pausable: RedisServer, stall: float, kind: str
) -> None:
    """socket_timeout is 2 s: redis-py used to send the script again, the server ran both
    copies, the second answered "changed" and update() ran mutate() a second time."""
    await _update_paused_before_its_save(pausable, stall, Kind(kind))


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "after", "skip"), [("counter", "GET", 1), ("agent", "STRLEN", 0)])
async def test_an_update_whose_server_pauses_before_exec_applies_its_change_once_without_lua(
    pausable_scriptless: RedisServer, kind: str, after: str, skip: int
) -> None:
    """The WATCH/MULTI path: redis-py reported a lost EXEC reply as WatchError ("changed").
    (A counter's last read is its value's GET, after the GET of the lease fence: that one is skipped.)"""
    await _update_paused_before_its_save(pausable_scriptless, 3.0, Kind(kind), after, skip)


@pytest.mark.slow
@pytest.mark.parametrize("seen", [True, False], ids=["compare-and-set", "blind"])
async def test_a_save_under_a_three_second_pause_tells_the_truth(pausable: RedisServer, seen: bool) -> None:
    prefix = f"stall-{uuid.uuid4().hex}:"
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix) as session:
        await session.asave("s", counter=Counter(count=1))
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix) as session:
        if seen:
            await session.aload("s", counter=Counter())
            await session.asave("s", counter=Counter(count=1))  # a compare-and-set: the server knows the script
        else:
            await session.aexists("s")  # connected, but no revision known: a blind SET
        pause = Pause(pausable, 3.0)
        try:
            await session.asave("s", counter=Counter(count=2))
            outcome: Exception | None = None
        except SessionError as err:
            outcome = err
        finally:
            pause.over()
    stored = await _stored(pausable, prefix, Kind("counter"))
    if outcome is None:
        assert stored == 2
    elif not isinstance(outcome, WriteOutcomeUnknownError):  # it says so; any other error says nothing was written
        assert stored == 1, repr(outcome)
    assert outcome is None, repr(outcome)  # 3 s is within the default timeout: the answer comes


@pytest.mark.slow
async def test_a_blind_save_sent_again_and_refused_by_the_lease_does_not_claim_nothing_was_written(
    pausable: RedisServer,
) -> None:
    """A blind save carries no write id: when its resend is refused by a lease that ran out meanwhile,
    the first send may have landed before, so the answer is "unknown", not LeaseLostError's "nothing was written"."""
    prefix = f"stall-{uuid.uuid4().hex}:"
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix) as session:
        await session.awrite_document("s", {"counter": {"count": 1}}, overwrite=True)  # the server knows the script
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix) as session:
        lease = await session.alease("s", ttl=1.0)
        blind = JSON_COMPACT.dumps({"__statekit__": {"format": 1}, "counter": {"count": 2}})
        pause = Pause(pausable, 3.0)  # past socket_timeout (2 s), and past the lease on the server's clock
        try:
            with pytest.raises(WriteOutcomeUnknownError, match="refused by the session's lease"):
                # the blind write itself: write_document() reads the head first now (does it keep history?)
                await session._write(session.key("s"), blind)
        finally:
            pause.over()
        await lease.arelease()
    assert await _stored(pausable, prefix, Kind("counter")) == 1  # here the first send was refused too


@pytest.mark.slow
async def test_a_rewrite_after_deltas_under_a_three_second_pause_is_written_once(pausable: RedisServer) -> None:
    """After a delta save the object knows only the delta base: a full rewrite is the delta
    script's "set", whose late reply used to come back as a conflict."""
    prefix = f"stall-{uuid.uuid4().hex}:"
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix) as session:
        agent = Agent(events=[0])
        await session.asave("s", agent=agent)
        for item in (1, 2):  # deltas (the second one: the server knows the script)
            agent.events.append(item)
            await session.asave("s", agent=agent)
        agent.memory.note = "rewritten"
        pause = Pause(pausable, 3.0)
        try:
            await session.asave("s", agent=agent)
        finally:
            pause.over()
        agent.events.append(3)
        await session.asave("s", agent=agent)  # the object knows what it wrote: no conflict
    stored = Agent()
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix) as session:
        await session.aload("s", agent=stored, allow_not_exist=False)
    assert (stored.memory.note, stored.events) == ("rewritten", [0, 1, 2, 3])


@pytest.mark.slow
async def test_a_write_whose_reply_never_comes_says_it_may_have_been_applied(pausable: RedisServer) -> None:
    """Past both budgets the outcome is unknown, and the error says so: here the write lands later."""
    prefix = f"stall-{uuid.uuid4().hex}:"
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix, timeout=1) as session:
        await session.asave("s", counter=Counter(count=1))
        await session.asave("s", counter=Counter(count=1))  # a compare-and-set: the server knows the script
        pause = Pause(pausable, 3.5)  # past the save's 1 s and the 1 s of asking again
        try:
            with pytest.raises(WriteOutcomeUnknownError, match="may or may not have been applied") as caught:
                await session.asave("s", counter=Counter(count=2))
        finally:
            pause.over()
    assert isinstance(caught.value, BackendUnavailableError)
    assert f"{pausable.host}:{pausable.port}/0" in str(caught.value)
    assert await _stored(pausable, prefix, Kind("counter")) == 2


# -- ACL users without @scripting (managed Redis): WATCH/MULTI instead of scripts ----------


async def test_a_user_without_scripting_saves_and_updates(redis_server: RedisServer) -> None:
    user, password = f"noscripts-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    async with Redis(host=redis_server.host, port=redis_server.port) as admin:
        await admin.acl_setuser(
            user, enabled=True, passwords=[f"+{password}"], keys=["*"], channels=["*"], commands=["+@all", "-@scripting"]
        )
    prefix = f"acl-{uuid.uuid4().hex}:"
    address = (redis_server.host, redis_server.port)
    try:
        async with RedisSession(*address, key_prefix=prefix, username=user, password=password) as session:
            with pytest.raises(NoPermissionError, match="'eval'"):  # the user really cannot run scripts
                await session.get_client().eval("return 1", 0)
            counter, agent = Counter(), Agent(events=[0])
            await session.asave("s", counter=counter, agent=agent)
            await session.asave("s", counter=Counter(count=1), agent=agent)  # a compare-and-set
            for _ in range(3):
                await session.aupdate("s", _bump_and_append(counter, agent), counter=counter, agent=agent)
            async with RedisSession(*address, key_prefix=prefix) as other:
                await other.aload("s", counter=Counter(), agent=Agent())
                await other.asave("s", counter=Counter(count=99), agent=Agent())
            with pytest.raises(ConflictError):
                await session.asave("s", counter=counter, agent=agent)
        stored_counter, stored_agent = Counter(), Agent()
        async with RedisSession(*address, key_prefix=prefix) as session:
            await session.aload("s", counter=stored_counter, agent=stored_agent)
        assert (counter.count, agent.events) == (4, [0, 1, 2, 3])
        assert (stored_counter.count, stored_agent.events) == (99, [])
    finally:
        async with Redis(host=redis_server.host, port=redis_server.port) as admin:
            await admin.acl_deluser(user)


def _bump_and_append(counter: Counter, agent: Agent) -> Callable[[], None]:
    def change() -> None:
        counter.count += 1
        agent.events.append(len(agent.events))

    return change


# -- write ids: a write sent again after a lost reply recognises its own write, and only it --


@pytest.mark.parametrize("kind", ["counter", "agent"])
@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_a_retry_does_not_take_identical_bytes_from_another_writer_for_its_own(
    redis_server: RedisServer, scriptless_server: RedisServer, kind: str, lua: bool
) -> None:
    """Two updates from the same revision compute the same bytes (5 + 1 = 6, or the same delta
    line); the other writer's lands first, this one's is refused and the refusal lost. Sent
    again, the write used to find "its" bytes stored and answer "done": one increment lost."""
    server, change = (redis_server if lua else scriptless_server), Kind(kind)
    prefix = f"ids-{uuid.uuid4().hex}:"
    async with (
        LosingProxy(server) as proxy,
        RedisSession("127.0.0.1", proxy.port, key_prefix=prefix) as session,
        RedisSession(server.host, server.port, key_prefix=prefix) as other,
    ):
        module, others = change.module(), change.module()
        await session.asave("s", **change.named(module))
        await session.aupdate("s", lambda: change.change(module), **change.named(module))  # the script is known
        await other.aload("s", **change.named(others))
        calls = [0]

        def counted() -> None:
            calls[0] += 1
            change.change(module)

        async def other_writer_first() -> None:
            await other.aupdate("s", lambda: change.change(others), **change.named(others))

        proxy.lose(b"EVALSHA" if lua else b"EXEC", other_writer_first)
        await session.aupdate("s", counted, **change.named(module))
        assert proxy.lost == 1
        assert calls == [2]  # refused once (the other writer's bytes are not its own), then applied
    assert await _stored(server, prefix, change) == 3  # both acknowledged updates are stored


async def test_writes_of_many_tasks_sent_in_one_round_trip_whose_replies_were_lost_each_land_once(
    redis_server: RedisServer,
) -> None:
    """Eight tasks update their own sessions at once: their scripts go out together (see _redis_pipe), and
    the connection of a round trip holding several is cut before any reply comes back. Each write, sent again marked as a
    retry, is told done: every update is applied exactly once, none is lost, none twice."""
    prefix = f"pipe-{uuid.uuid4().hex}:"
    async with LosingProxy(redis_server) as proxy, RedisSession("127.0.0.1", proxy.port, key_prefix=prefix) as session:
        counters = [Counter() for _ in range(8)]
        for index, counter in enumerate(counters):
            await session.asave(f"s{index}", counter=counter)
            await session.aupdate(f"s{index}", partial(_bump, counter), counter=counter)  # the script is known
        calls = [0] * 8

        async def update(index: int) -> None:
            def change() -> None:
                calls[index] += 1
                _bump(counters[index])

            await session.aupdate(f"s{index}", change, counter=counters[index])

        proxy.lose(b"EVALSHA", at_least=2)  # a round trip of several tasks' writes (a lone one goes by itself)
        await asyncio.gather(*(update(index) for index in range(8)))
        assert proxy.lost == 1 and proxy.lost_commands >= 2
        assert calls == [1] * 8  # each told done by asking again: none applied twice
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as reader:
        stored = [Counter() for _ in range(8)]
        for index, counter in enumerate(stored):
            await reader.aload(f"s{index}", counter=counter)
    assert [counter.count for counter in stored] == [2] * 8


async def test_a_read_given_up_before_its_round_trip_started_is_not_sent_and_the_next_ones_go(
    redis_server: RedisServer,
) -> None:
    """A task cancelled while its read waits to go out (see _redis_pipe: queued while another read is on its
    way): nothing is sent for it, and the reads queued after it are sent and answered."""
    prefix = f"pipe-{uuid.uuid4().hex}:"
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        await session.asave("s", counter=Counter(count=3))
        await asyncio.gather(*(session.aload("s", counter=Counter()) for _ in range(4)))  # connections ready in the pool
        admin = session.get_client()
        assert isinstance(admin, Redis)
        before = await _gets(admin)
        for _ in range(3):
            first = asyncio.ensure_future(session.aload("s", counter=Counter()))  # on its way alone
            loading = asyncio.ensure_future(session.aload("s", counter=Counter()))  # queued behind it
            await asyncio.sleep(0)  # both run up to their reads
            loading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await loading
            await first
        loaded = Counter()
        await asyncio.wait_for(session.aload("s", counter=loaded), 10)
        assert loaded.count == 3
        assert await _gets(admin) - before == 4  # the reads waited for, and nothing for the cancelled ones


async def _gets(client: Redis) -> int:
    """How many GET commands the server has run (INFO commandstats; the INFO itself is not a GET)."""
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_get", {}).get("calls", 0))


async def test_each_reply_of_a_round_trip_gets_socket_timeout_and_silence_ends_it() -> None:
    """The replies of a batch (see _redis_pipe) come one after another: each has ``socket_timeout`` from the
    one before, as redis-py gives each read (a batch slower in all is not cut); silence past it is redis-py's
    ``TimeoutError``."""
    started = time.monotonic()
    async with Replies(1.0) as replies:
        for _ in range(6):
            await asyncio.sleep(0.25)
            replies.read()
    assert time.monotonic() - started >= 1.5  # longer than one socket_timeout in all, and not cut
    started = time.monotonic()
    with pytest.raises(RedisTimeoutError, match="Timeout reading"):
        async with Replies(1.0) as replies:
            await asyncio.sleep(0.25)
            replies.read()
            await asyncio.sleep(30)
    assert time.monotonic() - started < 10


def _bump(counter: Counter) -> None:
    counter.count += 1


async def _primed(session: RedisSession, change: Kind) -> tuple[Counter | Agent, list[int], Callable[[], None]]:
    """Session "s" saved and updated once (the script is known); its module, and a change that counts its calls."""
    module = change.module()
    await session.asave("s", **change.named(module))
    await session.aupdate("s", lambda: change.change(module), **change.named(module))
    calls = [0]

    def counted() -> None:
        calls[0] += 1
        change.change(module)

    return module, calls, counted


@pytest.mark.parametrize("kind", ["counter", "agent"])
@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
@pytest.mark.parametrize("later", [1, 2], ids=["one-later-write", "kept-minus-one-later"])
async def test_a_retry_finds_its_landed_write_under_later_writes(
    redis_server: RedisServer,
    scriptless_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    lua: bool,
    later: int,
) -> None:
    """This write lands, its reply is lost, and other writers write over it before the retry asks:
    the retry used to find another write id and report a conflict, and update() applied its change twice."""
    monkeypatch.setattr(_redis_ids, "KEPT", 3)  # this write's id and the ``later`` ones' are all kept
    server, change = (redis_server if lua else scriptless_server), Kind(kind)
    prefix = f"ids-{uuid.uuid4().hex}:"
    async with (
        LosingProxy(server) as proxy,
        RedisSession("127.0.0.1", proxy.port, key_prefix=prefix) as session,
        RedisSession(server.host, server.port, key_prefix=prefix) as other,
    ):
        module = change.module()
        await session.asave("s", **change.named(module))
        await session.aupdate("s", lambda: change.change(module), **change.named(module))  # the script is known
        calls = [0]

        def counted() -> None:
            calls[0] += 1
            change.change(module)

        async def others_write_over_it() -> None:
            for _ in range(later):
                others = change.module()
                await other.aupdate("s", lambda: change.change(others), **change.named(others))

        proxy.lose(b"EVALSHA" if lua else b"EXEC", then=others_write_over_it)
        await session.aupdate("s", counted, **change.named(module))
        assert proxy.lost == 1
        assert calls == [1]  # applied once: the retry found its own id among those kept
    assert await _stored(server, prefix, change) == 2 + later


@pytest.mark.parametrize("kind", ["counter", "agent"])
@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_a_retry_whose_id_was_pushed_out_says_the_write_may_have_been_applied(
    redis_server: RedisServer, scriptless_server: RedisServer, monkeypatch: pytest.MonkeyPatch, kind: str, lua: bool
) -> None:
    """As many writes as ids are kept came after the lost one: whether it landed cannot be told."""
    monkeypatch.setattr(_redis_ids, "KEPT", 2)
    server, change = (redis_server if lua else scriptless_server), Kind(kind)
    prefix = f"ids-{uuid.uuid4().hex}:"
    async with (
        LosingProxy(server) as proxy,
        RedisSession("127.0.0.1", proxy.port, key_prefix=prefix) as session,
        RedisSession(server.host, server.port, key_prefix=prefix) as other,
    ):
        module, calls, counted = await _primed(session, change)

        async def others_push_it_out() -> None:
            for _ in range(2):
                others = change.module()
                await other.aupdate("s", lambda: change.change(others), **change.named(others))

        proxy.lose(b"EVALSHA" if lua else b"EXEC", then=others_push_it_out)
        with pytest.raises(WriteOutcomeUnknownError, match="no longer among the last 2 kept.*may or may not have"):
            await session.aupdate("s", counted, **change.named(module))
        assert calls == [1]  # not applied again on a guess
    assert await _stored(server, prefix, change) == 4  # it had landed: 1 + this one + the 2 others


@pytest.mark.parametrize("kind", ["counter", "agent"])
@pytest.mark.parametrize(
    ("lua", "landing"),
    [(True, b"EVALSHA"), (False, b"EXEC"), (False, b"GET")],
    ids=["script", "watch-multi-before-its-exec", "watch-multi-before-its-read"],
)
async def test_a_write_that_lands_late_during_its_retry_is_applied_once(
    redis_server: RedisServer, scriptless_server: RedisServer, kind: str, lua: bool, landing: bytes
) -> None:
    """The first send reaches the server after the retry looked for its id, just before the retry's
    own write (or its read of the value: GET, GETRANGE): on the WATCH path the retry's EXEC then failed,
    or the value did not match, and either was reported as a conflict."""
    server, change = (redis_server if lua else scriptless_server), Kind(kind)
    prefix = f"ids-{uuid.uuid4().hex}:"
    async with (
        LosingProxy(server) as proxy,
        RedisSession("127.0.0.1", proxy.port, key_prefix=prefix) as session,
    ):
        module, calls, counted = await _primed(session, change)

        proxy.hold(b"EVALSHA" if lua else b"EXEC", landing)
        await session.aupdate("s", counted, **change.named(module))
        assert proxy.lost == 1
        assert calls == [1]
    assert await _stored(server, prefix, change) == 2


@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_a_retried_delete_does_not_delete_the_session_saved_after_it(
    redis_server: RedisServer, scriptless_server: RedisServer, lua: bool
) -> None:
    """The delete lands, its reply is lost, another writer saves the session anew: sent again, the
    delete used to find another write id, delete the new session too and say there was one."""
    server, prefix = (redis_server if lua else scriptless_server), f"ids-{uuid.uuid4().hex}:"
    async with (
        LosingProxy(server) as proxy,
        RedisSession("127.0.0.1", proxy.port, key_prefix=prefix) as session,
        RedisSession(server.host, server.port, key_prefix=prefix) as other,
    ):
        await session.asave("s", counter=Counter(count=1))
        await session.adelete("warm-up")  # the script is known

        async def saved_anew() -> None:
            await other.asave("s", counter=Counter(count=7))

        proxy.lose(b"EVALSHA" if lua else b"EXEC", then=saved_anew)
        assert await session.adelete("s") is True
        assert proxy.lost == 1
        counter = Counter()
        await other.aload("s", allow_not_exist=False, counter=counter)
        assert counter.count == 7  # the other writer's session is still there


@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_a_write_id_of_the_previous_format_counts_as_one_id_and_becomes_a_list(
    redis_server: RedisServer, scriptless_server: RedisServer, lua: bool
) -> None:
    """The previous statekit kept one id as a string: a retry reads it, and the next write replaces it."""
    server, prefix = (redis_server if lua else scriptless_server), f"ids-{uuid.uuid4().hex}:"
    async with (
        LosingProxy(server) as proxy,
        RedisSession("127.0.0.1", proxy.port, key_prefix=prefix, key_ttl=600) as session,
    ):
        client, counter = session.get_client(), Counter()
        companion = f"{session.session_key('s')}:write-id"
        await session.asave("s", counter=counter)
        await client.set(companion, "0123456789abcdef")  # a previous statekit's write id
        await session.aupdate("s", lambda: setattr(counter, "count", counter.count + 1), counter=counter)
        assert await client.type(companion) == b"list"
        assert await client.llen(companion) == 1
        assert 590 <= await client.ttl(companion) <= 600
        calls = [0]

        def counted() -> None:
            calls[0] += 1
            counter.count += 1

        async def downgraded() -> None:  # as if the previous statekit had stored this write's id
            newest = await client.lindex(companion, 0)
            assert newest is not None
            await client.set(companion, newest)

        proxy.lose(b"EVALSHA" if lua else b"EXEC", then=downgraded)
        await session.aupdate("s", counted, counter=counter)
        assert proxy.lost == 1
        assert calls == [1]  # the retry found its id in the string
        await session.aupdate("s", counted, counter=counter)  # the next write makes it a list again
        assert await client.type(companion) == b"list"
        assert await session.adelete("s") is True
        assert await client.type(companion) == b"list"  # the delete's id joins the others for a while
        assert await client.llen(companion) == 2
        assert await session.alist_sessions() == []


@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_the_write_id_lives_beside_the_value_unseen_by_listing(
    redis_server: RedisServer, scriptless_server: RedisServer, prefix: str, lua: bool
) -> None:
    server = redis_server if lua else scriptless_server
    async with RedisSession(server.host, server.port, key_prefix=prefix, key_ttl=600) as session:
        client, key = session.get_client(), session.session_key("s", "u")
        await session.asave("s", "u", counter=Counter(count=1))
        blind = await client.get(key)
        await session.asave("s", "u", counter=Counter(count=1))  # a compare-and-set: its id is stored
        assert await client.get(key) == blind  # the value (and so its revision) is the document alone
        companion = f"{key}:write-id"
        assert sorted(await client.keys(f"{prefix}*")) == sorted([key.encode(), companion.encode()])
        assert 590 <= await client.ttl(companion) <= 600  # it expires with the value
        assert await session.alist_sessions("u") == ["s"]
        assert await session.alist_users() == ["u"]
        assert await session.adelete("s", "u") is True
        assert await client.exists(key) == 0
        assert 0 < await client.ttl(companion) <= 2 * TIMEOUT + 60  # the delete's id, for a delete sent again
        assert await session.alist_sessions("u") == []
        assert await session.adelete("s", "u") is False
        assert await client.keys(f"{prefix}*") == [companion.encode()]  # another delete's id is left to expire
    async with RedisSession(server.host, server.port, key_prefix=prefix) as session:  # no TTL
        client = session.get_client()
        await session.asave("t", "u", counter=Counter(count=1))
        await session.asave("t", "u", counter=Counter(count=2))
        await client.delete(session.session_key("t", "u"))  # another program deletes the value alone
        assert await client.ttl(f"{session.session_key('t', 'u')}:write-id") == -1
        assert await session.adelete("t", "u") is False
        assert await client.keys(f"{prefix}*") == [companion.encode()]  # the leftover id went with it


@pytest.mark.slow
@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
@pytest.mark.parametrize("there", [True, False], ids=["present", "absent"])
async def test_a_delete_under_a_three_second_pause_tells_the_truth(
    pausable: RedisServer, pausable_scriptless: RedisServer, lua: bool, there: bool
) -> None:
    """socket_timeout is 2 s: redis-py used to send DEL again, the server ran both, and the
    second one's 0 made adelete() say there was no session."""
    server, prefix = (pausable if lua else pausable_scriptless), f"stall-{uuid.uuid4().hex}:"
    async with RedisSession(server.host, server.port, key_prefix=prefix) as session:
        await session.asave("gone" if there else "other", counter=Counter(count=1))
        await session.adelete("warm-up")  # connected, and the server knows the script
        pause = Pause(server, 3.0)
        try:
            deleted = await session.adelete("gone")
        finally:
            pause.over()
        assert deleted is there
        assert not await session.aexists("gone")


@pytest.mark.slow
async def test_a_delete_whose_reply_never_comes_says_it_may_have_been_applied(pausable: RedisServer) -> None:
    prefix = f"stall-{uuid.uuid4().hex}:"
    async with RedisSession(pausable.host, pausable.port, key_prefix=prefix, timeout=1) as session:
        await session.asave("s", counter=Counter(count=1))
        await session.adelete("warm-up")
        pause = Pause(pausable, 3.5)  # past the delete's 1 s and the 1 s of asking again
        try:
            with pytest.raises(WriteOutcomeUnknownError, match="may or may not have been applied"):
                await session.adelete("s")
        finally:
            pause.over()
        assert not await session.aexists("s")  # it landed when the server ran again


# -- leases (issue 29): two keys beside the session, fenced scripts and twins, one round trip each ---------


@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_a_lease_lives_beside_the_session_unseen_by_listing_and_its_tokens_outlive_the_session(
    redis_server: RedisServer, scriptless_server: RedisServer, prefix: str, lua: bool
) -> None:
    server = redis_server if lua else scriptless_server
    address = (server.host, server.port)
    async with RedisSession(*address, key_prefix=prefix) as session, RedisSession(*address, key_prefix=prefix) as other:
        client, key = session.get_client(), session.session_key("s", "u")
        await session.asave("s", "u", counter=Counter(count=1))
        async with session.alease("s", "u", ttl=60) as lease:
            assert await client.get(f"{key}:lease") == str(lease.token).encode()
            assert 0 < await client.pttl(f"{key}:lease") <= 60_000  # Redis expires it: a killed holder blocks nobody
            assert await client.ttl(f"{key}:lease-token") == -1  # the counter never expires
            assert await session.alist_sessions("u") == ["s"] and await session.alist_users() == ["u"]
            with pytest.raises(LeaseHeldError) as held:
                await other.asave("s", "u", overwrite=True, counter=Counter(count=9))
            assert held.value.held_until is not None
            assert abs((held.value.held_until - lease.expires_at).total_seconds()) < 1  # both the server's clock
            await session.asave("s", "u", counter=Counter(count=2))
        assert await client.exists(f"{key}:lease") == 0  # released
        assert await session.adelete("s", "u") is True
        assert await client.get(f"{key}:lease-token") == str(lease.token).encode()  # kept after the delete
        assert await session.alist_sessions("u") == []
        async with other.alease("s", "u") as again:
            assert again.token == lease.token + 1
        await client.delete(f"{key}:lease-token", f"{key}:write-id")
        assert await client.keys(f"{prefix}*") == []  # nothing else was left behind


async def test_a_session_never_leased_gets_no_lease_keys(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session:
        client, key = session.get_client(), session.session_key("s")
        await session.asave("s", counter=Counter(count=1))  # a blind save: now a fenced script
        await session.asave("s", counter=Counter(count=2))
        await session.aupdate("s", lambda: None, counter=Counter())
        assert sorted(await client.keys(f"{prefix}*")) == sorted([key.encode(), f"{key}:write-id".encode()])


async def test_taking_and_releasing_a_lease_are_one_round_trip_each_and_a_save_stays_one(
    redis_server: RedisServer, prefix: str
) -> None:
    """The commands clients sent, as the server's MONITOR saw them (a script's own commands left out),
    after a first lease and save have loaded the scripts."""
    async with (
        RedisSession(redis_server.host, redis_server.port, key_prefix=prefix) as session,
        Redis(host=redis_server.host, port=redis_server.port) as admin,
        Redis(host=redis_server.host, port=redis_server.port) as marking,
    ):
        await marking.ping()  # connected before monitoring: it sends nothing but its marker then

        async def sent(action: Callable[[], Any]) -> list[str]:
            marker = uuid.uuid4().hex
            async with admin.monitor() as monitor:
                await action()
                await marking.echo(marker)
                seen: list[str] = []
                while marker not in (command := await monitor.next_command())["command"]:
                    if command["client_type"] != "lua":
                        seen.append(command["command"].split()[0].upper())
            return seen

        async with session.alease("warm", ttl=60):
            await session.asave("warm", counter=Counter())
        lease = await session.alease("s", ttl=60)
        assert await sent(lambda: session.alease("t", ttl=60)) == ["EVALSHA"]
        assert await sent(lease.arelease) == ["EVALSHA"]
        await session.asave("s", counter=Counter(count=1))  # a first save of a session reads what is stored first
        assert await sent(lambda: session.asave("s", counter=Counter(count=2))) == ["EVALSHA"]  # a compare-and-set


async def test_fakeredis_without_lupa_keeps_leases() -> None:
    """AgentScope's tests use fakeredis without Lua: the WATCH/MULTI twins take, fence and release."""
    holder = RedisSession(client=fakeredis.FakeAsyncRedis())
    other = RedisSession(client=holder.get_client())
    async with holder.alease("s", ttl=60) as lease:
        await holder.asave("s", counter=Counter(count=1))
        with pytest.raises(LeaseHeldError):
            await other.asave("s", counter=Counter(count=2))
        with pytest.raises(LeaseHeldError):
            await other.alease("s")
    async with other.alease("s", ttl=60) as taken:
        assert taken.token == lease.token + 1
        with pytest.raises(LeaseHeldError):
            await holder.adelete("s")
    loaded = Counter()
    await other.aload("s", counter=loaded)
    assert loaded.count == 1


@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_leases_work_through_a_client_decoding_responses(
    redis_server: RedisServer, scriptless_server: RedisServer, prefix: str, lua: bool
) -> None:
    server = redis_server if lua else scriptless_server
    client = Redis(host=server.host, port=server.port, decode_responses=True)
    async with RedisSession(client=client, key_prefix=prefix) as holder, RedisSession(client=client, key_prefix=prefix) as other:
        lease = await holder.alease("s 😀", "ü", ttl=60)
        await holder.asave("s 😀", "ü", counter=Counter(count=1))
        with pytest.raises(LeaseHeldError) as held:
            await other.adelete("s 😀", "ü")
        assert held.value.held_until is not None
        assert abs((held.value.held_until - lease.expires_at).total_seconds()) < 1
        token, first = lease.token, lease.expires_at
        await lease.arenew(120)
        assert lease.token == token and lease.expires_at > first
        await lease.arelease()
        assert await other.adelete("s 😀", "ü") is True
    await client.aclose()
