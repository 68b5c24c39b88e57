"""The same session save and load written with other libraries, when installed.

- msgspec, on statekit's own attrs objects (``pip install 'statekit[bench]'``):
  ``Encoder.encode`` + ``msgspec.json.format(indent=2)`` to write the same
  pretty JSON; ``msgspec.json.decode(type=...)``, which validates and builds
  the attrs records in one C pass.
- pydantic v2 on mirror models with ``strict=True`` (``statekit[bench]``):
  ``model_dump_json(indent=2)`` and ``model_validate_json``.
- AgentScope 1.0.21 (``pip install agentscope==1.0.21``): its ``JSONSession``
  on a ``StateModule`` holding an ``InMemoryMemory`` of ``Msg`` objects; it
  writes compact JSON, not atomically, without fsync.

Each maker returns ``(save, load)`` for one session file, or ``None`` when the
library is not installed. Optional modules are imported by name so that the
benchmarks type-check whether or not they are present.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path
from typing import Any

from _agents import Agent, floor_document, floor_write

from _timing import Work

Pair = tuple[Work, Work]


def optional(name: str) -> Any:
    """The module ``name``, or ``None`` when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def msgspec_pair(path: Path, agent: Agent) -> Pair | None:
    """msgspec on the same attrs objects, writing the same pretty JSON."""
    msgspec = optional("msgspec")
    if msgspec is None:
        return None
    encoder = msgspec.json.Encoder()
    decoder = msgspec.json.Decoder(dict[str, Agent])

    def save() -> None:
        floor_write(path, msgspec.json.format(encoder.encode({"agent": agent}), indent=2))

    def load() -> None:
        new = decoder.decode(path.read_bytes())["agent"]
        agent.name, agent.sys_prompt, agent.active_groups = new.name, new.sys_prompt, new.active_groups
        agent.memory.content = new.memory.content

    return save, load


def pydantic_pair(path: Path, agent: Agent) -> Pair | None:
    """pydantic v2 on mirror models built from the same data."""
    pydantic = optional("pydantic")
    if pydantic is None:
        return None
    doc_model = _pydantic_models(pydantic)
    holder = [doc_model.model_validate(floor_document(agent))]

    def save() -> None:
        floor_write(path, holder[0].__pydantic_serializer__.to_json(holder[0], indent=2))

    def load() -> None:
        holder[0] = doc_model.model_validate_json(path.read_bytes())

    return save, load


def _pydantic_models(pydantic: Any) -> Any:
    strict = pydantic.ConfigDict(strict=True, extra="forbid")
    msg = pydantic.create_model(
        "PMsg",
        __config__=strict,
        id=(str, ...),
        name=(str, ...),
        role=(str, ...),
        content=(str | list[dict[str, Any]], ...),
        metadata=(dict[str, Any] | None, ...),
        timestamp=(str, ...),
    )
    memory = pydantic.create_model("PMemory", __config__=strict, content=(list[msg], ...))  # type: ignore[valid-type]
    agent = pydantic.create_model(
        "PAgent",
        __config__=strict,
        name=(str, ...),
        sys_prompt=(str, ...),
        memory=(memory, ...),
        active_groups=(list[str], ...),
    )
    return pydantic.create_model("PDocument", __config__=strict, agent=(agent, ...))


def agentscope_pair(folder: Path, agent: Agent, loop: asyncio.AbstractEventLoop) -> Pair | None:
    """AgentScope 1.0.21's JSONSession on its own agent, memory and messages."""
    session_mod = optional("agentscope.session")
    if session_mod is None:
        return None
    logging.getLogger("as").setLevel(logging.WARNING)  # AgentScope logs every save and load
    theirs = _agentscope_agent(agent)
    session = session_mod.JSONSession(save_dir=str(folder))

    def save() -> None:
        loop.run_until_complete(session.save_session_state("agentscope", agent=theirs))

    def load() -> None:
        loop.run_until_complete(session.load_session_state("agentscope", agent=theirs))

    return save, load


def _agentscope_agent(agent: Agent) -> Any:
    module = importlib.import_module("agentscope.module")
    memory_mod = importlib.import_module("agentscope.memory")
    message = importlib.import_module("agentscope.message")

    theirs = module.StateModule()  # an agent: registered attributes and a memory module
    theirs.name, theirs.sys_prompt, theirs.active_groups = agent.name, agent.sys_prompt, list(agent.active_groups)
    theirs.memory = memory_mod.InMemoryMemory()
    for name in ("name", "sys_prompt", "active_groups"):
        theirs.register_state(name)
    for m in agent.memory.content:
        msg = message.Msg(m.name, m.content, m.role, m.metadata, m.timestamp)
        msg.id = m.id
        theirs.memory.content.append((msg, []))
    return theirs
