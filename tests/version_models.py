"""One agent through three versions (issue 7), as the tests load it.

- Version 1: what was saved before versions existed (no ``__version__`` anywhere).
- Version 2: ``turns`` renamed ``turn_count``; ``user`` ("Ada Lovelace") split
  into ``first_name`` and ``last_name``.
- Version 3: ``tool_group: str`` became ``tool_groups: list[str]``; the nested
  ``Memory`` module gained ``summary`` (Memory version 2); the ``Note`` records
  in the memory renamed ``text`` to ``body`` (Note version 2, item by item).

The migrations are module-level functions, so that tests can apply them by hand.
"""

from __future__ import annotations

import copy
from typing import Any

from statekit import StateModule, state_field, stateful

# ---------------------------------------------------------------- version 1


@stateful
class NoteV1:
    text: str


@stateful
class MemoryV1(StateModule):
    notes: list[NoteV1] = state_field(factory=list)


@stateful
class AgentV1(StateModule):
    name: str = state_field(default="Friday")
    turns: int = state_field(default=0)
    user: str = state_field(default="")
    tool_group: str = state_field(default="web")
    memory: MemoryV1 = state_field(factory=MemoryV1)


# ---------------------------------------------------------------- migrations


def agent_1_to_2(state: dict[str, Any]) -> dict[str, Any]:
    """Rename ``turns``; split ``user`` at its first space."""
    state["turn_count"] = state.pop("turns")
    first, _, last = state.pop("user").partition(" ")
    state["first_name"], state["last_name"] = first, last
    return state


def agent_2_to_3(state: dict[str, Any]) -> dict[str, Any]:
    """One tool group became a list of them (none when it was empty)."""
    group = state.pop("tool_group")
    state["tool_groups"] = [group] if group else []
    return state


def memory_1_to_2(state: dict[str, Any]) -> dict[str, Any]:
    """The memory gained a summary."""
    state["summary"] = ""
    return state


def note_1_to_2(state: dict[str, Any]) -> dict[str, Any]:
    """A note's ``text`` is now its ``body``."""
    state["body"] = state.pop("text")
    return state


# ---------------------------------------------------------------- version 2


@stateful(version=2, migrations={1: agent_1_to_2})
class AgentV2(StateModule):
    name: str = state_field(default="Friday")
    turn_count: int = state_field(default=0)
    first_name: str = state_field(default="")
    last_name: str = state_field(default="")
    tool_group: str = state_field(default="web")
    memory: MemoryV1 = state_field(factory=MemoryV1)


# ---------------------------------------------------------------- version 3


@stateful(version=2, migrations={1: note_1_to_2})
class Note:
    body: str


@stateful(version=2, migrations={1: memory_1_to_2})
class Memory(StateModule):
    notes: list[Note] = state_field(factory=list)
    summary: str = state_field(default="")


@stateful(version=3, migrations={1: agent_1_to_2, 2: agent_2_to_3})
class Agent(StateModule):
    name: str = state_field(default="Friday")
    turn_count: int = state_field(default=0)
    first_name: str = state_field(default="")
    last_name: str = state_field(default="")
    tool_groups: list[str] = state_field(factory=list)
    memory: Memory = state_field(factory=Memory)


def by_hand(agent_v1: dict[str, Any]) -> dict[str, Any]:
    """Version-1 agent data brought to version 3 with the migrations called directly."""
    state = agent_2_to_3(agent_1_to_2(copy.deepcopy(agent_v1)))
    memory = memory_1_to_2(state["memory"])
    memory["notes"] = [note_1_to_2(note) for note in memory["notes"]]
    return state
