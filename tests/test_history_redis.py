"""RedisSession's kept revisions (issue 30's storage side), through the blob primitives: on the real redis-server,
on one that runs no Lua (the ``WATCH``/``MULTI`` twins), and on a real three-master Redis Cluster (slow)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from redis.crc import key_slot

from statekit.errors import LeaseHeldError, LeaseLostError, SessionError
from statekit.session._appends import DeltaBase
from statekit.session._archive import Archive, IndexChange
from statekit.session._history_beside import advance, head_line, whole_record
from statekit.session._history_index import HeadHistory
from statekit.session._redis_cluster import is_cluster
from statekit.session._redis_history import history_key, keep_args, keep_plan, records_key
from statekit.session._revisions import Expected
from statekit.session.document import token_mark
from statekit.session.redis import RedisSession
from statekit.testing import Counter, RedisCluster, RedisServer, local_redis_cluster
from append_models import Memory, Msg
from redis_proxy import LosingProxy

pytestmark = pytest.mark.redis

Make = Callable[..., RedisSession]
"""A new RedisSession on the test's store (all of one test share a key prefix); options go to the constructor."""

REV_A, REV_B = "a" * 40, "b" * 40


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    with local_redis_cluster() as running:
        yield running


@pytest.fixture(params=["redis", "scriptless", pytest.param("cluster", marks=pytest.mark.slow)])
def make(request: pytest.FixtureRequest) -> Make:
    prefix = f"hist-{uuid.uuid4().hex}:"
    if request.param == "cluster":
        url = request.getfixturevalue("cluster").url
        return lambda **options: RedisSession.from_url(url, key_prefix=prefix, timeout=60, **options)
    server: RedisServer = request.getfixturevalue("redis_server" if request.param == "redis" else "scriptless_server")
    return lambda **options: RedisSession(server.host, server.port, key_prefix=prefix, timeout=60, **options)


def sha1(data: bytes) -> str:
    return hashlib.sha1(data + getattr(data, "log", b"")).hexdigest()


async def document(session: RedisSession, count: int) -> bytes:
    """The bytes a save of ``Counter(count)`` stores (saved as another session, then read).

    The sessions of these tests keep no history themselves (``keep_history=0``): they call the
    primitives directly, which do only what the test asks."""
    scratch = session.key(f"scratch-{uuid.uuid4().hex}", "u")
    await session.asave(scratch.session_id, "u", counter=Counter(count=count))
    raw = await session._read(scratch)
    assert raw is not None
    await session.adelete(scratch.session_id, "u")
    return raw


async def loads_as(session: RedisSession, blob: bytes, **modules: Any) -> dict[str, Any]:
    """What a load of a session holding exactly ``blob`` (document and deltas) gives: the blob as the core sees it."""
    key = session.key(f"loaded-{uuid.uuid4().hex}", "u")
    await session._write(key, bytes(blob) + getattr(blob, "log", b""))
    await session.aload(key.session_id, "u", **modules)
    return {name: module.state_dict() for name, module in modules.items()}


async def all_keys(session: RedisSession) -> list[str]:
    client = session.get_client()
    found = [key async for key in client.scan_iter(match=session.key_prefix + "*", count=1000)]
    return sorted(key.decode() if isinstance(key, bytes) else key for key in found)


async def test_a_keeping_save_keeps_the_exact_old_bytes_under_its_name(make: Make) -> None:
    async with make(keep_history=0) as session:
        await session.asave("s", "u", counter=Counter(count=1))
        key = session.key("s", "u")
        old, new = await session._read(key), await document(session, 2)
        assert old is not None
        revision = await session.arevision("s", "u")
        assert revision == sha1(old)
        assert await session._write_keeping(key, new, Expected(raw=old), Archive(revision)) is True
        assert await session._read(key) == new
        blob = await session._get_blob(key, revision)
        assert blob == old and sha1(blob) == revision
        assert await session._list_blobs(key) == [revision]
        assert await loads_as(session, blob, counter=Counter()) == {"counter": {"count": 1}}
        counter = Counter()
        await session.aload("s", "u", counter=counter)
        assert counter.count == 2


async def test_a_kept_blob_carries_the_deltas_of_append_only_lists(make: Make) -> None:
    """After a delta save only the base is known (``Expected.only_base``): the script checks it, and the
    blob holds the document and its deltas, decoded as a read of the head then was (a session saved with
    deltas before it kept history: one that keeps history saves in full)."""
    async with make(keep_history=0) as session:
        memory = Memory(content=[Msg("user", "hi")], note="n")
        await session.asave("s", "u", memory=memory)
        memory.content.append(Msg("agent", "hello"))
        memory.content.append(Msg("user", "more"))
        await session.asave("s", "u", memory=memory)
        key = session.key("s", "u")
        old = await session._read(key)
        assert old is not None
        assert len(getattr(old, "log", b"")) > 0  # the appends are deltas after the document
        expected = session._revisions.get(key)
        assert expected is not None and expected.only_base
        revision = sha1(old)
        assert await session._write_keeping(key, await document(session, 7), expected, Archive(revision)) is True
        blob = await session._get_blob(key, revision)
        assert blob is not None
        assert (bytes(blob), getattr(blob, "log", None), getattr(blob, "token", None)) == (
            bytes(old), getattr(old, "log", None), getattr(old, "token", None)
        )
        assert await loads_as(session, blob, memory=Memory()) == {"memory": memory.state_dict()}


