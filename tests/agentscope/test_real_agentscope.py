"""Real AgentScope 1.0.21 classes through statekit (issue 24): its ``ReActAgent``
(a stub model), ``InMemoryMemory``, ``PlanNotebook`` and ``Toolkit`` saved and
loaded by every backend, at the top level and held by a statekit module; the
tutorial's flow (reference 000) across processes; an app run three times beside
the same app on AgentScope's own ``JSONSession``; and AgentScope reading what
statekit wrote. Needs the ``agentscope-tests`` extra (``.ci/run`` installs it).
"""

from __future__ import annotations

import collections
import enum
import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

NEEDS = "needs AgentScope 1.0.21: pip install -e '.[agentscope-tests]'"


def _from(module: str) -> Any:
    """An AgentScope module, or skip (typed ``Any``: mypy runs with or without the extra)."""
    return pytest.importorskip(module, reason=NEEDS)


ReActAgent = _from("agentscope.agent").ReActAgent
OpenAIChatFormatter = _from("agentscope.formatter").OpenAIChatFormatter
InMemoryMemory = _from("agentscope.memory").InMemoryMemory
_message = _from("agentscope.message")
Msg, TextBlock, ToolResultBlock, ToolUseBlock = _message.Msg, _message.TextBlock, _message.ToolResultBlock, _message.ToolUseBlock
ChatModelBase, ChatResponse = _from("agentscope.model").ChatModelBase, _from("agentscope.model").ChatResponse
AgentScopeModule = _from("agentscope.module").StateModule
PlanNotebook, SubTask = _from("agentscope.plan").PlanNotebook, _from("agentscope.plan").SubTask
AgentScopeJSONSession = _from("agentscope.session").JSONSession
Toolkit = _from("agentscope.tool").Toolkit

from statekit import JSONSession, StateModule
from statekit.errors import StateDumpError, StatekitError, StateLoadError, StateModuleNameError
from statekit.testing import SessionFactory
from workers import run_forked

REPLY = "Hello! How can I assist you today?"

AGENT_IMPORT = f"""
import sys

sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_real_agentscope import make_agent  # the stub model and agent below, in a fresh process
"""


class StubModel(ChatModelBase):  # type: ignore[misc, valid-type]
    """A chat model that always answers the same text."""

    def __init__(self) -> None:
        super().__init__("stub", stream=False)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return ChatResponse(content=[TextBlock(type="text", text=REPLY)])


def make_agent(plan: bool = False) -> Any:
    toolkit = Toolkit()
    toolkit.create_tool_group("web", "web search")
    return ReActAgent(
        name="Friday",
        sys_prompt="You're a assistant named Friday.",
        model=StubModel(),
        formatter=OpenAIChatFormatter(),
        memory=InMemoryMemory(),
        toolkit=toolkit,
        plan_notebook=PlanNotebook() if plan else None,
    )


async def busy_agent() -> Any:
    """An agent whose memory holds text, tool_use and tool_result blocks, with a plan and an active tool group."""
    agent = make_agent(plan=True)
    await agent(Msg("user", "Hello, agent!", "user"))
    use = ToolUseBlock(type="tool_use", id="call-1", name="search", input={"query": "weather", "limit": 3})
    result = ToolResultBlock(type="tool_result", id="call-1", name="search", output=[TextBlock(type="text", text="sunny")])
    await agent.memory.add(Msg("Friday", [use], "assistant", metadata={"score": 0.5}))
    await agent.memory.add(Msg("system", [result], "system"), marks="tool")
    assert agent.plan_notebook is not None
    subtask = SubTask(name="look", description="look it up", expected_outcome="an answer")
    await agent.plan_notebook.create_plan("weather", "find the weather", "a forecast", [subtask])
    agent.toolkit.groups["web"].active = True
    return agent


class ChatApp(StateModule):
    """A statekit module holding a real ReActAgent, in AgentScope's style."""

    def __init__(self) -> None:
        super().__init__()
        self.agent = make_agent()
        self.turns = 0
        self.register_state("turns")


# -- at the top level, every backend --------------------------------------------------


