"""Seed an agent from a hand-written YAML config, then keep it across runs.

    python examples/seed_from_config.py "Hello!"
    python examples/seed_from_config.py "Still there?"

The first run builds the agent from ``agent.yaml`` (beside this file) with
``from_config``: comments are ignored, fields left out take their defaults.
Later runs restore the agent from its JSON session and lay the config over it
with ``seed``: what the config sets (name, prompt, tool groups) wins, the rest
(memory, turns) is kept. A typo in the config is an error naming its line.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from typed_agent import EchoAgent

from statekit import JSONSession, StateLoadError, from_config, seed

CONFIG = Path(__file__).with_name("agent.yaml")


def first_state(session: JSONSession, session_id: str) -> EchoAgent:
    """A new agent from the config, or the saved one with the config laid over it."""
    if not session.exists(session_id):
        agent = from_config(EchoAgent, CONFIG)
        print(f"new agent from {CONFIG.name}: {agent.name}, tool groups {agent.active_groups}")
        return agent
    agent = EchoAgent(name="?")
    session.load(session_id, agent=agent)
    result = seed(agent, CONFIG)
    kept = ", ".join(result.missing_keys)
    print(f"restored {agent.name} from the session; {CONFIG.name} applied, kept from the session: {kept}")
    return agent


def show_a_typo() -> None:
    """Load a copy of the config with a misspelt key, and print what statekit says."""
    text = CONFIG.read_text(encoding="utf-8").replace("active_groups:", "active_gruops:")
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "agent.yaml"
        copy.write_text(text, encoding="utf-8")
        try:
            from_config(EchoAgent, copy)
        except StateLoadError as error:
            for problem in error.problems:
                print(f"a typo is caught: line {problem.line}: {problem.dotted}: {problem.message}")


def main() -> None:
    """Answer one message with an agent seeded from the config, and save it."""
    parser = argparse.ArgumentParser(description="An echo agent seeded from agent.yaml.")
    parser.add_argument("text", nargs="?", default="Hello!", help="what to say")
    parser.add_argument("--dir", default="./sessions", help="where sessions are kept")
    args = parser.parse_args()
    with JSONSession(args.dir) as session:
        agent = first_state(session, "seeded")
        print(f"{agent.name}: {agent(args.text)}")
        session.save("seeded", agent=agent)
    show_a_typo()


if __name__ == "__main__":
    main()
