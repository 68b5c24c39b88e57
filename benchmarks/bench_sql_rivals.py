"""statekit's SQL sessions against LangGraph's checkpointers and the OpenAI Agents SDK's sessions (issue 28).

``python benchmarks/bench_sql_rivals.py [--quick]`` (``pip install -e '.[bench-rivals]'``)

On one throw-away PostgreSQL server (``statekit.testing.local_postgres_server``)
and on SQLite files in one temporary folder, each implementation saves and
loads the same conversation (the benchmark agent of benchmarks/_agents.py) of
1,000 and 10,000 messages, then times a turn: one message appended to a
10,000-message history. Interleaved run by run, medians, GC on; ratios are to
statekit (above 1.00x: slower than statekit).

What each one stores, and how far the comparison is fair:

- statekit ``PostgresSession`` / ``SQLiteSession``: the whole typed agent (its
  ``Msg`` records, name, prompt, tool groups) as one JSON document with a
  compare-and-set revision; a load builds the typed ``Msg`` objects again (the
  rivals hand back plain dicts, less work). The turn saves a ``Memory`` whose
  ``content`` is ``append_only``: only the new message is written.
- LangGraph ``AsyncPostgresSaver`` / ``AsyncSqliteSaver`` (langgraph-checkpoint-*,
  its public ``aput`` / ``aget_tuple``): a checkpoint whose ``messages``
  channel holds the messages as plain dicts (the same keys and values statekit
  writes), serialized by its default ``JsonPlusSerializer`` (msgpack). A graph
  with ``MessagesState`` would hold LangChain message objects, which cost it
  more; dicts favour LangGraph. Each save is a new checkpoint (LangGraph keeps
  every one, for time travel): a turn writes the whole ``messages`` list again,
  as a graph does when that channel changes. No compare-and-set.
- OpenAI Agents SDK ``SQLAlchemySession`` (asyncpg, as its docs show) and its
  ``SQLiteSession``: one row per item. Items are the same message dicts (a real
  item would be ``{"role", "content"}`` with fewer bytes; the extra keys only
  make its rows as large as statekit's). The SDK has no "save this history":
  a save is ``clear_session()`` + ``add_items(all)``, a turn ``add_items([one])``,
  a load ``get_items()``. No revision, no compare-and-set.

A rival that does not import is skipped, and the script says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agents import Agent, floor_document, make_agent  # noqa: E402
from _rivals import optional  # noqa: E402
from _timing import Work, interleaved, table  # noqa: E402
from bench_appends import Memory, Messages  # noqa: E402

from statekit.session.postgres import PostgresSession  # noqa: E402
from statekit.session.sqlite import SQLiteSession  # noqa: E402
from statekit.testing import local_postgres_server  # noqa: E402

TURN_SIZE = 10_000


class Impl:
    """One implementation: save a history, load it back, append one message to it."""

    name = ""

    async def save(self, key: str, agent: Agent) -> None:
        raise NotImplementedError

    async def load(self, key: str, agent: Agent) -> int:
        """Load the history; return how many messages came back."""
        raise NotImplementedError

    async def turn(self, key: str, history: list[Any], message: dict[str, Any]) -> None:
        """Append ``message`` (``history``'s last, as a dict) to the saved history; the first call saves ``history``."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release connections."""


class Statekit(Impl):
    """statekit's session: the agent in one document; the turn on an append-only ``Memory``."""

    def __init__(self, name: str, session: PostgresSession | SQLiteSession) -> None:
        self.name, self.session = name, session
        self.memories: dict[str, Memory] = {}
        self.loaded = make_agent(1)

    async def save(self, key: str, agent: Agent) -> None:
        await self.session.asave(key, agent=agent)

    async def load(self, key: str, agent: Agent) -> int:
        if key in self.memories:  # the turn's session holds a memory
            memory = Memory()
            await self.session.aload(key, memory=memory)
            return len(memory.content)
        await self.session.aload(key, agent=self.loaded)
        return len(self.loaded.memory.content)

    async def turn(self, key: str, history: list[Any], message: dict[str, Any]) -> None:
        memory = self.memories.get(key)
        if memory is None:
            memory = self.memories[key] = Memory(content=list(history))
        else:
            memory.content.append(history[-1])
        await self.session.asave(key, memory=memory)

    async def close(self) -> None:
        await self.session.aclose()


def _messages(agent: Agent) -> list[dict[str, Any]]:
    """The agent's messages as the plain dicts statekit writes (sharing their blobs: every rival encodes at once)."""
    return list(floor_document(agent)["agent"]["memory"]["content"])


def _message(message: Any) -> dict[str, Any]:
    return {"id": message.id, "name": message.name, "role": message.role, "content": message.content,
            "metadata": message.metadata, "timestamp": message.timestamp}


class LangGraph(Impl):
    """A LangGraph checkpointer: a new checkpoint per save, its ``messages`` channel the whole list."""

    def __init__(self, name: str, saver: Any, base: Any) -> None:
        self.name, self.saver, self.base = name, saver, base
        self.versions: dict[str, Any] = {}
        self.histories: dict[str, list[dict[str, Any]]] = {}

    async def _put(self, key: str, messages: list[dict[str, Any]]) -> None:
        version = self.saver.get_next_version(self.versions.get(key), None)
        checkpoint = self.base.empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": version}
        config = {"configurable": {"thread_id": key, "checkpoint_ns": ""}}
        await self.saver.aput(config, checkpoint, {"source": "loop", "step": 1}, {"messages": version})
        self.versions[key] = version

    async def save(self, key: str, agent: Agent) -> None:
        await self._put(key, _messages(agent))

    async def load(self, key: str, agent: Agent) -> int:
        found = await self.saver.aget_tuple({"configurable": {"thread_id": key, "checkpoint_ns": ""}})
        return len(found.checkpoint["channel_values"]["messages"])

    async def turn(self, key: str, history: list[Any], message: dict[str, Any]) -> None:
        messages = self.histories.get(key)
        if messages is None:
            messages = self.histories[key] = [_message(m) for m in history]
        else:
            messages.append(message)
        await self._put(key, messages)


class OpenAISDK(Impl):
    """An OpenAI Agents SDK session (one per conversation): one row per item."""

    def __init__(self, name: str, make: Callable[[str], Any]) -> None:
        self.name, self.make = name, make
        self.sessions: dict[str, Any] = {}

    def _session(self, key: str) -> Any:
        if key not in self.sessions:
            self.sessions[key] = self.make(key)
        return self.sessions[key]

    async def save(self, key: str, agent: Agent) -> None:
        session = self._session(key)
        await session.clear_session()
        await session.add_items(_messages(agent))

    async def load(self, key: str, agent: Agent) -> int:
        return len(await self._session(key).get_items())

    async def turn(self, key: str, history: list[Any], message: dict[str, Any]) -> None:
        if key not in self.sessions:  # the first call: the history so far
            await self._session(key).add_items([_message(m) for m in history])
        else:
            await self.sessions[key].add_items([message])

    async def close(self) -> None:
        for session in self.sessions.values():
            engine = getattr(session, "engine", None)
            if engine is not None:
                await engine.dispose()
            elif hasattr(session, "close"):
                session.close()


def _skip(what: str, package: str) -> None:
    print(f"  skipped {what}: it does not import (pip install {package}, or -e '.[bench-rivals]')")


async def _postgres_impls(dsn: str, stack: contextlib.AsyncExitStack) -> list[Impl]:
    impls: list[Impl] = [Statekit("statekit PostgresSession", PostgresSession.from_url(dsn, table="rivals", timeout=120))]
    saver_module, base = optional("langgraph.checkpoint.postgres.aio"), optional("langgraph.checkpoint.base")
    if saver_module is None or base is None:
        _skip("LangGraph AsyncPostgresSaver", "langgraph-checkpoint-postgres")
    else:
        saver = await stack.enter_async_context(saver_module.AsyncPostgresSaver.from_conn_string(dsn))
        await saver.setup()
        impls.append(LangGraph("LangGraph AsyncPostgresSaver", saver, base))
    sdk = optional("agents.extensions.memory.sqlalchemy_session")
    if sdk is None or optional("asyncpg") is None:
        _skip("OpenAI SDK SQLAlchemySession", "'openai-agents[sqlalchemy]' asyncpg")
    else:
        url = dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
        impls.append(OpenAISDK("OpenAI SQLAlchemySession", lambda key: sdk.SQLAlchemySession.from_url(key, url=url, create_tables=True)))
    return impls


async def _sqlite_impls(folder: Path, stack: contextlib.AsyncExitStack) -> list[Impl]:
    impls: list[Impl] = [Statekit("statekit SQLiteSession", SQLiteSession(folder / "statekit.db"))]
    saver_module, base = optional("langgraph.checkpoint.sqlite.aio"), optional("langgraph.checkpoint.base")
    if saver_module is None or base is None or optional("aiosqlite") is None:
        _skip("LangGraph AsyncSqliteSaver", "langgraph-checkpoint-sqlite")
    else:
        saver = await stack.enter_async_context(saver_module.AsyncSqliteSaver.from_conn_string(str(folder / "langgraph.db")))
        await saver.setup()
        impls.append(LangGraph("LangGraph AsyncSqliteSaver", saver, base))
    agents = optional("agents")
    if agents is None:
        _skip("OpenAI SDK SQLiteSession", "openai-agents")
    else:
        path = folder / "openai.db"
        impls.append(OpenAISDK("OpenAI SQLiteSession", lambda key: agents.SQLiteSession(key, path)))
    return impls


def _compare(runner: asyncio.Runner, where: str, impls: list[Impl], sizes: list[int], runs: int) -> None:
    def timed(make: Callable[[Impl], Coroutine[Any, Any, object]]) -> dict[str, Work]:
        return {impl.name: (lambda impl=impl: runner.run(make(impl))) for impl in impls}  # type: ignore[misc]

    for n in sizes:
        agent, key = make_agent(n), f"chat-{n}"
        counts: dict[str, int] = {}

        async def load(impl: Impl) -> None:
            counts[impl.name] = await impl.load(key, agent)

        columns = {
            "save": interleaved(timed(lambda impl: impl.save(key, agent)), runs),
            "load": interleaved(timed(load), runs),
        }
        assert set(counts.values()) == {n}, counts
        table(f"{where}, one conversation of {n:,} messages (ms, GC on; ratio to statekit)", columns, impls[0].name)
    messages = Messages().take(TURN_SIZE + runs + 1)  # the history, then a new message per turn (warm-up + runs)
    turns: dict[str, Work] = {}
    for impl in impls:
        own = messages[:TURN_SIZE]  # each appends to its own copy of the history
        runner.run(impl.turn("turn", own, {}))  # the first call writes the 10,000 messages

        def one(impl: Impl = impl, own: list[Any] = own) -> None:
            own.append(messages[len(own)])
            runner.run(impl.turn("turn", own, _message(own[-1])))

        turns[impl.name] = one
    times = interleaved(turns, runs)
    table(f"{where}, a turn: one message appended to {TURN_SIZE:,} (ms, GC on; ratio to statekit)", {"turn": times}, impls[0].name)
    counts = {impl.name: runner.run(impl.load("turn", make_agent(1))) for impl in impls}
    assert set(counts.values()) == {TURN_SIZE + runs + 1}, counts


def _on(where: str, make: Callable[[contextlib.AsyncExitStack], Coroutine[Any, Any, list[Impl]]], sizes: list[int], runs: int) -> None:
    with asyncio.Runner() as runner:
        stack = contextlib.AsyncExitStack()
        impls = runner.run(make(stack))
        try:
            _compare(runner, where, impls, sizes, runs)
        finally:
            for impl in impls:
                runner.run(impl.close())
            runner.run(stack.aclose())


def run_sql_rivals(sizes: list[int], runs: int) -> None:
    """Print the tables: PostgreSQL first, then SQLite."""
    with local_postgres_server() as server:
        _on("PostgreSQL", lambda stack: _postgres_impls(server.dsn, stack), sizes, runs)
    with tempfile.TemporaryDirectory() as folder:
        _on("SQLite", lambda stack: _sqlite_impls(Path(folder), stack), sizes, runs)


if __name__ == "__main__":
    run_sql_rivals([1_000, 10_000], 3 if "--quick" in sys.argv else 7)