async def test_a_stale_expectation_writes_nothing_and_keeps_nothing(make: Make) -> None:
    async with make(keep_history=0) as session, make(keep_history=0) as other:
        await session.asave("s", "u", counter=Counter(count=1))
        key = session.key("s", "u")
        stale = await session._read(key)
        assert stale is not None
        await session._put_blob(key, REV_A, b"kept before")
        await other.asave("s", "u", counter=Counter(count=2), overwrite=True)
        now, blobs = await session._read(key), sorted(await session._list_blobs(key))
        assert REV_A in blobs  # besides the head the other writer's save kept
        archive = Archive(sha1(stale), drop=(REV_A,))
        assert await session._write_keeping(key, await document(session, 3), Expected(raw=stale), archive) is False
        assert await session._read(key) == now
        assert sorted(await session._list_blobs(key)) == blobs
        assert await session._get_blob(key, REV_A) == b"kept before"


async def test_a_stale_delta_base_writes_nothing_and_keeps_nothing(make: Make) -> None:
    async with make(keep_history=0) as session, make(keep_history=0) as other:
        memory = Memory(content=[Msg("user", "hi")])
        await session.asave("s", "u", memory=memory)
        memory.content.append(Msg("agent", "hello"))
        await session.asave("s", "u", memory=memory)
        key = session.key("s", "u")
        base = session._revisions.get(key)
        assert base is not None and base.only_base
        theirs = Memory()
        await other.aload("s", "u", memory=theirs)
        theirs.content.append(Msg("user", "theirs"))
        await other.asave("s", "u", memory=theirs)  # one more delta: same document, longer value
        now = await session._read(key)
        assert await session._write_keeping(key, await document(session, 3), base, Archive(sha1(now or b""))) is False
        assert await session._read(key) == now
        assert await session._list_blobs(key) == []


async def test_nothing_stored_keeps_nothing_and_the_write_creates_the_session(make: Make) -> None:
    async with make(keep_history=0) as session:
        key = session.key("new", "u")
        data = await document(session, 5)
        assert await session._write_keeping(key, data, Expected(raw=None, revision=""), Archive(None)) is True
        assert await session._read(key) == data
        assert await session._list_blobs(key) == []
        assert await session._write_keeping(key, data, Expected(raw=None, revision=""), Archive(None)) is False


async def test_drop_removes_the_named_blobs_with_the_write_and_after(make: Make) -> None:
    async with make(keep_history=0) as session:
        await session.asave("s", "u", counter=Counter(count=1))
        key = session.key("s", "u")
        old = await session._read(key)
        assert old is not None
        for name in (REV_A, REV_B):
            await session._put_blob(key, name, name.encode())
        await session._put_blob(key, REV_A, REV_A.encode())  # the same blob again: harmless
        archive = Archive(sha1(old), drop=(REV_A, "c" * 40))  # a name that is not there is ignored
        assert await session._write_keeping(key, await document(session, 2), Expected(raw=old), archive) is True
        assert sorted(await session._list_blobs(key)) == sorted([sha1(old), REV_B])
        assert await session._get_blob(key, REV_A) is None
        await session._drop_blobs(key, (REV_B, sha1(old)))
        assert await session._list_blobs(key) == []
        assert not any(name.endswith(":history") or ":history{" in name for name in await all_keys(session))


async def test_delete_removes_the_blobs(make: Make) -> None:
    async with make(keep_history=0) as session:
        await session.asave("s", "u", counter=Counter(count=1))
        key = session.key("s", "u")
        old = await session._read(key)
        assert old is not None
        assert await session._write_keeping(key, await document(session, 2), Expected(raw=old), Archive(sha1(old)))
        await session._put_blob(key, REV_A, b"more")
        assert await session.adelete("s", "u") is True
        assert await session._list_blobs(key) == []
        assert await session._get_blob(key, sha1(old)) is None
        assert not any(":history" in name for name in await all_keys(session))


async def test_delete_of_a_missing_head_removes_blobs_left_behind(make: Make) -> None:
    async with make(keep_history=0) as session:
        key = session.key("gone", "u")
        await session._put_blob(key, REV_A, b"orphan")
        assert await session._list_blobs(key) == [REV_A]
        assert await session.adelete("gone", "u") is False
        assert await session._list_blobs(key) == []


