"""Append-only lists on Redis: deltas follow the document in the same key, under the same revision check."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import examples
from append_models import Agent, Msg, NumberedMemory, NumberedMsg, TextMemory
from test_appends import DELTAS, damaged_logs
from redis.asyncio import Redis

from statekit.errors import ConflictError, DocumentError, StateLoadError
from statekit.session.redis import RedisSession
from statekit.state.typed import typed_loads
from statekit.testing import RedisCluster, RedisServer, local_redis_cluster, local_redis_server

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def scriptless() -> Iterator[RedisServer]:
    """A redis-server without EVAL/EVALSHA: the WATCH/MULTI path."""
    with local_redis_server(options=["--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""]) as server:
        yield server


@pytest.fixture(params=["lua", "watch"])
def server(request: pytest.FixtureRequest) -> RedisServer:
    """The suite's redis-server (Lua compare-and-set), or one that runs no scripts."""
    found: RedisServer = request.getfixturevalue("redis_server" if request.param == "lua" else "scriptless")
    return found


def _session(server: RedisServer, prefix: str) -> RedisSession:
    return RedisSession(server.host, server.port, key_prefix=prefix)


async def _value(server: RedisServer, prefix: str) -> bytes:
    async with _session(server, prefix) as session:
        value = await session.get_client().get(session.session_key("chat"))
    assert isinstance(value, bytes)
    return value


async def _loaded(server: RedisServer, prefix: str) -> Agent:
    agent = Agent()
    async with _session(server, prefix) as session:
        await session.aload("chat", agent=agent, allow_not_exist=False)
    return agent


def test_appends_extend_the_value(server: RedisServer) -> None:
    async def main() -> None:
        prefix = f"appends-{uuid.uuid4().hex}:"
        async with _session(server, prefix) as session:
            agent = Agent()
            agent.memory.content.extend([Msg("user", str(index)) for index in range(50)])
            await session.asave("chat", agent=agent)
            document = await _value(server, prefix)
            for index in range(3):
                agent.memory.content.append(Msg("assistant", f"reply {index}"))
                await session.asave("chat", agent=agent)
            value = await _value(server, prefix)
            assert value.startswith(document + b"\n") and value.count(b"\n") == 5  # then the header and 3 deltas
            assert (await _loaded(server, prefix)).memory.content == agent.memory.content
            agent.memory.note = "changed"  # a full rewrite
            await session.asave("chat", agent=agent)
            assert b"\n" not in await _value(server, prefix)
            assert (await _loaded(server, prefix)).memory.note == "changed"

    asyncio.run(main())


def test_a_value_with_deltas_takes_the_typed_load_and_the_next_save_appends(server: RedisServer) -> None:
    async def main() -> None:
        prefix = f"appends-{uuid.uuid4().hex}:"
        async with _session(server, prefix) as session:
            agent = Agent()
            agent.memory.content.extend([Msg("user", str(index)) for index in range(5)])
            await session.asave("chat", agent=agent)
            agent.memory.content.append(Msg("assistant", "reply"))
            await session.asave("chat", agent=agent)
        stored = await _value(server, prefix)
        loaded, before = Agent(), typed_loads()
        async with _session(server, prefix) as session:
            await session.aload("chat", agent=loaded, allow_not_exist=False)
            assert typed_loads() == before + 1, "the load did not take the typed path"
            assert loaded.memory.content == agent.memory.content
            loaded.memory.content.append(Msg("user", "new"))
            await session.asave("chat", agent=loaded)
        value = await _value(server, prefix)
        old, new = stored.split(b"\n"), value.split(b"\n")  # the document, the header (its count), the deltas
        assert (new[0], new[2:-2], len(new)) == (old[0], old[2:-1], len(old) + 1)  # one delta line more
        assert orjson.loads(new[-2])[1:] == [[["agent", "memory", "content"], [{"role": "user", "text": "new"}]]]
        assert (await _loaded(server, prefix)).memory.content == loaded.memory.content

    asyncio.run(main())


