"""The agent shape the benchmarks time, a message generator, and the hand-written floor.

The floor does the same work as statekit with nothing general about it: dict
literals that copy the containers they return, direct constructors, and a
recursive copy of the JSON blobs (so that neither side shares containers with
its input, which statekit guarantees).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from statekit import StateModule, state_field, stateful


@stateful
class Msg:
    """One message, in the shape agent frameworks use."""

    id: str
    name: str
    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] | None
    timestamp: str


@stateful
class Memory(StateModule):
    """The conversation memory."""

    content: list[Msg] = state_field(factory=list)


@stateful
class Agent(StateModule):
    """An agent: a name, a prompt, memory and active tool groups."""

    name: str = state_field()
    sys_prompt: str = state_field()
    memory: Memory = state_field(factory=Memory)
    active_groups: list[str] = state_field(factory=list)


_WORDS = "the agent reads a file then calls a tool to search the web and writes a short answer".split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def make_message(rng: random.Random, index: int) -> Msg:
    """A message of about 300 bytes of JSON; about 30% carry tool-use blocks."""
    stamp = f"2025-08-15 09:{index // 60 % 60:02d}:{index % 60:02d}.{index % 1000:03d}"
    ident = f"msg-{index:08d}-{rng.getrandbits(32):08x}"
    if rng.random() < 0.3:
        blocks: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"call-{index}", "name": "search", "input": {"query": _text(rng, 4), "top_k": 3}},
            {"type": "tool_result", "id": f"call-{index}", "name": "search", "output": [{"type": "text", "text": _text(rng, 6)}]},
        ]
        return Msg(ident, "Friday", "assistant", blocks, None, stamp)
    role = rng.choice(["user", "assistant"])
    return Msg(ident, role, role, _text(rng, 22), {"turn": index}, stamp)


def make_agent(messages: int, seed: int = 7) -> Agent:
    """An agent whose memory holds ``messages`` messages."""
    rng = random.Random(seed)
    agent = Agent(name="Friday", sys_prompt="You're an assistant named Friday.")
    agent.memory.content = [make_message(rng, i) for i in range(messages)]
    agent.active_groups = ["web", "files"]
    return agent


def floor_copy(value: Any) -> Any:
    """Deep-copy JSON data by hand (no validation)."""
    kind = type(value)
    if kind is dict:
        return {k: floor_copy(v) for k, v in value.items()}
    if kind is list:
        return [floor_copy(v) for v in value]
    return value


def floor_state_dict(agent: Agent) -> dict[str, Any]:
    """The hand-written ``state_dict()``."""
    messages = [
        {
            "id": m.id,
            "name": m.name,
            "role": m.role,
            "content": m.content if type(m.content) is str else floor_copy(m.content),
            "metadata": None if m.metadata is None else floor_copy(m.metadata),
            "timestamp": m.timestamp,
        }
        for m in agent.memory.content
    ]
    return {
        "name": agent.name,
        "sys_prompt": agent.sys_prompt,
        "memory": {"content": messages},
        "active_groups": list(agent.active_groups),
    }


def floor_load(agent: Agent, state: dict[str, Any]) -> None:
    """The hand-written ``load_state_dict()``: direct constructors, copied blobs."""
    agent.name = state["name"]
    agent.sys_prompt = state["sys_prompt"]
    agent.memory.content = [
        Msg(
            d["id"],
            d["name"],
            d["role"],
            d["content"] if type(d["content"]) is str else floor_copy(d["content"]),
            None if d["metadata"] is None else floor_copy(d["metadata"]),
            d["timestamp"],
        )
        for d in state["memory"]["content"]
    ]
    agent.active_groups = list(state["active_groups"])


def floor_document(agent: Agent) -> dict[str, Any]:
    """The session floor's dict: built by hand, sharing the live containers (no copy).

    A save encodes it at once, so sharing is safe; this is the least work any
    implementation that writes the same JSON can do in Python.
    """
    messages = [
        {
            "id": m.id,
            "name": m.name,
            "role": m.role,
            "content": m.content,
            "metadata": m.metadata,
            "timestamp": m.timestamp,
        }
        for m in agent.memory.content
    ]
    state = {"name": agent.name, "sys_prompt": agent.sys_prompt, "memory": {"content": messages}}
    state["active_groups"] = agent.active_groups
    return {"agent": state}


def floor_load_fresh(agent: Agent, state: dict[str, Any]) -> None:
    """The session floor's load: direct constructors over freshly decoded data (no copy)."""
    agent.name = state["name"]
    agent.sys_prompt = state["sys_prompt"]
    agent.memory.content = [
        Msg(d["id"], d["name"], d["role"], d["content"], d["metadata"], d["timestamp"])
        for d in state["memory"]["content"]
    ]
    agent.active_groups = state["active_groups"]


def floor_write(path: Path, data: bytes) -> None:
    """Atomic, durable replace, written out by hand (temp file, fsync, rename, fsync folder)."""
    temp = path.with_name(f".floor-{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    os.fsync(folder)
    os.close(folder)
