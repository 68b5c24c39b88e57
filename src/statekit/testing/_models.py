"""The contract's shared models, data and helpers: what every group of checks builds on."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from statekit._fields import state_field
from statekit._module import StateModule, stateful
from statekit.session import SessionBase

SessionFactory = Callable[[], SessionBase]
Check = Callable[[SessionFactory], Coroutine[Any, Any, None]]

LARGE_SESSION_MESSAGES = 100_000

HOSTILE_IDS: tuple[tuple[str, str], ...] = (
    ("", "../../x"),
    ("/etc", "passwd"),
    ("..", ".."),
    ("a_b", "c"),
    ("a", "b_c"),
    ("Alice", "x"),
    ("alice", "x"),
    ("a:session:b", "c"),
    ("a", "b:session:c"),
    ("", "@x"),
    ("x", "con"),
    ("x", "CON.json"),
    ("x", "trailing."),
    ("x", "%2E%2E"),
    ("x", "*"),
    ("x", "[ab]?"),
    ("x", "back\\slash"),
    ("x", "new\nline"),
    ("x", "ümlaut 😀 空"),
    ("x", "caf\u00e9"),  # and the same word decomposed: a normalizing store would merge them
    ("x", "cafe\u0301"),
    ("x", "a" * 60),
)
"""Pairs of (user_id, session_id) that must neither escape nor collide."""

TRICKY_TEXTS: tuple[str, ...] = (
    "emoji 😀👩‍👩‍👧 and flags 🇫🇷",
    "空海 한국어 العربية עברית",
    "combining e\u0301 and zero\u200bwidth",
    "line one\nline two\n",
    "trailing spaces   \nand\ttabs\t",
    "\u2028 line and paragraph \u2029 separators, \x85 next line",
    "nul \x00 and bell \x07 and escape \x1b[0m",
    'quotes " \' and backslash \\',
    "yes",
    "null",
    "~",
    "1e3",
    "0x1F",
    "2025-08-15",
    "---",
    "...",
    " leading and trailing ",
    "\ufeffbom",
    "",
)
"""Text every backend must give back exactly."""


@stateful
class Message:
    """One message of a :class:`Chat`."""

    role: str
    content: str | list[dict[str, Any]]


@stateful
class Chat(StateModule):
    """A small agent-like module: a name and messages."""

    name: str = state_field(default="chat")
    messages: list[Message] = state_field(factory=list)


@stateful
class Counter(StateModule):
    """A second, differently shaped module."""

    count: int = state_field(default=0)


@stateful
class Journal(StateModule):
    """A module with an append-only list: saves after appends store only the new items where a backend can."""

    entries: list[str] = state_field(factory=list, append_only=True)
    title: str = state_field(default="journal")


@stateful
class Tally(StateModule):
    """A counter for the update checks."""

    count: int = state_field(default=0)


@stateful
class Note(StateModule):
    """A second module of the session, for the checks."""

    text: str = state_field(default="")


def fresh_user() -> str:
    """A user id no other check uses (a shared, non-empty storage is fine)."""
    return f"contract-{uuid.uuid4().hex}"