async def test_blobs_are_never_sessions(make: Make) -> None:
    async with make(keep_history=0) as session:
        for count in (1, 2, 3):
            await session.asave("s", "u", counter=Counter(count=count), overwrite=True)
            key = session.key("s", "u")
            old = await session._read(key)
            assert old is not None
            new = await document(session, count + 10)
            assert await session._write_keeping(key, new, Expected(raw=old), Archive(sha1(old)))
        assert len(await session._list_blobs(key)) == 3
        names = await all_keys(session)
        assert any(":history" in name for name in names), names  # the blobs are stored ...
        assert await session.alist_sessions("u") == ["s"]  # ... and never listed
        assert await session.alist_users() == ["u"]
        kept = await session._list_blobs(key)
        for session_id in ("s:history", "s:state:history", "s%3Astate%3Ahistory", "history", *kept):
            assert await session.aexists(session_id, "u") is False
            assert await session.aread_document(session_id, "u") is None
            assert await session.arevision(session_id, "u") is None


async def test_a_session_id_of_another_user_sees_none_of_its_blobs(make: Make) -> None:
    async with make(keep_history=0) as session:
        for user in ("alice", "bob"):
            await session.asave("s", user, counter=Counter(count=1))
        alice, bob = session.key("s", "alice"), session.key("s", "bob")
        old = await session._read(alice)
        assert old is not None
        assert await session._write_keeping(alice, await document(session, 2), Expected(raw=old), Archive(sha1(old)))
        assert await session._list_blobs(bob) == []
        assert await session._get_blob(bob, sha1(old)) is None
        await session._put_blob(bob, REV_B, b"bob's")
        assert await session.adelete("s", "bob") is True
        assert await session._list_blobs(alice) == [sha1(old)]
        assert await session._get_blob(alice, sha1(old)) == old
        assert await session._get_blob(alice, REV_B) is None


async def test_a_non_holder_is_fenced_off_while_a_lease_is_held(make: Make) -> None:
    async with make(keep_history=0) as holder, make(keep_history=0) as other:
        await holder.asave("s", "u", counter=Counter(count=1))
        key = holder.key("s", "u")
        old = await holder._read(key)
        assert old is not None
        new = await document(holder, 2)
        async with holder.alease("s", "u", ttl=60):
            with pytest.raises(LeaseHeldError):
                await other._write_keeping(key, new, Expected(raw=old), Archive(sha1(old)))
            with pytest.raises(LeaseHeldError):
                await other._put_blob(key, REV_A, b"x")
            assert await holder._read(key) == old and await holder._list_blobs(key) == []
            await holder._put_blob(key, REV_B, b"y")
            with pytest.raises(LeaseHeldError):
                await other._drop_blobs(key, (REV_B,))
            assert await holder._list_blobs(key) == [REV_B]
            assert await holder._write_keeping(key, new, Expected(raw=old), Archive(sha1(old), drop=(REV_B,)))
        assert await holder._list_blobs(key) == [sha1(old)]


async def test_a_holder_whose_lease_was_taken_over_is_fenced_off(make: Make) -> None:
    async with make(keep_history=0) as first, make(keep_history=0) as second:
        await first.asave("s", "u", counter=Counter(count=1))
        key = first.key("s", "u")
        old = await first._read(key)
        assert old is not None
        await first.alease("s", "u", ttl=0.2)  # kept, not released: it expires
        async with second.alease("s", "u", ttl=60, wait=60):  # taken once the first one expired
            with pytest.raises(LeaseLostError):
                await first._write_keeping(key, await document(second, 2), Expected(raw=old), Archive(sha1(old)))
            with pytest.raises(LeaseLostError):
                await first._drop_blobs(key, (REV_A,))
            assert await second._read(key) == old and await second._list_blobs(key) == []


