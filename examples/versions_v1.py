"""Version 1 of a notes agent: what was saved before versions existed.

    python examples/versions_v1.py          # save sessions "chat" and "archived"
    python examples/versions_v1.py load     # try to load "chat" (refused once newer code saved it)

docs/versions.md follows this class through versions 2 and 3
(examples/versions_v2.py, examples/versions_v3.py).
"""

from __future__ import annotations

import sys

from statekit import JSONSession, StateModule, StateVersionError, state_field, stateful


@stateful
class Note:
    """Something the agent was told."""

    text: str


@stateful
class Memory(StateModule):
    """What the agent remembers."""

    notes: list[Note] = state_field(factory=list)


@stateful
class Agent(StateModule):
    """Version 1: no version says so, and none needs to."""

    name: str = state_field(default="Friday")
    turns: int = state_field(default=0)
    user: str = state_field(default="")
    tool_group: str = state_field(default="web")
    memory: Memory = state_field(factory=Memory)


def main() -> None:
    """Save two sessions, or (with ``load``) load one back."""
    with JSONSession("sessions") as session:
        if sys.argv[1:] == ["load"]:
            agent = Agent()
            try:
                session.load("chat", agent=agent)
            except StateVersionError as error:
                print(f"version 1 refuses: {error}")
            return
        agent = Agent(turns=4, user="Ada Lovelace", tool_group="search")
        agent.memory.notes = [Note("likes tea"), Note("lives in London")]
        session.save("chat", agent=agent)
        session.save("archived", agent=Agent(turns=1, user="Alan Turing", tool_group=""))
        print("saved chat and archived:", agent.state_dict())


if __name__ == "__main__":
    main()
