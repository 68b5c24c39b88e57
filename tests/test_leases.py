"""Leases (issue 29): the API on a backend of our own that keeps them, the contract, and the proofs with real processes."""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from statekit.errors import ConflictError, LeaseError, LeaseHeldError, LeaseLostError, SessionError
from statekit.session import (
    FENCE_HELD,
    FENCE_LOST,
    FENCE_OK,
    Expected,
    LeaseBusy,
    LeaseGrant,
    SessionBase,
    SessionKey,
    check_fence,
    fence_verdict,
)
from statekit.session import JSONSession, YAMLSession
from statekit.session.postgres import PostgresSession
from statekit.session.redis import RedisSession
from statekit.session.sqlite import SQLiteSession
from statekit.testing import Counter, RedisCluster, RedisServer, SessionContract, check_backend, local_redis_cluster
from workers import HOLDER, TURN_WORKER, run_lease_workers, worker_args


class LeasingDictSession(SessionBase):
    """An own backend that keeps leases: a dict of documents and one of leases, in one process.

    Nothing awaits between a check and its write, so each primitive is atomic
    on the event loop; every write checks the fence first.
    """

    supports_leases = True

    def __init__(self, store: dict[str, Any]) -> None:
        self.docs: dict[tuple[str, str], bytes] = store.setdefault("docs", {})
        self.leases: dict[tuple[str, str], tuple[int, float]] = store.setdefault("leases", {})

    def _fenced(self, key: SessionKey) -> None:
        token, expires_at = self.leases.get((key.user_id, key.session_id), (None, None))
        code = fence_verdict(token, expires_at, self._fence(key), time.time())
        check_fence(code, self._source(key), self._fence(key), expires_at)

    async def _read(self, key: SessionKey) -> bytes | None:
        return self.docs.get((key.user_id, key.session_id))

    async def _write(self, key: SessionKey, data: bytes) -> None:
        self._fenced(key)
        self.docs[key.user_id, key.session_id] = data

    async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
        self._fenced(key)
        if not expected.matches(self.docs.get((key.user_id, key.session_id))):
            return False
        self.docs[key.user_id, key.session_id] = data
        return True

    async def _delete(self, key: SessionKey) -> bool:
        self._fenced(key)
        return self.docs.pop((key.user_id, key.session_id), None) is not None

    async def _list(self, user_id: str) -> list[str]:
        return [session_id for owner, session_id in self.docs if owner == user_id]

    async def _take_lease(self, key: SessionKey, ttl: float) -> LeaseGrant | LeaseBusy:
        token, expires_at = self.leases.get((key.user_id, key.session_id), (0, 0.0))
        now = time.time()
        if expires_at > now:
            return LeaseBusy(expires_at)
        self.leases[key.user_id, key.session_id] = (token + 1, now + ttl)
        return LeaseGrant(token + 1, now + ttl)

    async def _renew_lease(self, key: SessionKey, token: int, ttl: float) -> LeaseGrant | None:
        stored, expires_at = self.leases.get((key.user_id, key.session_id), (0, 0.0))
        now = time.time()
        if stored != token or expires_at <= now:
            return None
        self.leases[key.user_id, key.session_id] = (token, now + ttl)
        return LeaseGrant(token, now + ttl)

    async def _release_lease(self, key: SessionKey, token: int) -> None:
        stored, expires_at = self.leases.get((key.user_id, key.session_id), (0, 0.0))
        if stored == token:
            self.leases[key.user_id, key.session_id] = (token, 0.0)  # the token stays: the next one is greater


class TestLeasingDictSession(SessionContract):
    """The whole contract, lease checks included, on the backend above."""

    store: dict[str, Any] = {}

    def make_session(self) -> SessionBase:
        return LeasingDictSession(self.store)


class _NoFence(LeasingDictSession):
    """Keeps leases but forgets to check them when writing: the contract must catch it."""

    def _fenced(self, key: SessionKey) -> None:
        return None


class _TokensRestart(LeasingDictSession):
    """Forgets the last token on release: the next lease reuses a token, which the contract must catch."""

    async def _release_lease(self, key: SessionKey, token: int) -> None:
        self.leases.pop((key.user_id, key.session_id), None)


