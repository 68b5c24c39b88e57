"""Typed agent definitions that ``mypy --strict`` must accept (checked by mypy.ini)."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any, assert_type

import attrs
from pydantic import BaseModel, ConfigDict, Field

from statekit import JSONSession, Lease, LeaseError, LoadResult, Migration, StateModule, StateVersionError, SupportsState, state_field, stateful


class Role(enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"


@stateful
class Msg:
    role: Role
    content: str | list[dict[str, Any]]
    at: dt.datetime | None = None


@stateful
class Memory(StateModule):
    content: list[Msg] = state_field(factory=list)


@stateful(kw_only=True)
class Agent(StateModule):
    name: str = state_field()
    sys_prompt: str = state_field(default="You are helpful.")
    turns: int = state_field(default=0)
    memory: Memory = state_field(factory=Memory)
    groups: set[str] = state_field(factory=set, to_json=sorted, from_json=set)
    client: object = attrs.field(default=None)


def use() -> None:
    agent = Agent(name="Friday")
    agent.memory.content.append(Msg(Role.USER, "hi"))
    agent.turns += 1
    state: dict[str, Any] = agent.state_dict()
    result: LoadResult = agent.load_state_dict(state, strict=False)
    missing: list[str] = result.missing_keys
    name: str = agent.name
    print(missing, name)


def add_summary(state: dict[str, Any]) -> dict[str, Any]:
    state["summary"] = ""
    return state


@stateful(version=2, migrations={1: add_summary})
class VersionedMemory(StateModule):
    summary: str = state_field(default="")


STEPS: dict[int, Migration] = {1: add_summary, 2: lambda state: {**state, "tags": []}}


@stateful(version=3, migrations=STEPS, kw_only=True)
class VersionedNote:
    summary: str
    tags: list[str] = state_field(factory=list)


def use_versions() -> None:
    memory = VersionedMemory(summary="x")
    note = VersionedNote(summary="y")
    try:
        memory.load_state_dict({"__version__": 1})
    except StateVersionError as error:
        found: object = error.found
        expected: int = error.expected
        print(found, expected, note.tags)


@stateful(frozen=True)
class Line:
    role: str
    text: str


@stateful
class LongMemory(StateModule):
    content: list[Line] = state_field(factory=list, append_only=True)
    ids: list[int] = state_field(factory=list, append_only=True)


def use_append_only() -> None:
    memory = LongMemory()
    memory.content.append(Line("user", "hi"))
    memory.ids.extend([1, 2])
    first: Line = memory.content[0]
    size: int = memory.ids[-1]
    print(first.text, size)


class ToolCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class AgentState(BaseModel):
    """A pydantic model held as a value: no codec needed."""

    step: int = 0
    calls: list[ToolCall] = Field(default_factory=list)


class FrozenMsg(BaseModel):
    model_config = ConfigDict(frozen=True)
    role: str
    text: str


@stateful
class PydanticAgent(StateModule):
    state: AgentState = state_field(factory=AgentState)
    last: ToolCall | None = state_field(default=None)
    history: list[FrozenMsg] = state_field(factory=list, append_only=True)
    by_tool: dict[str, ToolCall] = state_field(factory=dict)


def use_pydantic() -> None:
    agent = PydanticAgent(state=AgentState(step=1), last=ToolCall(name="search"))
    agent.history.append(FrozenMsg(role="user", text="hi"))
    step: int = agent.state.step
    last: ToolCall | None = agent.last
    agent.load_state_dict(agent.state_dict())
    print(step, last, agent.by_tool.get("search"))


def use_several_secret_keys(new: str, old: str, raw: bytes) -> None:
    keys = [new, old]  # list[str]: the first encrypts, both decrypt
    JSONSession("sessions", secret_key=keys).use_secret_key((new, old))
    JSONSession("sessions", secret_key=raw).use_secret_key([raw, raw])


class ForeignMemory:
    """AgentScope's StateModule protocol without statekit's base class (its agents, memories, toolkits)."""

    def __init__(self) -> None:
        self.content: list[str] = []

    def state_dict(self) -> dict[str, Any]:
        return {"content": list(self.content)}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        self.content = list(state_dict["content"])


def use_foreign(session: JSONSession) -> None:
    memory: SupportsState = ForeignMemory()
    session.save("s", memory=memory, agent=Agent(name="a"))
    session.load("s", memory=ForeignMemory())
    session.update("s", lambda: None, memory=ForeignMemory())


def turn_under_a_lease(session: JSONSession) -> int:
    with session.lease("s", "alice", ttl=60, wait=2.5) as lease:
        assert_type(lease, Lease)
        until: dt.datetime = lease.expires_at
        session.save("s", "alice", agent=Agent(name=until.isoformat()))
        lease.renew(30)
        return lease.token


async def turn_under_an_async_lease(session: JSONSession) -> None:
    async with session.alease("s", ttl=5) as lease:
        assert_type(lease, Lease)
        await lease.arenew()
    kept = await session.alease("s")
    assert_type(kept, Lease)
    try:
        await kept.arelease()
    except LeaseError as err:
        assert_type(err.source, str)