async def test_the_blobs_expire_with_the_session(make: Make) -> None:
    """With ``key_ttl``, the kept revisions expire with the session: a keeping save, a load (which slides the
    session's expiry) and a delta save give them the session's expiry; without, neither expires."""
    async with make(keep_history=0, key_ttl=1000) as session:
        client = session.get_client()
        await session.asave("s", "u", counter=Counter(count=1))
        key, name = session.key("s", "u"), session.session_key("s", "u")
        kept = history_key(name, is_cluster(client))
        old = await session._read(key)
        assert old is not None
        assert await session._write_keeping(key, await document(session, 2), Expected(raw=old), Archive(sha1(old)))
        assert 0 < await client.pttl(kept) <= 1000 * 1000
        await client.expire(name, 500)
        await client.expire(kept, 500)
        await session.aload("s", "u", counter=Counter())
        assert await client.pttl(kept) > 500 * 1000
        memory = Memory(content=[Msg("user", "hi")])
        await session.asave("m", "u", memory=memory)
        await session._put_blob(session.key("m", "u"), REV_A, b"x")
        deltas = history_key(session.session_key("m", "u"), is_cluster(client))
        await client.expire(deltas, 500)
        memory.content.append(Msg("agent", "hello"))
        await session.asave("m", "u", memory=memory)  # a delta save (an append to the value)
        assert await client.pttl(deltas) > 500 * 1000
        await client.expire(kept, 500)
        await session.asave("s", "u", counter=Counter(count=3), overwrite=True)  # a save that checks nothing
        assert await client.pttl(kept) > 500 * 1000
    async with make(keep_history=0) as forever:
        await forever.asave("s", "u", counter=Counter(count=4), overwrite=True)  # no key_ttl: neither expires
        client = forever.get_client()
        assert (await client.pttl(name), await client.pttl(kept)) == (-1, -1)
        old = await forever._read(key)
        assert old is not None
        assert await forever._write_keeping(key, await document(forever, 5), Expected(raw=old), Archive(sha1(old)))
        assert (await client.pttl(name), await client.pttl(kept)) == (-1, -1)
        assert len(await forever._list_blobs(key)) == 2


async def test_the_blobs_sit_in_the_session_keys_slot(make: Make) -> None:
    """On a cluster the blobs' key carries a hash tag when needed, so that the scripts touch it with the session's."""
    async with make(keep_history=0) as session:
        for session_id in ("s", "{tagged}", "x{", "\N{SNOWMAN}"):
            key, name = session.key(session_id, "u"), session.session_key(session_id, "u")
            await session._put_blob(key, REV_A, b"x")
            (kept,) = [found for found in await all_keys(session) if found.startswith(name + ":history")]
            assert key_slot(kept.encode()) == key_slot(name.encode()) or not is_cluster(session.get_client())
            assert await session._get_blob(key, REV_A) == b"x"
            await session._drop_blobs(key, (REV_A,))


@pytest.mark.parametrize("lua", [True, False], ids=["script", "watch-multi"])
async def test_a_keeping_save_whose_reply_was_lost_is_told_done_and_kept_once(
    redis_server: RedisServer, scriptless_server: RedisServer, lua: bool
) -> None:
    """The save lands, its reply is lost, another writer saves over it before the retry asks: the retry finds
    its own write id and answers "done" (not a conflict), and the blob holds the head it replaced."""
    server, prefix = (redis_server if lua else scriptless_server), f"hist-{uuid.uuid4().hex}:"
    async with (
        LosingProxy(server) as proxy,
        RedisSession("127.0.0.1", proxy.port, key_prefix=prefix, keep_history=0, timeout=60) as session,
        RedisSession(server.host, server.port, key_prefix=prefix, keep_history=0, timeout=60) as other,
    ):
        await session.asave("s", "u", counter=Counter(count=1))
        key = session.key("s", "u")
        first = await session._read(key)
        assert first is not None
        second, third = await document(session, 2), await document(session, 3)
        assert await session._write_keeping(key, second, Expected(raw=first), Archive(sha1(first)))  # the script known

        async def other_saves_over_it() -> None:
            await other.asave("s", "u", counter=Counter(count=4), overwrite=True)

        proxy.lose(b"EVALSHA" if lua else b"EXEC", then=other_saves_over_it)
        archive = Archive(sha1(second), drop=(sha1(first),))
        assert await session._write_keeping(key, third, Expected(raw=second), archive)
        assert proxy.lost == 1
        assert await session._list_blobs(key) == [sha1(second)]
        assert await session._get_blob(key, sha1(second)) == second
        counter = Counter()
        await session.aload("s", "u", counter=counter)
        assert counter.count == 4


@pytest.mark.parametrize("value", [-1, 1.5, "3", True, [2]])
def test_keep_history_is_checked(redis_server: RedisServer, value: object) -> None:
    with pytest.raises(SessionError, match=f"keep_history should be .*got {value!r}".replace("[", r"\[")):
        RedisSession(redis_server.host, redis_server.port, keep_history=value)  # type: ignore[arg-type]
    with pytest.raises(SessionError, match="keep_history should be"):
        RedisSession.from_url(f"redis://{redis_server.host}:{redis_server.port}/0", keep_history=value)
    for good in (0, 5, None):
        with RedisSession(redis_server.host, redis_server.port, keep_history=good) as session:
            assert session.keep_history == good and session.supports_history
        with RedisSession.from_url(f"redis://{redis_server.host}:{redis_server.port}/0", keep_history=good) as session:
            assert session.keep_history == good