@pytest.mark.parametrize("lead", ["", "x"])  # one of the two puts byte 511 inside an "é"
def test_a_client_that_decodes_responses_saves_deltas(server: RedisServer, lead: str) -> None:
    """AgentScope makes its client with decode_responses=True; the delta check reads
    the value's first 512 bytes, which may end inside a character."""

    async def main() -> None:
        client = Redis(host=server.host, port=server.port, decode_responses=True)
        async with RedisSession(client=client, key_prefix=f"decoded-{uuid.uuid4().hex}:") as session:
            agent = Agent()
            agent.memory.note = lead + "é" * 300
            agent.memory.content.append(Msg("user", "hello"))
            await session.asave("chat", agent=agent)
            agent.memory.content.append(Msg("user", "again"))
            await session.asave("chat", agent=agent)  # a delta
            loaded = Agent()
            await session.aload("chat", agent=loaded)
            assert loaded.memory.content == agent.memory.content
        await client.aclose()

    asyncio.run(main())


def test_a_problem_in_an_appended_item_names_the_appended_items(server: RedisServer) -> None:
    async def main() -> None:
        prefix = f"placed-{uuid.uuid4().hex}:"
        async with _session(server, prefix) as session:
            memory = NumberedMemory()
            for text in range(3):
                memory.content.append(NumberedMsg("u", text))
                await session.asave("chat", memory=memory)
            with pytest.raises(StateLoadError) as caught:
                await session.aload("chat", memory=TextMemory())
        key = session.session_key("chat")
        assert [(p.source, p.line) for p in caught.value.problems] == [
            (f"redis://{session.address} {key}", 1),
            (f"redis://{session.address} {key} (appended items)", 2),
            (f"redis://{session.address} {key} (appended items)", 3),
        ]

    asyncio.run(main())


def test_a_delta_over_another_writers_delta_conflicts(server: RedisServer) -> None:
    async def main() -> None:
        prefix = f"appends-{uuid.uuid4().hex}:"
        async with _session(server, prefix) as first, _session(server, prefix) as second:
            agent, other = Agent(), Agent()
            await first.asave("chat", agent=agent)
            await second.aload("chat", agent=other)
            other.memory.content.append(Msg("user", "second"))
            await second.asave("chat", agent=other)
            agent.memory.content.append(Msg("user", "first"))
            with pytest.raises(ConflictError):
                await first.asave("chat", agent=agent)
            assert [m.text for m in (await _loaded(server, prefix)).memory.content] == ["second"]

    asyncio.run(main())


def test_two_writers_appending_through_update_lose_nothing(server: RedisServer) -> None:
    async def writer(prefix: str, name: str) -> None:
        async with _session(server, prefix) as session:
            agent = Agent()
            for index in range(30):
                await session.aupdate(
                    "chat", lambda: agent.memory.content.append(Msg(name, str(index))), retries=1000, agent=agent
                )

    async def main() -> None:
        prefix = f"appends-{uuid.uuid4().hex}:"
        async with _session(server, prefix) as session:
            await session.asave("chat", agent=Agent())
        await asyncio.gather(writer(prefix, "a"), writer(prefix, "b"))
        content = (await _loaded(server, prefix)).memory.content
        for name in ("a", "b"):
            assert [m.text for m in content if m.role == name] == [str(index) for index in range(30)]

    asyncio.run(main())


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.sampled_from(["append", "pop", "replace", "note", "save", "reload"]), max_size=20))
def test_loads_always_equal_the_live_list(server: RedisServer, ops: list[str]) -> None:
    async def main() -> None:
        prefix = f"appends-{uuid.uuid4().hex}:"
        session, agent = _session(server, prefix), Agent()
        for step, op in enumerate([*ops, "save"]):
            content = agent.memory.content
            if op == "append":
                content.append(Msg("user", str(step)))
            elif op == "pop" and content:
                content.pop(0)
            elif op == "replace" and content:
                content[-1] = Msg("user", f"r{step}")
            elif op == "note":
                agent.memory.note = str(step)
            elif op in ("save", "reload"):
                await session.asave("chat", agent=agent)
                loaded = await _loaded(server, prefix)
                assert loaded.memory.content == agent.memory.content and loaded.memory.note == agent.memory.note
                if op == "reload":
                    await session.aclose()
                    session, agent = _session(server, prefix), Agent()
                    await session.aload("chat", agent=agent)
        await session.aclose()

    asyncio.run(main())


