"""Version 3: one tool group became a list, and the memory gained a summary.

    python examples/versions_v1.py      # version-1 sessions "chat" and "archived"
    python examples/versions_v2.py      # "chat" is now version 2
    python examples/versions_v3.py      # loads both: "chat" from 2, "archived" from 1

The nested ``Memory`` module and the ``Note`` records in it have versions of
their own: each piece of state carries its version, and each class migrates
its own data (a list of notes item by item), after the agent's migrations
(outermost first).
"""

from __future__ import annotations

from typing import Any

from versions_v2 import rename_turns_split_user  # migrations are kept for good: data of every age loads

from statekit import JSONSession, StateModule, state_field, stateful


def rename_text(state: dict[str, Any]) -> dict[str, Any]:
    """Note version 1 -> 2: ``text`` is now ``body``."""
    state["body"] = state.pop("text")
    return state


@stateful(version=2, migrations={1: rename_text})
class Note:
    """Version 2: ``body`` (was ``text``)."""

    body: str


def add_summary(state: dict[str, Any]) -> dict[str, Any]:
    """Memory version 1 -> 2: a new field, written so that strict loads find it."""
    state["summary"] = ""
    return state


@stateful(version=2, migrations={1: add_summary})
class Memory(StateModule):
    """Version 2: gained ``summary``."""

    notes: list[Note] = state_field(factory=list)
    summary: str = state_field(default="")


def group_to_groups(state: dict[str, Any]) -> dict[str, Any]:
    """Agent version 2 -> 3: ``tool_group: str`` -> ``tool_groups: list[str]`` ("" -> [])."""
    group = state.pop("tool_group")
    state["tool_groups"] = [group] if group else []
    return state


@stateful(version=3, migrations={1: rename_turns_split_user, 2: group_to_groups})
class Agent(StateModule):
    """Version 3: every older version still loads."""

    name: str = state_field(default="Friday")
    turn_count: int = state_field(default=0)
    first_name: str = state_field(default="")
    last_name: str = state_field(default="")
    tool_groups: list[str] = state_field(factory=list)
    memory: Memory = state_field(factory=Memory)


def main() -> None:
    """Load a version-2 and a version-1 session; save the first as version 3."""
    with JSONSession("sessions") as session:
        for session_id in ("chat", "archived"):
            agent = Agent()
            session.load(session_id, agent=agent, allow_not_exist=False)
            notes = [note.body for note in agent.memory.notes]
            print(f"{session_id}: {agent.turn_count} turns, {agent.first_name}, tools {agent.tool_groups}, notes {notes}")
        agent = Agent()
        session.load("chat", agent=agent)
        agent.memory.summary = "Ada: tea, London"
        session.save("chat", agent=agent)
        print("saved:", agent.state_dict())


if __name__ == "__main__":
    main()