async def test_a_react_agent_round_trips_through_every_backend(backend: SessionFactory) -> None:
    agent = await busy_agent()
    async with backend() as session:
        await session.save_session_state("s", user_id="bob", agent=agent)
        fresh = make_agent(plan=True)
        await session.load_session_state("s", user_id="bob", allow_not_exist=False, agent=fresh)
    assert fresh.state_dict() == agent.state_dict()
    blocks = [block["type"] for msg in await fresh.memory.get_memory() if isinstance(msg.content, list) for block in msg.content]
    assert blocks == ["text", "tool_use", "tool_result"]
    assert isinstance(fresh.memory, InMemoryMemory)
    assert [marks for _, marks in fresh.memory.content] == [[], [], [], ["tool"]]
    assert fresh.toolkit.groups["web"].active
    assert fresh.plan_notebook is not None and fresh.plan_notebook.current_plan is not None
    assert fresh.plan_notebook.current_plan.subtasks[0].name == "look"


async def test_update_takes_an_agent(backend: SessionFactory) -> None:
    agent = make_agent()

    async def reply() -> None:
        await agent(Msg("user", "hi", "user"))

    async with backend() as session:
        await session.aupdate("u", reply, agent=agent)  # a missing session: starts from the agent as passed
        await session.aupdate("u", reply, agent=agent)
        fresh = make_agent()
        await session.aload("u", allow_not_exist=False, agent=fresh)
    assert len(await fresh.memory.get_memory()) == 4
    assert fresh.state_dict() == agent.state_dict()


def test_the_blocking_twins_take_an_agent(tmp_path: Path) -> None:
    def activate(agent: Any) -> None:
        agent.toolkit.groups["web"].active = True

    with JSONSession(tmp_path) as session:
        session.save("b", agent=make_agent())
        loaded = make_agent()
        session.update("b", lambda: activate(loaded), agent=loaded)
    again = make_agent()
    JSONSession(tmp_path).load("b", allow_not_exist=False, agent=again)
    assert again.state_dict()["toolkit"] == {"active_groups": ["web"]}


async def test_memory_notebook_and_toolkit_are_modules_on_their_own(tmp_path: Path) -> None:
    agent = await busy_agent()
    assert agent.plan_notebook is not None
    session = JSONSession(tmp_path)
    await session.asave("parts", memory=agent.memory, notebook=agent.plan_notebook, toolkit=agent.toolkit)
    memory, notebook, toolkit = InMemoryMemory(), PlanNotebook(), Toolkit()
    toolkit.create_tool_group("web", "web search")
    await session.aload("parts", allow_not_exist=False, memory=memory, notebook=notebook, toolkit=toolkit)
    assert memory.state_dict() == agent.memory.state_dict()
    assert notebook.state_dict() == agent.plan_notebook.state_dict()
    assert toolkit.state_dict() == {"active_groups": ["web"]}


async def test_a_class_instead_of_an_agent_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(StatekitError, match="agent= must be a StateModule instance, got the class ReActAgent; pass an instance"):
        await JSONSession(tmp_path).asave("s", agent=ReActAgent)


# -- held by a statekit module ---------------------------------------------------------


async def test_an_agent_held_by_a_statekit_module_is_nested_state(tmp_path: Path) -> None:
    app = ChatApp()
    await app.agent(Msg("user", "hi", "user"))
    app.turns = 1
    assert list(app.state_dict()) == ["agent", "turns"]  # nested modules first, as AgentScope orders them
    assert app.state_dict()["agent"] == app.agent.state_dict()
    session = JSONSession(tmp_path)
    await session.asave("chat", app=app)
    stored = json.loads(session.session_path("chat").read_text(encoding="utf-8"))
    assert len(stored["app"]["agent"]["memory"]["content"]) == 2  # the memory is in the file, not dropped
    fresh = ChatApp()
    await session.aload("chat", allow_not_exist=False, app=fresh)
    assert fresh.turns == 1 and len(await fresh.agent.memory.get_memory()) == 2


async def test_a_failed_load_of_an_agent_restores_what_its_own_load_changed(tmp_path: Path) -> None:
    app = ChatApp()
    await app.agent(Msg("user", "before", "user"))
    before = app.state_dict()
    other = ChatApp()
    await other.agent(Msg("user", "other", "user"))
    broken = other.state_dict()
    broken["turns"] = 5
    del broken["agent"]["_sys_prompt"]  # AgentScope's strict load raises KeyError after loading the memory
    with pytest.raises(StateLoadError) as caught:
        app.load_state_dict(broken)
    assert caught.value.problems[0].dotted == "agent"
    assert "KeyError" in caught.value.problems[0].message
    assert app.state_dict() == before  # the memory it had loaded is put back; turns never changed


