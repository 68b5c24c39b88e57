"""Version 2: ``turns`` is renamed ``turn_count``, ``user`` is split in two.

    python examples/versions_v1.py      # first: save version-1 sessions
    python examples/versions_v2.py      # load "chat" (version 1), take a turn, save it as version 2
"""

from __future__ import annotations

from typing import Any

from versions_v1 import Memory  # Memory (and the Note records in it) did not change

from statekit import JSONSession, StateModule, state_field, stateful


def rename_turns_split_user(state: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 2, on plain data: ``turns`` -> ``turn_count``; "Ada Lovelace" -> "Ada", "Lovelace"."""
    state["turn_count"] = state.pop("turns")
    first, _, last = state.pop("user").partition(" ")
    state["first_name"], state["last_name"] = first, last
    return state


@stateful(version=2, migrations={1: rename_turns_split_user})
class Agent(StateModule):
    """Version 2: data without ``__version__`` is version 1 and is migrated when loaded."""

    name: str = state_field(default="Friday")
    turn_count: int = state_field(default=0)
    first_name: str = state_field(default="")
    last_name: str = state_field(default="")
    tool_group: str = state_field(default="web")
    memory: Memory = state_field(factory=Memory)


def main() -> None:
    """Load the version-1 session, take a turn, save it (now as version 2)."""
    with JSONSession("sessions") as session:
        agent = Agent()
        session.load("chat", agent=agent, allow_not_exist=False)
        print(f"loaded version 1: {agent.turn_count} turns with {agent.first_name} {agent.last_name}")
        agent.turn_count += 1
        session.save("chat", agent=agent)
        print("saved:", agent.state_dict())


if __name__ == "__main__":
    main()