async def test_turns_saved_as_deltas_are_named_as_the_server_names_them(make: Make) -> None:
    """A session that keeps history saves turns as deltas naming their revisions; a write expecting the
    head's revision (the server compares it, in Lua or in a WATCH twin) lands, and a stale one does not."""
    from statekit.errors import ConflictError  # noqa: PLC0415 - only here

    session, other = make(keep_history=5), make()
    memory, revisions = Memory(), []
    for turn in range(3):
        memory.content.append(Msg(role="user", text=f"turn {turn}"))
        await session.asave("s", "u", memory=memory)
        revisions.append(await session.arevision("s", "u"))
    raw = await session._read(session.key("s", "u"))
    assert raw is not None and (bytes(raw) + raw.log).count(b"\n") == 4, raw  # type: ignore[attr-defined]  # a header, a line per later turn
    stored = await other.aread_document("s", "u")
    assert stored is not None and stored.revision == revisions[-1]
    with pytest.raises(ConflictError):
        await other.awrite_document("s", stored.data, "u", expected_revision=revisions[-2])
    written = await other.awrite_document("s", stored.data, "u", expected_revision=revisions[-1])
    listed = [r.revision for r in await other.ahistory("s", "u")]
    assert listed == [written, *revisions[::-1]], listed
    for count, revision in enumerate(revisions, start=1):
        loaded = Memory()
        await other.aload_at("s", revision or "", user_id="u", memory=loaded)
        assert [m.text for m in loaded.content] == [f"turn {n}" for n in range(count)]
    await session.aclose()
    await other.aclose()


async def test_a_revision_cut_from_deltas_whose_header_is_damaged_is_refused(make: Make) -> None:
    """A kept revision is cut from the head's delta lines: under a damaged header it is refused, naming why."""
    from statekit.errors import DocumentError  # noqa: PLC0415 - only here

    session = make(keep_history=5)
    memory = Memory()
    for turn in range(3):
        memory.content.append(Msg(role="user", text=f"turn {turn}"))
        await session.asave("s", "u", memory=memory)
    middle = (await session.ahistory("s", "u"))[1].revision
    key = session.key("s", "u")
    raw = await session._read(key)
    assert raw is not None
    whole = bytes(raw) + raw.log  # type: ignore[attr-defined]
    header_at = whole.index(b'{"statekit_log"')
    await session._write(key, whole[:header_at] + b'{"damaged":true}' + whole[whole.index(b"\n", header_at) :])
    with pytest.raises(DocumentError, match="do not follow a header naming their document"):
        await session.aload_at("s", middle, user_id="u", memory=Memory())
    await session.aclose()


# -- the kept records beside the head (the list ``K:history-records``, see _history_beside) ---------------


def record(revision: str, blob: str | None = None, lines: int | None = None, parent: str | None = None) -> bytes:
    """A whole record as the index holds it: one line of JSON."""
    data: dict[str, Any] = {"revision": revision, "saved_at": None, "size": 1, "parent": parent, "modules": ["counter"]}
    if blob is not None:
        data["in"], data["lines"] = blob, lines
    return orjson.dumps(data) + b"\n"


async def keeping(session: RedisSession, count: int, keep_as: bool, index: IndexChange) -> str | None:
    """Write ``Counter(count)`` over the head, keeping it (as its revision) when ``keep_as``, doing ``index``
    to the kept records; the revision it kept."""
    key = session.key("s", "u")
    old = await session._read(key)
    kept = sha1(old) if keep_as and old is not None else None
    new = await document(session, count)
    assert await session._write_keeping(key, new, Expected(raw=old), Archive(kept, (), index)) is True
    return kept


async def test_the_kept_records_are_cut_as_the_python_step_cuts_them(make: Make) -> None:
    """The script (or the WATCH twin) puts records first, cuts the index to the retention and removes the
    blobs only the records cut off are in: a blob a kept record is "in" stays, one a kept record names as
    its parent goes; records replaced are no longer listed, nor their blobs kept. The server's index equals
    :func:`advance`'s, and the blobs left are the ones expected."""
    rev_c, rev_d, x1, x2 = "c" * 40, "d" * 40, "1" * 40, "2" * 40
    async with make(keep_history=0) as session:
        await session.asave("s", "u", counter=Counter(count=1))
        key = session.key("s", "u")
        for name in (REV_A, REV_B, rev_c, rev_d):
            await session._put_blob(key, name, name.encode())
        lines = [record(REV_A, parent=x2), record(x2, REV_B, 1, x1), record(x1, REV_B, 0, REV_B),
                 record(REV_B, parent=rev_c), record(rev_c, parent=rev_d), record(rev_d, parent=None)]
        stored: bytes | None = None
        steps = [
            (False, IndexChange(b"".join(lines), replace=True, keep=None), {REV_A, REV_B, rev_c, rev_d}),
            (True, IndexChange(b"NEW", replace=False, keep=4), {REV_A, REV_B, "HEAD1"}),  # x1 keeps B; C, D go
            (True, IndexChange(b"NEW", replace=False, keep=2), {"HEAD1", "HEAD2"}),  # B's last record goes
            (True, IndexChange(b"NEW", replace=False, keep=None), {"HEAD1", "HEAD2", "HEAD3"}),
            (True, IndexChange(b"NEW", replace=True, keep=None), {"HEAD4"}),  # the records replaced are not listed
            (False, IndexChange(b"", replace=False, keep=0), set()),  # history turned off: every record goes
        ]
        heads: dict[str, str] = {}
        for number, (keep_as, index, blobs) in enumerate(steps):
            old = await session._read(key)
            head = sha1(old) if old is not None else ""
            if index.records == b"NEW":
                heads[f"HEAD{len(heads) + 1}"] = head
                index = IndexChange(record(head, parent=REV_A), index.replace, index.keep)
            expected_index, dropped = advance(stored, index)
            await keeping(session, number + 2, keep_as, index)
            stored = await session._get_index(key)
            assert (stored or b"") == expected_index
            assert sorted(await session._list_blobs(key)) == sorted(heads.get(name, name) for name in blobs)
            assert not set(dropped) & set(await session._list_blobs(key))
        assert stored is None
        assert not any(":history" in name for name in await all_keys(session))


