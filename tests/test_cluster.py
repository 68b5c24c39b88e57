"""RedisSession on a real three-master Redis Cluster: the contract, races, a node going down;
and how the throw-away servers choose their ports."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from statekit.errors import BackendUnavailableError, LeaseHeldError
from statekit.session import SessionBase
from statekit.session.redis import RedisSession
from redis.asyncio.cluster import RedisCluster as ClusterClient
from statekit.testing import _servers
from statekit.testing import Counter, RedisCluster, SessionContract, local_redis_cluster, local_redis_server
from workers import run_workers

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # a cluster takes seconds to form: not in the quick loop

TIMEOUT = 60
"""Seconds one operation may take: on a loaded shared machine a cluster can stall past the default 5 s
(a stopped node still fails at once: its connections are refused)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    """One cluster for the module's tests (the node-stopping test starts its own)."""
    with local_redis_cluster() as running:
        yield running


class TestClusterContract(SessionContract):
    """statekit.testing's whole contract (revisions and conflicts included) on the cluster."""

    @pytest.fixture(autouse=True)
    def _use_cluster(self, cluster: RedisCluster) -> None:
        self._url, self._prefix = cluster.url, f"contract-{uuid.uuid4().hex}:"

    def make_session(self) -> SessionBase:
        return RedisSession.from_url(self._url, key_prefix=self._prefix, timeout=TIMEOUT)

    @pytest.mark.slow
    def test_large_session(self) -> None:
        super().test_large_session()


async def test_sessions_spread_over_every_master_and_list_together(cluster: RedisCluster) -> None:
    async with RedisSession.from_url(cluster.url, key_prefix="spread:", timeout=TIMEOUT) as session:
        ids = [f"s{index}" for index in range(30)]
        for index, session_id in enumerate(ids):
            await session.asave(session_id, "u", counter=Counter(count=index))
        assert len({_node_port(session, session_id) for session_id in ids}) == 3
        assert await session.alist_sessions("u") == sorted(ids)