@pytest.mark.parametrize("broken", [_NoFence, _TokensRestart])
def test_the_contract_catches_a_backend_that_breaks_leases(broken: type[LeasingDictSession]) -> None:
    store: dict[str, Any] = {}
    with pytest.raises(AssertionError):
        asyncio.run(check_backend(lambda: broken(store)))


def test_the_fence_verdicts() -> None:
    assert fence_verdict(None, None, None, 10.0) == FENCE_OK  # never leased
    assert fence_verdict(3, 9.0, None, 10.0) == FENCE_OK  # expired: anyone writes
    assert fence_verdict(3, 11.0, None, 10.0) == FENCE_HELD
    assert fence_verdict(3, 11.0, 2, 10.0) == FENCE_LOST  # an older holder's token
    assert fence_verdict(3, 11.0, 3, 10.0) == FENCE_OK
    assert fence_verdict(3, 9.0, 3, 10.0) == FENCE_LOST  # mine, run out
    assert fence_verdict(4, 11.0, 3, 10.0) == FENCE_LOST  # taken over
    with pytest.raises(LeaseHeldError, match="until 1970-01-01T00:00:11.000"):
        check_fence(FENCE_HELD, "here", None, 11.0)
    with pytest.raises(LeaseLostError, match=r"\(token 3\) expired or was taken over"):
        check_fence(FENCE_LOST, "here", 3)
    with pytest.raises(SessionError, match="unknown lease verdict 7"):
        check_fence(7, "here", 3)


def test_lease_errors_are_conflicts_and_survive_pickling() -> None:
    held = LeaseHeldError("held", source="here", held_until=None)
    lost = LeaseLostError("lost", source="here", token=5)
    assert isinstance(held, ConflictError)
    assert isinstance(lost, LeaseError)
    again = pickle.loads(pickle.dumps(lost))
    assert (type(again), str(again), again.source, again.token) == (LeaseLostError, "lost", "here", 5)
    back = pickle.loads(pickle.dumps(held))
    assert (type(back), back.source, back.held_until) == (LeaseHeldError, "here", None)


def test_a_backend_without_leases_refuses_them_and_writes_as_before(tmp_path: Any) -> None:
    class Plain(LeasingDictSession):
        supports_leases = False

    session = Plain({})
    with pytest.raises(SessionError, match="does not support leases"):
        session.lease("s")
    session.save("s", counter=Counter(count=1))
    assert session.read_document("s") is not None


def test_the_blocking_lease_refuses_to_run_inside_a_loop() -> None:
    session = LeasingDictSession({})

    async def inside() -> None:
        session.lease("s")

    with pytest.raises(SessionError, match="inside a running event loop"):
        asyncio.run(inside())


def test_update_under_a_lease_is_not_retried_on_a_lease_error() -> None:
    store: dict[str, Any] = {}
    holder, other = LeasingDictSession(store), LeasingDictSession(store)
    calls: list[int] = []
    with holder.lease("s", ttl=60):
        with pytest.raises(LeaseHeldError):
            other.update("s", lambda: calls.append(1), counter=Counter())
    assert calls == [1]  # loaded, mutated once, refused: no retry against a lease
    other.update("s", lambda: calls.append(2), counter=Counter())
    assert calls == [1, 2]


def test_alease_is_a_coroutine_for_tasks_and_a_context_manager() -> None:
    async def main() -> tuple[int, bool, bool]:
        session = LeasingDictSession({})
        lease = await asyncio.create_task(session.alease("s", ttl=60))  # create_task wants a coroutine
        await lease.arelease()
        unused = session.alease("s")  # made, never awaited: takes nothing
        unused.close()
        async with session.alease("s") as again:
            held = again.token
        return held, lease.released, again.released

    assert asyncio.run(main()) == (2, True, True)


def test_a_lease_tells_what_it_is() -> None:
    session = LeasingDictSession({})
    lease = session.lease("s", "u", ttl=60)
    assert repr(lease).startswith("Lease(session_id='s', user_id='u', token=1, expires_at=")
    lease.release()
    assert repr(lease) == "Lease(session_id='s', user_id='u', token=1, released)"


# -- proofs with real processes, on every built-in backend ---------------------------------------------------------------