@pytest.mark.slow
async def test_appends_on_a_cluster() -> None:
    with local_redis_cluster() as cluster:
        await _appends_and_updates(cluster)


async def _appends_and_updates(cluster: RedisCluster) -> None:
    prefix = f"appends-{uuid.uuid4().hex}:"

    async def writer(name: str) -> None:
        async with RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=60) as session:
            agent = Agent()
            for index in range(20):
                await session.aupdate(
                    "chat", lambda: agent.memory.content.append(Msg(name, str(index))), retries=1000, agent=agent
                )

    await asyncio.gather(writer("a"), writer("b"))
    loaded = Agent()
    async with RedisSession.from_url(cluster.url, key_prefix=prefix, timeout=60) as session:
        await session.aload("chat", agent=loaded, allow_not_exist=False)
        value = await session.get_client().get(session.session_key("chat"))
    assert isinstance(value, bytes) and value.count(b"\n") > 2  # deltas, not only rewrites
    for name in ("a", "b"):
        assert [m.text for m in loaded.memory.content if m.role == name] == [str(index) for index in range(20)]


def test_every_damaged_value_loads_the_state_last_saved_or_is_refused_with_its_position(server: RedisServer) -> None:
    """The damage cases of the file test (test_appends.py), on the deltas that follow the
    document in a value: a value without its header line is one of them (removed-0)."""

    async def saved(session: RedisSession, agent: Agent, texts: list[str]) -> None:
        for text in texts:
            agent.memory.content.append(Msg("user", text))
            await session.asave("chat", agent=agent)

    async def main() -> None:
        prefix, fork_prefix, other_prefix = (f"damage-{uuid.uuid4().hex}:" for _ in range(3))
        async with _session(server, prefix) as session, _session(server, other_prefix) as other:
            agent, stranger = Agent(), Agent()
            await saved(session, agent, ["first"])  # a full write, then one delta a save
            await saved(other, stranger, ["other", "d1", "d2", "d3", "d4"])
            await saved(session, agent, ["d1", "d2"])
            client = session.get_client()
            await client.set(f"{fork_prefix}{session.SESSION_KEY.format(user_id='default_user', session_id='chat')}",
                             await _value(server, prefix))
            async with _session(server, fork_prefix) as forked_session:
                forked = Agent()
                await forked_session.aload("chat", agent=forked)
                await saved(forked_session, forked, ["fork 3", "fork 4"])
            await saved(session, agent, ["d3", "d4"])
            document, _, log = (await _value(server, prefix)).partition(b"\n")
            lines = log.splitlines(keepends=True)
            assert len(lines) == DELTAS + 1  # the header and the four deltas
            foreign = (await _value(server, other_prefix)).partition(b"\n")[2].splitlines(keepends=True)
            fork = (await _value(server, fork_prefix)).partition(b"\n")[2].splitlines(keepends=True)
            meta = orjson.loads(document)["__statekit__"]
            values = {name: document + b"\n" + data for name, data in damaged_logs(lines, foreign, fork).items()}
            values["token-removed"] = document.replace(f',"log":"{meta["log"]}"'.encode(), b"") + b"\n" + log
            values["token-changed"] = document.replace(meta["log"].encode(), b"0" * 16) + b"\n" + log
            assert len(values) >= 51
            key = session.session_key("chat")
            outcomes = {}
            for name, value in values.items():
                await client.set(key, value)
                loader = _session(server, prefix)
                try:
                    outcomes[name] = await _exact_or_refused(loader, agent)
                finally:
                    await loader.aclose()
            assert [name for name, err in outcomes.items() if err is None] == []
            source = f"{session._source(session.key('chat'))} (appended items)"  # noqa: SLF001 - the name errors give
            for name in damaged_logs(lines, foreign, fork):
                err = outcomes[name]
                assert err is not None and (err.source, err.line is not None) == (source, True), (name, str(err))

    asyncio.run(main())


async def _exact_or_refused(session: RedisSession, expected: Agent) -> DocumentError | None:
    loaded = Agent()
    try:
        await session.aload("chat", agent=loaded)
    except DocumentError as err:
        assert err.source, err
        return err
    assert loaded.memory.content == expected.memory.content and loaded.events == expected.events
    return None
