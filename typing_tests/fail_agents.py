"""Misuses that ``mypy --strict`` must reject: each line ending in an E-comment must error.

tests/test_typing.py runs mypy on this file and checks that every marked line,
and only those, is reported.
"""

from __future__ import annotations

from statekit import StateModule, state_field, stateful


@stateful
class Agent(StateModule):
    name: str = state_field()
    turns: int = state_field(default=0)
    wrong: str = state_field(default=0)  # E: wrong default type
    tags: list[str] = state_field(factory=dict)  # E: wrong factory type


Agent()  # E: missing argument
Agent(name="x", turns="3")  # E: wrong field type
Agent(name="x", colour="red")  # E: unknown keyword
Agent(name="x").turns = "many"  # E: wrong attribute type
Agent(name="x").load_state_dict([1, 2])  # E: state is a mapping