@attrs.frozen
class Store:
    """One backend's storage for the proofs: how worker processes reach it, and sessions of this process."""

    kind: str
    where: str
    prefix: str
    make: Callable[[], SessionBase]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    with local_redis_cluster() as running:
        yield running


@pytest.fixture(
    params=[
        "json",
        "yaml",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("cluster", marks=pytest.mark.redis),
        "postgres",
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    kind: str = request.param
    prefix = f"lease{uuid.uuid4().hex[:12]}"
    if kind in ("json", "yaml"):
        maker = JSONSession if kind == "json" else YAMLSession
        found = Store(kind, str(tmp_path), "", lambda: maker(tmp_path))
    elif kind == "sqlite":
        found = Store(kind, str(tmp_path / "s.db"), "", lambda: SQLiteSession(tmp_path / "s.db", timeout=60))
    elif kind == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        found = Store(kind, dsn, prefix, lambda: PostgresSession.from_url(dsn, table=prefix, timeout=60))
    else:
        if kind == "cluster":
            url = request.getfixturevalue("cluster").url
        else:
            server: RedisServer = request.getfixturevalue("redis_server")
            url = f"redis://{server.host}:{server.port}/0"
        found = Store("redis", url, prefix + ":", lambda: RedisSession.from_url(url, key_prefix=prefix + ":", timeout=60))
    session = found.make()
    supported = session.supports_leases
    session.close()
    assert supported, f"{type(session).__name__} does not keep leases: every built-in backend must"
    return found


@pytest.mark.slow
def test_a_paused_holder_is_fenced_off_when_it_wakes(store: Store) -> None:
    """langgraph #8796: A takes the lease (1 s) and loads, is stopped for 2 s; B takes it over and loads;
    A goes on and saves: LeaseLostError, nothing written; B saves."""
    with store.make() as session:
        session.save("turn", "u", counter=Counter(count=1))
    worker = subprocess.Popen(
        worker_args(TURN_WORKER, store.kind, store.where, store.prefix, "1.0"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdin is not None
        said, token = worker.stdout.readline().split()
        assert said == "loaded", said
        os.kill(worker.pid, signal.SIGSTOP)
        time.sleep(2)
        with store.make() as session:
            with session.lease("turn", "u", ttl=60, wait=30) as lease:
                assert lease.token > int(token), (lease.token, token)
                counter = Counter()
                session.load("turn", "u", counter=counter)
                before = session.revision("turn", "u")
                os.kill(worker.pid, signal.SIGCONT)
                out, err = worker.communicate("go\n", timeout=120)
                assert out.split() == ["lost"], (out, err)
                assert session.revision("turn", "u") == before, "the fenced-off writer changed the session"
                counter.count += 1
                session.save("turn", "u", counter=counter)
            again = Counter()
            session.load("turn", "u", counter=again)
            assert again.count == 2, again
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGCONT)
            worker.kill()
            worker.communicate()


@pytest.mark.slow
def test_eight_processes_taking_turns_under_the_lease_lose_nothing(store: Store) -> None:
    """8 processes x 50 turns (lease, load, increment, plain save, release): exactly 400, no two turns overlap."""
    turns = run_lease_workers(store.kind, store.where, prefix=store.prefix)
    assert len(turns) == 400, len(turns)
    by_token = sorted(turns)
    assert len({token for token, _, _ in turns}) == 400, "two turns had the same fencing token"
    for (_, _, end), (_, start, _) in itertools.pairwise(by_token):
        assert end <= start, f"turns overlap: one ended at {end}, the next (greater token) started at {start}"
    with store.make() as session:
        counter = Counter()
        session.load("leased", "u", allow_not_exist=False, counter=counter)
    assert counter.count == 400, counter


@pytest.mark.slow
def test_a_killed_holder_blocks_nobody_past_its_ttl(store: Store) -> None:
    holder = subprocess.Popen(
        worker_args(HOLDER, store.kind, store.where, store.prefix, "2.0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        said, token = holder.stdout.readline().split()
        assert said == "held", said
    finally:
        holder.kill()
        holder.communicate()
    with store.make() as session:
        with pytest.raises(LeaseHeldError):
            session.lease("held", "u")  # still live right after the kill (ttl 2 s)
        with session.lease("held", "u", wait=3.0) as lease:  # ttl + 1: a LeaseHeldError after that is a failure
            assert lease.token > int(token)