async def test_the_kept_records_expire_and_go_with_the_session(make: Make) -> None:
    """The records' list sits in the session key's slot, takes the session's expiry at every write, slides with
    it at a load, keeps it through a plain save, persists when the session does, and goes with a delete."""
    async with make(keep_history=3, key_ttl=1000) as session:
        client = session.get_client()
        for count in range(3):
            await session.asave("s", "u", counter=Counter(count=count))
        name = session.session_key("s", "u")
        listed = records_key(name, is_cluster(client))
        assert key_slot(listed.encode()) == key_slot(name.encode()) or not is_cluster(client)
        assert await client.llen(listed) == 2
        assert 0 < await client.pttl(listed) <= 1000 * 1000
        await client.expire(name, 500)
        await client.expire(listed, 500)
        await session.aload("s", "u", counter=Counter())  # slides the session's expiry: the records' too
        assert await client.pttl(listed) > 500 * 1000
        await client.expire(listed, 500)
        await session.asave("s", "u", counter=Counter(count=9), overwrite=True)  # a save that checks nothing
        assert await client.pttl(listed) > 500 * 1000
    async with make(keep_history=3) as forever:
        await forever.asave("s", "u", counter=Counter(count=10))  # no key_ttl: the records persist as the value
        client = forever.get_client()
        assert (await client.pttl(name), await client.pttl(listed)) == (-1, -1)
        assert await forever.adelete("s", "u")
        assert await client.exists(listed) == 0


async def test_a_thousands_records_long_index_is_written_in_one_step(make: Make) -> None:
    """Records are pushed a thousand at a time (Lua's ``unpack`` takes no more): an index of 2,500 records
    replaced in one write lands whole and in order, and its next write cuts it to the retention."""
    async with make(keep_history=0) as session:
        await session.asave("s", "u", counter=Counter(count=1))
        key = session.key("s", "u")
        lines = [record(f"{number:040x}", parent=f"{number + 1:040x}") for number in range(2500)]
        await keeping(session, 2, False, IndexChange(b"".join(lines), replace=True, keep=None))
        assert await session._get_index(key) == b"".join(lines)
        await keeping(session, 3, False, IndexChange(lines[0], replace=False, keep=1200))
        assert await session._get_index(key) == lines[0] + b"".join(lines[:1199])


def test_the_python_step_keeps_a_blob_while_a_kept_record_is_in_it() -> None:
    """:func:`advance` on its own (the twin's step; the script is checked against it above)."""
    a, b = record(REV_A, parent=REV_B), record(REV_B, parent=None)
    located = record("3" * 40, REV_B, 0, None)
    assert advance(a + b, IndexChange(b"", replace=False, keep=1)) == (a, (REV_B,))
    assert advance(b, IndexChange(located, replace=False, keep=1)) == (located, ())  # still in REV_B
    assert advance(a + b + located, IndexChange(a, replace=True, keep=None)) == (a, (REV_B,))  # replaced: not listed
    assert advance(None, IndexChange(a + b, replace=False, keep=0)) == (b"", (REV_A, REV_B))


