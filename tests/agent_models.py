"""Module-level agent classes for the property tests (and any other test).

They cover what the issue asks statekit to carry: nested modules (declared and
found at run time), an optional module that refers to its own class before it
exists (a forward reference), value records with Enum / datetime / UUID / Path /
tuple / set / frozenset / dict fields, the message shape agents use, plain
``attrs.field()`` attributes that are not state, and imperative
``register_state`` modules, including the reference's ``ClassA`` / ``ClassB``
verbatim (only the import changed).

Every class builds with no argument, so a test can make a *fresh* instance of
any module it meets in a tree.
"""

from __future__ import annotations

import datetime as dt
import enum
import threading
import uuid
from pathlib import Path
from typing import Any

import attrs

from statekit import StateModule, state_field, stateful


class Role(enum.Enum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Priority(enum.Enum):
    LOW = 1
    HIGH = 2


@stateful
class Message:
    """One turn: plain text or a list of blocks (text, tool use, tool result)."""

    role: Role
    content: str | list[dict[str, Any]]
    name: str | None = None


@stateful
class Param:
    name: str
    required: bool
    priority: Priority


@stateful
class ToolSpec:
    description: str
    params: list[Param]
    timeout: float = 30.0


@stateful
class Record:
    """A value record with every non-JSON type the issue lists."""

    priority: Priority
    when: dt.datetime
    ident: uuid.UUID
    where: Path
    span: tuple[int, int]
    labels: set[str]
    ids: frozenset[int]
    counts: dict[str, int]
    note: str | None = None


@stateful
class Memory(StateModule):
    content: list[Message] = state_field(factory=list)
    summary: str = state_field(default="")


@stateful
class Toolkit(StateModule):
    groups: dict[str, list[str]] = state_field(factory=dict)
    active: set[str] = state_field(factory=set)
    tools: dict[str, ToolSpec] = state_field(factory=dict)
    records: list[Record] = state_field(factory=list)
    flags: tuple[bool, ...] = state_field(default=())


@stateful
class Plan(StateModule):
    goal: str = state_field(default="")
    steps: list[str] = state_field(factory=list)
    progress: float = state_field(default=0.0)
    # A forward reference to the class being defined: resolved on first use.
    subplan: Plan | None = state_field(default=None)


class ClassA(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.cnt = 123
        # register cnt attribute as state
        self.register_state("cnt")


class ClassB(StateModule):
    def __init__(self) -> None:
        super().__init__()

        # attribute "a" inherits from StateModule
        self.a = ClassA()

        # register attribute "c" as state manually
        self.c = "Hello, world!"
        self.register_state("c")


@stateful
class Counted(StateModule):
    """A declared field, and state it registers when built."""

    name: str = state_field(default="a")

    def __attrs_post_init__(self) -> None:
        self.counter = 0
        self.register_state("counter")
        self.scratch = Memory()  # an undeclared attribute holding a module


def _sorted_list(value: set[str]) -> list[str]:
    return sorted(value)


def _to_set(data: list[str]) -> set[str]:
    return set(data)


class Scratchpad(StateModule):
    """Imperative module: registered list, registered set with a codec, a nested module."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[Any] = []
        self.register_state("notes")
        self.tags: set[str] = set()
        self.register_state("tags", custom_to_json=_sorted_list, custom_from_json=_to_set)
        self.memory = Memory()
        self.client = object()  # not state


@stateful
class Agent(StateModule):
    name: str = state_field(default="agent")
    sys_prompt: str = state_field(default="")
    memory: Memory = state_field(factory=Memory)
    toolkit: Toolkit = state_field(factory=Toolkit)
    plan: Plan | None = state_field(default=None)
    turns: int = state_field(default=0)
    temperature: float = state_field(default=0.7)
    started: dt.datetime | None = state_field(default=None)
    extra: dict[str, Any] = state_field(factory=dict)
    scratch: Scratchpad = state_field(factory=Scratchpad)
    model: Any = attrs.field(default=None)  # a model client: not state


@stateful
class Team(StateModule):
    lead: Agent = state_field(factory=Agent)
    # Plain attrs fields that hold a module: state all the same.
    pad: ClassB = attrs.field(factory=ClassB)
    budget: int = state_field(default=0)
    lock: Any = attrs.field(factory=threading.Lock, eq=False)  # not state


MODULE_CLASSES: tuple[type[StateModule], ...] = (Memory, Toolkit, Plan, ClassA, ClassB, Scratchpad, Agent, Team)
"""Every module class here; each builds with no argument."""

FREE_KEYS = {("ClassA", "cnt"), ("ClassB", "c"), ("Scratchpad", "notes"), ("Scratchpad", "tags")}
"""Imperative state that takes any JSON data (no type to check against)."""