async def test_a_missing_load_names_the_near_matches_across_every_master(
    cluster: RedisCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The near-match hint of a missing session looks at every master of a cluster (bounded rounds)."""
    async with RedisSession.from_url(cluster.url, key_prefix=f"near-{uuid.uuid4().hex}:", timeout=TIMEOUT) as session:
        ids: list[str] = []
        while len({_node_port(session, session_id) for session_id in ids}) < 3:  # ids on every master
            assert len(ids) < 200, "the key prefix put 200 ids on fewer than three masters"
            ids.append(f"chat-{len(ids)}")
            await session.asave(ids[-1], "alice", counter=Counter(count=len(ids)))
        with caplog.at_level("INFO", logger="statekit"):
            for session_id in ids:
                assert await session.aload(session_id, "bob", counter=Counter()) == {}
            assert await session.aload("caht-0", "alice", counter=Counter()) == {}
            assert await session.aload("first-run", "carol", counter=Counter()) == {}
    records = [(record.levelname, record.getMessage()) for record in caplog.records if "does not exist" in record.getMessage()]
    assert len(records) == len(ids) + 2, records
    for level, message in records[: len(ids)]:
        assert level == "WARNING" and "the same id under user_id='alice'" in message, message
    assert records[-2][0] == "WARNING" and "session 'chat-0' of this user" in records[-2][1], records[-2]
    assert records[-1][0] == "INFO" and "Did you mean" not in records[-1][1], records[-1]


def test_eight_processes_lose_no_update_on_the_cluster(cluster: RedisCluster) -> None:
    prefix = f"proof-{uuid.uuid4().hex}:"
    run_workers("redis", cluster.url, prefix=prefix)
    counter = Counter()
    with RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT) as session:
        session.load("shared", "u", allow_not_exist=False, counter=counter)
    assert counter.count == 8 * 50


async def test_a_stopped_master_fails_its_slots_only_and_nothing_is_half_written() -> None:
    with local_redis_cluster() as own:
        async with RedisSession.from_url(own.url, timeout=TIMEOUT) as session:
            ids = [f"s{index}" for index in range(24)]
            for index, session_id in enumerate(ids):
                await session.asave(session_id, "u", counter=Counter(count=index))
            node_of = {session_id: _node_port(session, session_id) for session_id in ids}
            down = own.ports[1]
            own.stop_node(down)
            for index, session_id in enumerate(ids):
                counter = Counter()
                if node_of[session_id] == down:
                    with pytest.raises(BackendUnavailableError, match=f"cluster node 127.0.0.1:{down}"):
                        await session.aload(session_id, "u", counter=counter)
                    assert counter.count == 0
                else:
                    await session.aupdate(session_id, _bump(counter), user_id="u", counter=counter)
                    check = Counter()
                    await session.aload(session_id, "u", counter=check)
                    assert check.count == index + 1


def _node_port(session: RedisSession, session_id: str) -> int:
    client = session.get_client()
    assert isinstance(client, ClusterClient)
    node = client.get_node_from_key(session.session_key(session_id, "u"))
    assert node is not None
    return int(node.port)


def _bump(counter: Counter) -> Callable[[], None]:
    def bump() -> None:
        counter.count += 1

    return bump


async def test_the_ttl_slides_on_the_cluster_too(cluster: RedisCluster) -> None:
    prefix = f"ttl-{uuid.uuid4().hex}:"
    async with RedisSession.from_url(cluster.url, key_prefix=prefix, key_ttl=300, timeout=TIMEOUT) as session:
        client, key = session.get_client(), session.session_key("s", "u")
        await session.asave("s", "u", counter=Counter(count=1))
        await client.expire(key, 5)
        await session.aload("s", "u", counter=Counter())
        assert 295 <= await client.ttl(key) <= 300
        await client.expire(key, 5)
        await session.asave("s", "u", counter=Counter(count=2))  # the compare-and-set path
        assert 295 <= await client.ttl(key) <= 300


async def test_thirty_two_tasks_with_their_own_objects_lose_no_update(cluster: RedisCluster) -> None:
    prefix = f"tasks-{uuid.uuid4().hex}:"

    async def worker() -> None:
        counter = Counter()
        async with RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT) as session:
            for _ in range(5):
                await session.aupdate("shared", _bump(counter), user_id="u", retries=200, counter=counter)

    await asyncio.gather(*(worker() for _ in range(32)))
    final = Counter()
    async with RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT) as session:
        await session.aload("shared", "u", allow_not_exist=False, counter=final)
    assert final.count == 160


@pytest.mark.slow
async def test_a_fresh_session_object_serves_a_cold_burst_of_sixty_four_tasks(cluster: RedisCluster) -> None:
    """redis-py's cluster client learns its slot map on the first command, and concurrent first
    commands raced: about half the updates failed, some landed though they raised, one ran twice.
    The same after the client resets (here by closing its connections)."""
    prefix = f"cold-{uuid.uuid4().hex}:"
    calls = [0] * 64
    acknowledged = [0] * 64

    async def worker(session: RedisSession, index: int) -> None:
        counter = Counter()

        def bump() -> None:
            calls[index] += 1
            counter.count += 1

        for _ in range(10):
            await session.aupdate(f"s{index}", bump, user_id="u", counter=counter)
            acknowledged[index] += 1

    async with RedisSession.from_url(cluster.url, key_prefix=prefix) as session:  # no command before the burst
        outcomes = await asyncio.gather(*(worker(session, index) for index in range(64)), return_exceptions=True)
        assert [outcome for outcome in outcomes if outcome is not None] == []
        await session.get_client().aclose()  # the client resets: its slot map is learned again
        outcomes = await asyncio.gather(*(worker(session, index) for index in range(64)), return_exceptions=True)
    assert [outcome for outcome in outcomes if outcome is not None] == []
    stored = [Counter() for _ in range(64)]
    async with RedisSession.from_url(cluster.url, key_prefix=prefix) as session:
        for index, counter in enumerate(stored):
            await session.aload(f"s{index}", "u", allow_not_exist=False, counter=counter)
    assert sum(acknowledged) == 1280
    assert [counter.count for counter in stored] == [20] * 64  # none lost, none applied twice
    assert calls == [20] * 64  # every task's keys are its own: no conflict, so mutate() ran once per update



@pytest.mark.parametrize("user", ["u", "{tag}", "a{b", "x}y", "{}"], ids=["plain", "tag", "open", "close", "empty"])
async def test_a_write_id_lives_in_its_value_s_slot_whatever_braces_the_ids_hold(
    cluster: RedisCluster, user: str
) -> None:
    """The compare-and-set and delete scripts touch the value and its write id together, which a
    cluster refuses (CROSSSLOT) unless both keys hash alike: a tag is added where the key has none."""
    prefix = f"ids-{uuid.uuid4().hex}:"
    async with RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT) as session:
        counter = Counter()
        await session.asave("s", user, counter=counter)
        await session.aupdate("s", _bump(counter), user_id=user, counter=counter)  # a compare-and-set
        client = session.get_client()
        assert isinstance(client, ClusterClient)
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", target_nodes=ClusterClient.PRIMARIES)]
        assert len(keys) == 2  # the value and its write id
        assert len({client.keyslot(key) for key in keys}) == 1
        assert await session.alist_sessions(user) == ["s"]
        assert await session.adelete("s", user) is True
        assert not await session.aexists("s", user)


@pytest.mark.parametrize("user", ["u", "{tag}", "a{b", "{}"], ids=["plain", "tag", "open", "empty"])
async def test_a_lease_lives_in_its_session_s_slot_whatever_braces_the_ids_hold(cluster: RedisCluster, user: str) -> None:
    """The lease, its token counter, the value and its write ids are one script's keys: one slot (else CROSSSLOT)."""
    prefix = f"lease-{uuid.uuid4().hex}:"
    async with (
        RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT) as session,
        RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT) as other,
    ):
        counter = Counter()
        async with session.alease("s", user, ttl=60) as lease:
            await session.asave("s", user, counter=counter)
            await session.aupdate("s", _bump(counter), user_id=user, counter=counter)  # a compare-and-set
            client = session.get_client()
            assert isinstance(client, ClusterClient)
            keys = [key async for key in client.scan_iter(match=f"{prefix}*", target_nodes=ClusterClient.PRIMARIES)]
            assert len(keys) == 4, keys  # the value, its write ids, its lease and its token counter
            assert len({client.keyslot(key) for key in keys}) == 1
            with pytest.raises(LeaseHeldError):
                await other.adelete("s", user)
            assert await session.alist_sessions(user) == ["s"]
        async with other.alease("s", user, ttl=60) as again:
            assert again.token == lease.token + 1
            assert await other.adelete("s", user) is True