async def test_non_json_data_in_an_agent_is_refused_on_save_with_its_path(tmp_path: Path) -> None:
    app = ChatApp()
    await app.agent.memory.add(Msg("user", "hi", "user", metadata={"score": math.nan}))
    session = JSONSession(tmp_path)
    with pytest.raises(StateDumpError, match=r"app\.agent\.memory\.content\[0\]\[0\]\.metadata\.score"):
        await session.asave("chat", app=app)
    assert not session.session_path("chat").exists()


async def test_what_json_dumps_writes_in_an_agent_is_saved_as_plain_json(tmp_path: Path) -> None:
    class Mood(str, enum.Enum):
        HAPPY = "happy"

    metadata: dict[str, Any] = {"mood": Mood.HAPPY, "order": collections.OrderedDict(a=1), "pair": (1, 2)}
    agent = make_agent()
    await agent.memory.add(Msg("user", "hi", "user", metadata=metadata))
    session = JSONSession(tmp_path)
    await session.asave("s", agent=agent)
    fresh = make_agent()
    await session.aload("s", allow_not_exist=False, agent=fresh)
    loaded = (await fresh.memory.get_memory())[0].metadata
    assert loaded == {"mood": "happy", "order": {"a": 1}, "pair": [1, 2]}
    assert type(loaded["mood"]) is str  # loads back as the plain JSON type, as with AgentScope


def test_register_state_on_an_agents_name_is_a_value_error() -> None:
    app = ChatApp()
    with pytest.raises(StateModuleNameError) as caught:
        app.register_state("agent")
    assert isinstance(caught.value, ValueError)


# -- the same semantics as AgentScope's own StateModule ------------------------------


class Level(enum.IntEnum):
    HIGH = 2