@pytest.mark.parametrize(
    "archive",
    [
        Archive(None),
        Archive(REV_A, (REV_B, "c" * 40)),
        Archive(REV_A, (), IndexChange(b'{"revision":"x"}\n', replace=False, keep=20)),
        Archive(None, (), IndexChange(b"", replace=False, keep=0)),
        Archive(REV_B, (), IndexChange(b"a\nb\n", replace=True, keep=None, listed=3)),
        Archive(REV_B, (), IndexChange(b"a\n", replace=False, keep=5, listed=0)),
    ],
)
@pytest.mark.parametrize(
    "expected",
    [Expected(revision=REV_A), Expected(revision=""), Expected(base=DeltaBase("tok", 40, 100, b"{}", {}))],
    ids=["revision", "created", "base"],
)
@pytest.mark.parametrize("ttl", ["", "keep", "3600"])
def test_the_watch_twin_reads_the_keep_arguments_as_the_script_does(archive: Archive, expected: Expected, ttl: str) -> None:
    """The one argument the script reads the write's plan (kind, length, blob, mode, retention, listed, TTL)
    and records from reads back, for the WATCH twin, as the archive and the check it was packed from; a save
    that keeps history sends as many arguments as a compare-and-set (value, revision, TTL), drops aside."""
    data = b'{"a":1}'
    args = keep_args(data, expected, ttl, archive)
    assert len(args) == 3 + len(archive.drop)  # the value, the check, the plan and records, the drops
    assert args[2].split(b"\n", 1)[0].endswith(b" " + ttl.encode())  # the plan's last word, as the script reads it
    check = ("revision", expected.revision, None) if not expected.only_base else ("base", token_mark("tok"), 140)
    assert keep_plan(args) == (data, check, archive)


def test_a_head_record_is_written_alike_from_its_index_and_from_the_revision() -> None:
    """The record a save writes of the head it replaces, straight from that head's index, is the one the
    revision made of it writes (every field, a fork's origin too)."""
    for forked in (None, ("u", "s", REV_B)):
        head = HeadHistory(
            keep=3, saved_at="2026-03-01T12:30:00.250000Z", parent=REV_B, forked_from=forked, modules=("a", "b"),
            beside=REV_B, unread=True,
        )
        line = head_line(head, REV_A, 1234)
        assert line == whole_record(head.head(REV_A, 1234))
        assert orjson.loads(line) == {
            "revision": REV_A, "saved_at": "2026-03-01T12:30:00.250000Z", "size": 1234, "parent": REV_B,
            "modules": ["a", "b"], **({} if forked is None else {"forked_from": list(forked)}),
        }


async def test_a_head_that_keeps_history_carries_no_records(make: Make) -> None:
    """The records ride beside the head, not in it: its document stays the same size however long the
    history, and every listed revision loads as saved."""
    async with make(keep_history=5) as session:
        sizes = []
        for count in range(100, 112):
            await session.asave("s", "u", counter=Counter(count=count))
            raw = await session._read(session.key("s", "u"))
            assert raw is not None and b'"kept"' not in raw
            sizes.append(len(raw))
        assert len(set(sizes[1:])) == 1
        listed = await session.ahistory("s", "u")
        assert [revision.revision for revision in listed][:1] == [await session.arevision("s", "u")]
        assert len(listed) == 6 and [revision.parent for revision in listed[:-1]] == [r.revision for r in listed[1:]]
        for age, revision in enumerate(listed):
            counter = Counter()
            await session.aload_at("s", revision.revision, user_id="u", counter=counter)
            assert counter.count == 111 - age
        assert len(await session._list_blobs(session.key("s", "u"))) == 5


async def test_a_head_holding_its_records_moves_them_beside_it_at_its_next_write(make: Make) -> None:
    """A head written while the records rode in the document (the layout files and SQL keep) is read as it
    is, and its next write moves every record beside it: none is lost, each still loads."""
    async with make(keep_history=10) as inside, make(keep_history=10) as session:
        inside.history_beside = False  # type: ignore[misc]  # writes the records into the head, as files do
        for count in range(6):
            await inside.asave("s", "u", counter=Counter(count=count))
        raw = await session._read(session.key("s", "u"))
        assert raw is not None and b'"kept"' in raw
        before = await session.ahistory("s", "u")
        assert len(before) == 6
        await session.asave("s", "u", counter=Counter(count=6))  # (it loaded nothing: a blind save, over the head)
        raw = await session._read(session.key("s", "u"))
        assert raw is not None and b'"kept"' not in raw and b'"beside"' in raw
        after = await session.ahistory("s", "u")
        assert [revision.revision for revision in after[1:]] == [revision.revision for revision in before]
        assert [revision.saved_at for revision in after[1:]] == [revision.saved_at for revision in before]
        for age, revision in enumerate(after):
            counter = Counter()
            await session.aload_at("s", revision.revision, user_id="u", counter=counter)
            assert counter.count == 6 - age


