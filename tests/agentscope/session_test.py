# -*- coding: utf-8 -*-
"""Session module tests.

Ported from AgentScope 1.0.21's tests/session_test.py: only the imports
changed (AgentScope's agent, memory, model and toolkit classes are the
stand-ins of agentscope_like.py). AgentScope's TablestoreSession has no
statekit twin; its generic tests run on JSONSession and RedisSession instead
(see the note on TablestoreSessionTest).
"""
import os
import uuid
from typing import Any, Union
from unittest import IsolatedAsyncioTestCase

import pytest

from agentscope_like import (
    AgentBase,
    DashScopeChatFormatter,
    DashScopeChatModel,
    InMemoryMemory,
    Msg,
    ReActAgent,
    Toolkit,
)
from statekit.session import JSONSession
from statekit.session.redis import RedisSession
from statekit.testing import RedisServer


class MyAgent(AgentBase):
    """Test agent class."""

    def __init__(self) -> None:
        """Initialize the test agent."""
        super().__init__()
        self.name = "Friday"
        self.sys_prompt = "A helpful assistant."
        self.memory = InMemoryMemory()

        self.register_state("name")
        self.register_state("sys_prompt")

    async def reply(self, msg: Msg) -> None:
        """Reply to the message."""

    async def observe(self, msg: Msg) -> None:
        """Observe the message."""
        await self.memory.add(msg)

    async def handle_interrupt(
        self,
        msg: Union[Msg, list[Msg], None] = None,
    ) -> Msg:
        """Handle interrupt."""


class SessionTest(IsolatedAsyncioTestCase):
    """Test cases for the session module."""

    async def asyncSetUp(self) -> None:
        """Set up the test case."""
        session_file = "./user_1.json"
        if os.path.exists(session_file):
            os.remove(session_file)

    async def test_session_base(self) -> None:
        """Test the SessionBase class."""
        session = JSONSession(
            save_dir="./",
        )

        agent1 = ReActAgent(
            name="Friday",
            sys_prompt="A helpful assistant.",
            model=DashScopeChatModel(api_key="xxx", model_name="qwen_max"),
            formatter=DashScopeChatFormatter(),
            toolkit=Toolkit(),
            memory=InMemoryMemory(),
        )
        agent2 = MyAgent()

        await agent2.memory.add(
            Msg(
                "Alice",
                "Hi!",
                "user",
            ),
        )

        await session.save_session_state(
            session_id="user_1",
            agent1=agent1,
            agent2=agent2,
        )

        # Mutate local state to verify load really works
        agent1.name = "Changed"
        agent2.sys_prompt = "Changed prompt"

        # Load back
        await session.load_session_state(
            session_id="user_1",
            agent1=agent1,
            agent2=agent2,
        )

        self.assertEqual(agent1.name, "Friday")
        self.assertEqual(agent2.sys_prompt, "A helpful assistant.")

    async def asyncTearDown(self) -> None:
        """Clean up after the test."""
        # Remove the session file if it exists
        session_file = "./user_1.json"
        if os.path.exists(session_file):
            os.remove(session_file)


class RedisSessionTest(IsolatedAsyncioTestCase):
    """Test cases for the redis session module (with fake redis)."""

    async def asyncSetUp(self) -> None:
        # Use fakeredis (async)
        try:
            import fakeredis.aioredis  # type: ignore
        except ImportError as e:
            raise ImportError(
                "fakeredis is required for this test. "
                "Please install it via `pip install fakeredis`.",
            ) from e

        self._redis = fakeredis.aioredis.FakeRedis()
        self.session = RedisSession(
            connection_pool=self._redis.connection_pool,
        )

    async def test_redis_session_save_and_load(self) -> None:
        """Test the RedisSession class."""
        agent1 = ReActAgent(
            name="Friday",
            sys_prompt="A helpful assistant.",
            model=DashScopeChatModel(api_key="xxx", model_name="qwen_max"),
            formatter=DashScopeChatFormatter(),
            toolkit=Toolkit(),
            memory=InMemoryMemory(),
        )
        agent2 = MyAgent()

        await agent2.memory.add(Msg("Alice", "Hi!", "user"))

        # Save
        await self.session.save_session_state(
            session_id="user_1",
            agent1=agent1,
            agent2=agent2,
        )

        # Mutate local state to verify load really works
        agent1.name = "Changed"
        agent2.sys_prompt = "Changed prompt"

        # Load back
        await self.session.load_session_state(
            session_id="user_1",
            agent1=agent1,
            agent2=agent2,
        )

        self.assertEqual(agent1.name, "Friday")
        self.assertEqual(agent2.sys_prompt, "A helpful assistant.")

    async def asyncTearDown(self) -> None:
        # close clients
        await self.session.close()
        await self._redis.close()