def _layout(base: type) -> Any:
    """The same AgentScope-style class on AgentScope's base or statekit's."""

    class Agent(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.name = "Friday"
            self.register_state("name")
            self.memory = InMemoryMemory()
            self.options = collections.OrderedDict(b=1, a=2)
            self.register_state("options")
            self.level = Level.HIGH
            self.register_state("level")
            self.toolkit = Toolkit()

    return Agent()


def test_state_dict_matches_agentscope_key_for_key_and_in_order() -> None:
    ours, theirs = _layout(StateModule), _layout(AgentScopeModule)
    assert json.dumps(ours.state_dict()) == json.dumps(theirs.state_dict())
    assert list(ours.state_dict()) == ["memory", "toolkit", "name", "options", "level"]


@pytest.mark.parametrize("base", [StateModule, AgentScopeModule])
def test_registering_a_module_name_fails_as_in_agentscope(base: type) -> None:
    with pytest.raises(ValueError):  # with a codec: "already registered as a module"
        _layout(base).register_state("memory", custom_to_json=str)
    with pytest.raises(TypeError):  # without: a module is not JSON data (statekit's error is both)
        _layout(base).register_state("memory")


# -- across processes ------------------------------------------------------------------


TUTORIAL = AGENT_IMPORT + '''
import asyncio
import json
import sys

from agentscope.message import Msg
from statekit import JSONSession

session = JSONSession("./user-bob/")


async def main() -> None:
    agent = make_agent()
    if sys.argv[1:] == ["save"]:
        await agent(Msg("user", "Hello, agent!", "user"))
        await session.save_session_state("session_2025-08-08", agent=agent)
    else:
        await agent.memory.clear()
        await session.load_session_state("session_2025-08-08", agent=agent)
    print(json.dumps(agent.state_dict()))


asyncio.run(main())
'''


RESTARTS = f"""
import os
import runpy
import sys

{AGENT_IMPORT}
import agentscope.message, agentscope.module, agentscope.session, statekit  # a run's imports, once before the forks


def work(folder, script, *args):
    os.chdir(folder)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")
"""
"""Runs a script as ``python script args`` would in ``folder``, in :func:`workers.run_forked`'s processes."""


@pytest.mark.slow
def test_the_tutorial_saves_restarts_and_loads_the_same_state(restarts: dict[str, list[str]]) -> None:
    saved, loaded = restarts["tutorial"]
    assert loaded == saved
    state = json.loads(loaded)
    assert [m[0]["content"] for m in state["memory"]["content"]] == ["Hello, agent!", [{"type": "text", "text": REPLY}]]
    assert list(state) == ["memory", "toolkit", "name", "_sys_prompt"]


APP = AGENT_IMPORT + '''
import asyncio
import json

from agentscope.message import Msg
from agentscope.module import StateModule as AgentScopeModule
from agentscope.session import JSONSession as AgentScopeJSONSession
from statekit import JSONSession, StateModule


def app_on(base: type) -> object:
    class ChatApp(base):
        def __init__(self) -> None:
            super().__init__()
            self.agent = make_agent()
            self.turns = 0
            self.register_state("turns")

    return ChatApp()


async def turn(app: object, session: object) -> list[object]:
    await session.load_session_state("chat", user_id="bob", app=app)
    app.turns += 1
    await app.agent(Msg("user", f"turn {app.turns}", "user"))
    await session.save_session_state("chat", user_id="bob", app=app)
    memory = await app.agent.memory.get_memory()
    return [app.turns, len(memory), [[m.name, m.role, m.content] for m in memory]]


async def main() -> None:
    ours = await turn(app_on(StateModule), JSONSession("statekit"))
    theirs = await turn(app_on(AgentScopeModule), AgentScopeJSONSession("agentscope"))
    print(json.dumps([ours, theirs]))


asyncio.run(main())
'''


RUNS: dict[str, tuple[str, list[list[str]]]] = {"tutorial": (TUTORIAL, [["save"], []]), "app": (APP, [[], [], []])}
"""Each script and the arguments of its runs, one after the other in one folder of its own."""


@pytest.fixture(scope="module")
def restarts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The last line each run of each of :data:`RUNS` printed: each run in a process of its own, one after the other.

    The processes are forked from one that imported AgentScope and statekit but
    ran nothing: each run starts from nothing in memory, as after a restart
    (and AgentScope is imported once for all of them, not once a run).
    """
    runs: list[list[str]] = []
    names: list[str] = []
    for name, (source, arguments) in RUNS.items():
        folder = tmp_path_factory.mktemp(name)
        script = folder / f"{name}.py"
        script.write_text(source, encoding="utf-8")
        runs += [[str(folder), str(script), *args] for args in arguments]
        names += [name] * len(arguments)
    printed = run_forked(RESTARTS, runs, timeout=600, in_turn=True)
    found: dict[str, list[str]] = {name: [] for name in RUNS}
    for name, output in zip(names, printed, strict=True):
        found[name].append(output.splitlines()[-1])
    return found


@pytest.mark.slow
def test_an_app_holding_an_agent_accumulates_memory_as_on_agentscope(restarts: dict[str, list[str]]) -> None:
    runs = [json.loads(printed) for printed in restarts["app"]]
    for ours, theirs in runs:
        assert ours == theirs
    assert [(turns, count) for (turns, count, _), _ in runs] == [(1, 2), (2, 4), (3, 6)]
    texts = [m[2] for m in runs[-1][0][2] if m[1] == "user"]
    assert texts == ["turn 1", "turn 2", "turn 3"]


# -- AgentScope reads what statekit wrote ---------------------------------------------


@pytest.mark.parametrize(("layout", "user_id"), [("agentscope", "bob"), ("statekit", "")])
async def test_agentscope_loads_what_statekit_saved_into_its_real_classes(tmp_path: Path, layout: str, user_id: str) -> None:
    agent = await busy_agent()
    session = JSONSession(tmp_path, layout=layout)  # type: ignore[arg-type]
    await session.asave("chat", user_id, agent=agent)
    fresh = make_agent(plan=True)
    await AgentScopeJSONSession(str(tmp_path)).load_session_state("chat", user_id=user_id, allow_not_exist=False, agent=fresh)
    assert fresh.state_dict() == agent.state_dict()


async def test_statekit_loads_what_agentscope_saved_into_a_statekit_app(tmp_path: Path) -> None:
    app = ChatApp()
    app.turns = 2
    await app.agent(Msg("user", "hi", "user"))
    state = {"app": {"agent": app.agent.state_dict(), "turns": 2}}
    (tmp_path / "bob_chat.json").write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
    fresh = ChatApp()
    await JSONSession(tmp_path, layout="agentscope").aload("chat", "bob", allow_not_exist=False, app=fresh)
    assert fresh.state_dict() == app.state_dict()
