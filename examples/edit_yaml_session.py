"""Fix a broken session by hand: YAML sessions are files a person can edit.

    python examples/edit_yaml_session.py

A crash in the middle of a turn can leave an empty assistant turn in the saved
memory, and then every later run fails on it. This script saves such a session
as YAML, shows the error statekit gives when loading it (file, line, field),
"hand-edits" the file the way you would in an editor (it deletes the two lines
of the broken turn), and loads the session back.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import attrs

from statekit import StateLoadError, StateModule, YAMLSession, state_field, stateful


@stateful
class Turn:
    """One message of the conversation."""

    role: str
    content: str


def no_empty_assistant_turn(memory: Any, field: attrs.Attribute[Any], turns: list[Turn]) -> None:
    """Refuse a memory with an empty assistant turn (checked on every load)."""
    for index, turn in enumerate(turns):
        if turn.role == "assistant" and not turn.content.strip():
            raise ValueError(f"turn {index} is an empty assistant turn: delete it or write its content")


@stateful
class Memory(StateModule):
    """The conversation so far."""

    turns: list[Turn] = state_field(factory=list, validator=no_empty_assistant_turn)


class FlakyModel:
    """A model client that crashes in the middle of its reply."""

    def reply(self, history: list[Turn]) -> str:
        raise TimeoutError("the model did not answer")


def crash_during_a_turn(session: YAMLSession, text: str) -> None:
    """One turn whose model call fails, saved anyway (as a careless app would)."""
    memory = Memory([Turn("user", "Hello!"), Turn("assistant", "Hi! How can I help?")])
    memory.turns.append(Turn("user", text))
    memory.turns.append(Turn("assistant", ""))  # a placeholder for the reply
    try:
        memory.turns[-1].content = FlakyModel().reply(memory.turns)
    except TimeoutError as error:
        print(f"the model crashed: {error}")
    finally:
        session.save("chat", memory=memory)


def try_to_load(session: YAMLSession) -> Memory | None:
    """Load the memory; print statekit's positioned problems when it fails."""
    memory = Memory()
    try:
        session.load("chat", memory=memory)
    except StateLoadError as error:
        for problem in error.problems:
            print(f"cannot load: {problem}")
        return None
    return memory


def fix_by_hand(path: Path) -> None:
    """What a person does in an editor: delete the two lines of the empty turn."""
    text = path.read_text(encoding="utf-8")
    broken = "  - role: assistant\n    content: ''\n"
    print(f"deleting from {path.name}:\n{broken}", end="")
    path.write_text(text.replace(broken, ""), encoding="utf-8")


def main() -> None:
    """Crash, fail to load, fix the file by hand, load."""
    parser = argparse.ArgumentParser(description="Fix a broken YAML session by hand.")
    parser.add_argument("--dir", default="./sessions", help="where sessions are kept")
    parser.add_argument("text", nargs="?", default="Summarise our chat.", help="the message whose reply crashes")
    args = parser.parse_args()
    with YAMLSession(args.dir) as session:
        crash_during_a_turn(session, args.text)
        assert try_to_load(session) is None
        fix_by_hand(session.session_path("chat"))
        memory = try_to_load(session)
    assert memory is not None
    print(f"loaded after the fix: {len(memory.turns)} turns, the last by {memory.turns[-1].role}")


if __name__ == "__main__":
    main()
