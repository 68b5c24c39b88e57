"""Modules with append-only lists, for the append tests and their worker processes."""

from __future__ import annotations

from statekit import StateModule, state_field, stateful


@stateful(frozen=True)
class Msg:
    """One message: immutable, so an append-only list may hold it."""

    role: str
    text: str


@stateful
class Memory(StateModule):
    """An agent's memory: messages that only grow, and a note that may change."""

    content: list[Msg] = state_field(factory=list, append_only=True)
    note: str = state_field(default="")


@stateful
class Agent(StateModule):
    """A module holding a memory and a list of append-only scalars."""

    memory: Memory = state_field(factory=Memory)
    events: list[int] = state_field(factory=list, append_only=True)


@stateful(frozen=True)
class NumberedMsg:
    """A message of an older shape (its text an integer): loaded as :class:`Msg`, every item is a problem."""

    role: str
    text: int


@stateful
class NumberedMemory(StateModule):
    """A memory of :class:`NumberedMsg`."""

    content: list[NumberedMsg] = state_field(factory=list, append_only=True)


@stateful
class TextMemory(StateModule):
    """A memory of :class:`Msg` alone (no note): loads what :class:`NumberedMemory` saved, but for the texts."""

    content: list[Msg] = state_field(factory=list, append_only=True)


@stateful
class Vault(StateModule):
    """A secret beside an append-only list: the copy tests carry both from store to store."""

    token: str = state_field(default="", secret=True)
    keys: list[str] = state_field(factory=list, append_only=True)


@stateful
class KeyedMemory(StateModule):
    """A memory with a secret API key (encrypted at rest under a session's ``secret_key``)."""

    api_key: str = state_field(default="", secret=True)
    content: list[Msg] = state_field(factory=list, append_only=True)