async def test_a_history_read_with_a_write_in_between_reads_again(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """history() reads the head, then its records: a save landing in between is seen (the records then name
    another newest revision than the head read), and the read starts again: what it lists is one state."""
    async with make(keep_history=5) as session, make(keep_history=5) as writer:
        for count in range(3):
            await session.asave("s", "u", counter=Counter(count=count))
        read_index, writes = RedisSession._get_index, [3, 4]

        async def with_a_write(self: RedisSession, key: Any) -> bytes | None:
            if writes:
                await writer.asave("s", "u", counter=Counter(count=writes.pop(0)))
            return await read_index(self, key)

        monkeypatch.setattr(RedisSession, "_get_index", with_a_write)
        listed = await session.ahistory("s", "u")
        assert not writes  # two writes came in between: read three times
        assert listed[0].revision == await session.arevision("s", "u")
        assert len(listed) == 5 and [r.parent for r in listed[:-1]] == [r.revision for r in listed[1:]]


async def test_a_turn_saved_as_a_delta_drops_the_kept_heads_it_pushes_past_the_retention(make: Make) -> None:
    """A turn appends one line and writes no records; the records beside the head are read once (they
    are not in the head), so the kept heads its line pushes past the retention are removed after it."""
    async with make(keep_history=3) as session:
        memory, key = Memory(), session.key("s", "u")
        for note in ("a", "b", "c"):  # three full writes: two kept heads, named beside the head
            memory.note = note
            await session.asave("s", "u", memory=memory)
        kept = [revision.revision for revision in (await session.ahistory("s", "u"))[1:]]
        assert sorted(await session._list_blobs(key)) == sorted(kept) and len(kept) == 2
        left = []
        for turn in range(3):  # each turn is a delta line: its revisions count against the 3 kept
            memory.content.append(Msg(role="user", text=f"turn {turn}"))
            await session.asave("s", "u", memory=memory)
            left.append(sorted(await session._list_blobs(key)))
        assert left == [sorted(kept), [kept[0]], []]
        listed = await session.ahistory("s", "u")
        assert len(listed) == 4
        for age, revision in enumerate(listed):
            loaded = Memory()
            await session.aload_at("s", revision.revision, user_id="u", memory=loaded)
            assert len(loaded.content) == 3 - age


async def test_a_history_read_that_writers_never_let_finish_says_so(make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading again has a bound: a head replaced at every read of its records fails with SessionError."""
    async with make(keep_history=5) as session, make(keep_history=5) as writer:
        await session.asave("s", "u", counter=Counter(count=0))
        read_index, count = RedisSession._get_index, [0]

        async def with_a_write(self: RedisSession, key: Any) -> bytes | None:
            count[0] += 1
            await writer.asave("s", "u", counter=Counter(count=count[0]))
            return await read_index(self, key)

        monkeypatch.setattr(RedisSession, "_get_index", with_a_write)
        with pytest.raises(SessionError, match="kept being written while its history was read"):
            await session.ahistory("s", "u")
        assert count[0] == 5


@pytest.mark.parametrize("edit", ["beside-not-a-string", "beside-and-kept"])
async def test_a_hand_edited_beside_is_refused_naming_it(make: Make, edit: str) -> None:
    """``"beside"`` names a revision, and a head holds its records or names them beside it, not both."""
    from statekit.errors import DocumentError  # noqa: PLC0415 - only here

    async with make(keep_history=3) as session:
        for count in range(2):
            await session.asave("s", "u", counter=Counter(count=count))
        key = session.key("s", "u")
        raw = await session._read(key)
        assert raw is not None
        document = orjson.loads(raw)
        index = document["__statekit__"]["history"]
        if edit == "beside-not-a-string":
            index["beside"] = 5
        else:
            index["kept"] = [{"revision": REV_A, "saved_at": None, "size": 1}]
        await session._write(key, orjson.dumps(document))
        with pytest.raises(DocumentError, match=r"__statekit__\.history"):
            await session.ahistory("s", "u")


async def test_records_a_delta_turn_pushed_out_stay_out_when_the_retention_grows(make: Make) -> None:
    """A turn saved as a delta line pushes the oldest record past the retention (its blob goes) but leaves its
    line in the stored records; a later full write that raises the retention must not list it again (found by
    the model test: a listed revision whose bytes were gone)."""
    async with make(keep_history=0) as plain, make(keep_history=1) as one, make(keep_history=3) as three:
        for session in (plain, one, plain, three):  # plain, then history on, a delta turn, a raised retention
            memory = Memory()
            await session.aload("s", "u", memory=memory)
            await session.asave("s", "u", memory=memory)  # (nothing appended: with history, a "[]" delta line)
        listed = await three.ahistory("s", "u")
        assert len(listed) == 3, listed
        for revision in listed:
            await three.aload_at("s", revision.revision, user_id="u", memory=Memory())  # every one loads


def test_the_python_step_drops_the_records_the_head_no_longer_lists() -> None:
    a, b = record(REV_A, parent=REV_B), record(REV_B, parent=None)
    head = record("3" * 40, parent=REV_A)
    assert advance(a + b, IndexChange(head, replace=False, keep=3, listed=1)) == (head + a, (REV_B,))
    assert advance(a + b, IndexChange(head, replace=False, keep=3, listed=None)) == (head + a + b, ())
    assert advance(a + b, IndexChange(head, replace=False, keep=3, listed=0)) == (head, (REV_A, REV_B))