class TablestoreSessionTest(IsolatedAsyncioTestCase):
    """The backend-independent tests of AgentScope's TablestoreSessionTest.

    AgentScope runs them on a TablestoreSession over a mocked store; here
    ``self.session`` is a statekit backend (JSONSession below, RedisSession in
    the subclass). Two changes besides the imports: the logger is statekit's
    ("statekit" for AgentScope's "as"), and test_close /
    test_async_context_manager, which inspect TablestoreSession's private
    attributes, are not ported.
    """

    session: Any

    async def asyncSetUp(self) -> None:
        """Create the session under test."""
        import tempfile

        self._tmp = tempfile.TemporaryDirectory()
        self.session = JSONSession(self._tmp.name)

    async def test_save_and_load_session_state(self) -> None:
        """Test saving and loading session state round-trip."""
        agent = MyAgent()
        await agent.memory.add(Msg("Alice", "Hi!", "user"))

        await self.session.save_session_state(
            session_id="sess_1",
            user_id="user_1",
            agent=agent,
        )

        agent.name = "Changed"
        agent.sys_prompt = "Changed prompt"

        await self.session.load_session_state(
            session_id="sess_1",
            user_id="user_1",
            agent=agent,
        )

        self.assertEqual(agent.name, "Friday")
        self.assertEqual(agent.sys_prompt, "A helpful assistant.")

    async def test_load_before_save_session_not_exist(self) -> None:
        """Test that load before any save reports session not found."""
        agent = MyAgent()

        with self.assertLogs("statekit", level="INFO") as log_context:
            await self.session.load_session_state(
                session_id="nonexistent",
                user_id="user_1",
                allow_not_exist=True,
                agent=agent,
            )

        self.assertTrue(
            any("does not exist" in msg for msg in log_context.output),
        )

    async def test_load_before_save_raises_when_not_allowed(self) -> None:
        """Test that load raises ValueError when allow_not_exist=False."""
        agent = MyAgent()

        with self.assertRaises(ValueError):
            await self.session.load_session_state(
                session_id="nonexistent",
                user_id="user_1",
                allow_not_exist=False,
                agent=agent,
            )

    async def test_lifecycle_load_save_load(self) -> None:
        """Test full lifecycle: load (not exist) -> save -> load (exists)."""
        agent = MyAgent()
        original_name = agent.name
        original_prompt = agent.sys_prompt

        with self.assertLogs("statekit", level="INFO") as log_before:
            await self.session.load_session_state(
                session_id="lifecycle_sess",
                user_id="user_1",
                allow_not_exist=True,
                agent=agent,
            )

        self.assertTrue(
            any("does not exist" in msg for msg in log_before.output),
        )
        self.assertEqual(agent.name, original_name)
        self.assertEqual(agent.sys_prompt, original_prompt)

        await agent.memory.add(Msg("Bob", "Hello!", "user"))
        await self.session.save_session_state(
            session_id="lifecycle_sess",
            user_id="user_1",
            agent=agent,
        )

        agent.name = "Mutated"
        agent.sys_prompt = "Mutated prompt"

        await self.session.load_session_state(
            session_id="lifecycle_sess",
            user_id="user_1",
            agent=agent,
        )

        self.assertEqual(agent.name, original_name)
        self.assertEqual(agent.sys_prompt, original_prompt)

    async def test_save_overwrites_previous_state(self) -> None:
        """Test that saving again overwrites the previous state."""
        agent = MyAgent()

        await self.session.save_session_state(
            session_id="overwrite_sess",
            user_id="user_1",
            agent=agent,
        )

        agent.name = "UpdatedName"
        agent.sys_prompt = "Updated prompt"

        await self.session.save_session_state(
            session_id="overwrite_sess",
            user_id="user_1",
            agent=agent,
        )

        agent.name = "Garbage"
        agent.sys_prompt = "Garbage"

        await self.session.load_session_state(
            session_id="overwrite_sess",
            user_id="user_1",
            agent=agent,
        )

        self.assertEqual(agent.name, "UpdatedName")
        self.assertEqual(agent.sys_prompt, "Updated prompt")

    async def asyncTearDown(self) -> None:
        """Close the session and remove its files."""
        await self.session.close()
        self._tmp.cleanup()


class TablestoreSessionOnRedisTest(TablestoreSessionTest):
    """The same tests on RedisSession, against the suite's real redis-server
    (statekit's conditional saves run a Lua script, which fakeredis lacks)."""

    @pytest.fixture(autouse=True)
    def _use_server(self, redis_server: RedisServer) -> None:
        self._server = redis_server

    async def asyncSetUp(self) -> None:
        """Create the session under test."""
        import tempfile

        self._tmp = tempfile.TemporaryDirectory()
        prefix = f"agentscope-{uuid.uuid4().hex}:"
        self.session = RedisSession(self._server.host, self._server.port, key_prefix=prefix)