@pytest.mark.slow
async def test_an_update_whose_node_pauses_before_the_save_applies_its_change_once() -> None:
    """The cluster client sent the script again after socket_timeout (2 s): a conflict made up, two increments."""
    with local_redis_cluster() as own:
        async with RedisSession.from_url(own.url, timeout=10) as session:  # room for a loaded machine
            counter = Counter()
            await session.asave("s", "u", counter=counter)
            await session.aload("s", "u", counter=counter)
            await session.asave("s", "u", counter=counter)  # a compare-and-set: the node knows the script
            pid = own.pid(_node_port(session, "s"))
            calls, timers = [0], list[threading.Timer]()

            def bump() -> None:
                counter.count += 1
                calls[0] += 1
                if not timers:  # between the update's load and its save
                    os.kill(pid, signal.SIGSTOP)
                    timers.append(threading.Timer(4.5, os.kill, (pid, signal.SIGCONT)))
                    timers[0].start()

            try:
                await session.aupdate("s", bump, user_id="u", counter=counter)
            finally:
                for timer in timers:
                    timer.join()
                os.kill(pid, signal.SIGCONT)
            stored = Counter()
            await session.aload("s", "u", counter=stored)
        assert (calls, stored.count) == ([1], 1)  # mutate() ran once, and its change is stored once


def test_every_port_of_the_cluster_is_distinct(cluster: RedisCluster) -> None:
    """The nodes' ports and their cluster bus ports: six ports, chosen together (issue 23)."""
    command = ["redis-cli", "-h", cluster.host, "-p", str(cluster.ports[0]), "CLUSTER", "NODES"]  # redis-py drops the bus ports
    text = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
    addresses = [line.split()[1].split(",")[0] for line in text.splitlines() if line.strip()]  # 127.0.0.1:port@bus
    ports = [int(part) for address in addresses for part in address.rsplit(":", 1)[1].split("@")]
    assert len(addresses) == 3 and sorted(ports[0::2]) == sorted(cluster.ports)
    assert len(set(ports)) == 6


def test_a_server_whose_port_was_taken_meanwhile_starts_on_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another program takes the chosen port before redis-server binds it: a fresh port is chosen."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        choose = _servers.free_ports
        chosen: list[list[int]] = []

        def first_the_taken_port(count: int) -> list[int]:
            ports = [taken] + choose(count - 1) if not chosen else choose(count)
            chosen.append(ports)
            return ports

        monkeypatch.setattr(_servers, "free_ports", first_the_taken_port)
        with local_redis_server() as server, redis.Redis(host=server.host, port=server.port) as client:
            assert client.ping() is True
    assert len(chosen) == 2 and chosen[0] == [taken] and server.port != taken
