"""A typed agent that keeps its memory across runs in a JSON session.

Run it twice: the second run remembers the first.

    python examples/typed_agent.py "Hello, agent!"
    python examples/typed_agent.py "What did I say?"

No LLM and no server: the "model" echoes. Everything the agent must remember
is declared with ``state_field``; the model client is a plain attribute and is
never saved.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import attrs

from statekit import JSONSession, StateModule, state_field, stateful


@stateful
class Message:
    """One turn of the conversation (a value record, not a module)."""

    role: str
    content: str | list[dict[str, Any]]


@stateful
class Memory(StateModule):
    """The conversation so far."""

    content: list[Message] = state_field(factory=list)


class EchoModel:
    """Stands in for an LLM client: not state, never saved."""

    def reply(self, history: list[Message]) -> str:
        last = history[-1].content
        return f"You said {last!r}. I remember {len(history) - 1} earlier messages."


@stateful
class EchoAgent(StateModule):
    """A minimal agent: a prompt, a memory, tool groups and a turn counter."""

    name: str = state_field()
    sys_prompt: str = state_field(default="You are a helpful echo.")
    memory: Memory = state_field(factory=Memory)
    active_groups: list[str] = state_field(factory=list)
    turns: int = state_field(default=0)
    model: EchoModel = attrs.field(factory=EchoModel)

    def __call__(self, text: str) -> str:
        """Answer one user message and remember both sides."""
        self.memory.content.append(Message("user", text))
        answer = self.model.reply(self.memory.content)
        self.memory.content.append(Message("assistant", answer))
        self.turns += 1
        return answer


async def main(text: str, save_dir: str, session_id: str) -> None:
    """Load the agent (if saved before), answer, save it back."""
    session = JSONSession(save_dir=save_dir)
    agent = EchoAgent(name="Friday")
    await session.load_session_state(session_id, agent=agent)
    print(f"{agent.name}: {agent(text)}")
    await session.save_session_state(session_id, agent=agent)
    print(f"(turn {agent.turns}; {len(agent.memory.content)} messages saved in {save_dir})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An echo agent that remembers across runs.")
    parser.add_argument("text", nargs="?", default="Hello, agent!", help="what to say")
    parser.add_argument("--dir", default="./sessions", help="where sessions are kept")
    parser.add_argument("--session", default="demo", help="the session id")
    args = parser.parse_args()
    asyncio.run(main(args.text, args.dir, args.session))
