"""Misuses that ``mypy --strict`` and pyright must reject, each with the message it must give.

A line ending in ``# E`` must be reported by both checkers, with the messages
pinned in the comments just above it, so that a line failing for another
reason fails the test:

- ``# mypy says: MESSAGE  [code]``: one per error mypy gives on the line, exactly;
- ``# pyright says: rule: TEXT``: pyright's error has this rule, and TEXT is
  part of its message (whose lines run together, spaces collapsed).

No other line may be reported. tests/test_typing.py runs both checkers.
"""

from __future__ import annotations

from typing import Any

from statekit import JSONSession, StateModule, state_field, stateful


@stateful
class Agent(StateModule):
    name: str = state_field()
    turns: int = state_field(default=0)
    # mypy says: Incompatible types in assignment (expression has type "int", variable has type "str")  [assignment]
    # pyright says: reportAssignmentType: Type "int" is not assignable to declared type "str"
    wrong: str = state_field(default=0)  # E
    # mypy says: Argument "factory" to "state_field" has incompatible type "type[dict[_KT, _VT]]"; expected "Callable[[], list[str]]"  [arg-type]
    # pyright says: reportAssignmentType: Type "dict[Unknown, Unknown]" is not assignable to declared type "list[str]"
    tags: list[str] = state_field(factory=dict)  # E


# mypy says: Missing positional argument "name" in call to "Agent"  [call-arg]
# pyright says: reportCallIssue: Argument missing for parameter "name"
Agent()  # E
# mypy says: Argument "turns" to "Agent" has incompatible type "str"; expected "int"  [arg-type]
# pyright says: reportArgumentType: Argument of type "Literal['3']" cannot be assigned to parameter "turns" of type "int"
Agent(name="x", turns="3")  # E
# mypy says: Unexpected keyword argument "colour" for "Agent"  [call-arg]
# pyright says: reportCallIssue: No parameter named "colour"
Agent(name="x", colour="red")  # E
# mypy says: Incompatible types in assignment (expression has type "str", variable has type "int")  [assignment]
# pyright says: reportAttributeAccessIssue: Cannot assign to attribute "turns" for class "Agent" "Literal['many']" is not assignable to "int"
Agent(name="x").turns = "many"  # E
# mypy says: Argument 1 to "load_state_dict" of "StateModule" has incompatible type "list[int]"; expected "Mapping[str, Any]"  [arg-type]
# pyright says: reportArgumentType: Argument of type "list[int]" cannot be assigned to parameter "state" of type "Mapping[str, Any]"
Agent(name="x").load_state_dict([1, 2])  # E


def upgrade(state: dict[str, Any]) -> dict[str, Any]:
    return state


def upgrade_text(state: str) -> str:
    return state


# mypy says: No overload variant of "stateful" matches argument types "str", "dict[int, Callable[[dict[str, Any]], dict[str, Any]]]"  [call-overload]
# pyright says: reportArgumentType: Argument of type "Literal['2']" cannot be assigned to parameter "version" of type "int"
@stateful(version="2", migrations={1: upgrade})  # E
class QuotedVersion(StateModule):
    name: str = state_field(default="")


# mypy says: Dict entry 0 has incompatible type "int": "Callable[[str], str]"; expected "int": "Callable[[dict[str, Any]], dict[str, Any]]"  [dict-item]
# pyright says: reportArgumentType: Parameter 1: type "dict[str, Any]" is incompatible with type "str" Function return type "str" is incompatible with type "dict[str, Any]"
@stateful(version=2, migrations={1: upgrade_text})  # E
class WrongMigration(StateModule):
    name: str = state_field(default="")


# mypy says: Dict entry 0 has incompatible type "str": "Callable[[dict[str, Any]], dict[str, Any]]"; expected "int": "Callable[[dict[str, Any]], dict[str, Any]]"  [dict-item]
# pyright says: reportArgumentType: Type parameter "_KT@Mapping" is invariant, but "str" is not the same as "int"
@stateful(version=2, migrations={"1": upgrade})  # E
class TextStep(StateModule):
    name: str = state_field(default="")


# mypy says: No overload variant of "stateful" matches argument types "int", "list[Callable[[dict[str, Any]], dict[str, Any]]]"  [call-overload]
# pyright says: reportArgumentType: "list[(state: dict[str, Any]) -> dict[str, Any]]" is not assignable to "Mapping[int, Migration]"
@stateful(version=2, migrations=[upgrade])  # E
class ListOfSteps:
    name: str = ""


# mypy says: Dict entry 0 has incompatible type "int": "Callable[[], dict[Never, Never]]"; expected "int": "Callable[[dict[str, Any]], dict[str, Any]]"  [dict-item]
# mypy says: Cannot infer type of lambda  [misc]
# pyright says: reportArgumentType: Function accepts too few positional parameters; expected 1 but received 0
@stateful(version=2, migrations={1: lambda: {}})  # E
class NoArgument:
    name: str = ""


def parse_turns(value: Any) -> str:
    return str(value)


@stateful
class Codecs(StateModule):
    # mypy says: Argument "from_json" to "state_field" has incompatible type "Callable[[Any], str]"; expected "Callable[[Any], int] | None"  [arg-type]
    # pyright says: reportAssignmentType: Type "str | int" is not assignable to declared type "int"
    turns: int = state_field(default=0, from_json=parse_turns)  # E
    # mypy says: No overload variant of "state_field" matches argument types "str", "str"  [call-overload]
    # pyright says: reportArgumentType: Argument of type "Literal['yes']" cannot be assigned to parameter "secret" of type "bool"
    api_key: str = state_field(default="", secret="yes")  # E


# mypy says: Argument "agent" to "save" of "BlockingTwins" has incompatible type "int"; expected "StateModule | SupportsState"  [arg-type]
# pyright says: reportArgumentType: Argument of type "Literal[5]" cannot be assigned to parameter "agent" of type "StateModule | SupportsState"
JSONSession("sessions").save("s", agent=5)  # E
# mypy says: Argument "strict" to "load_state_dict" of "StateModule" has incompatible type "str"; expected "bool"  [arg-type]
# pyright says: reportArgumentType: Argument of type "Literal['no']" cannot be assigned to parameter "strict" of type "bool"
Agent(name="x").load_state_dict({}, strict="no")  # E
# mypy says: Incompatible types in assignment (expression has type "dict[str, LoadResult]", variable has type "int")  [assignment]
# pyright says: reportAssignmentType: Type "dict[str, LoadResult]" is not assignable to declared type "int"
loaded: int = JSONSession("sessions").load("s", agent=Agent(name="x"))  # E
# mypy says: Argument "ttl" to "lease" of "LeaseMethods" has incompatible type "str"; expected "float"  [arg-type]
# pyright says: reportArgumentType: Argument of type "Literal['30']" cannot be assigned to parameter "ttl" of type "float"
JSONSession("sessions").lease("s", ttl="30")  # E
# mypy says: Incompatible types in assignment (expression has type "Lease", variable has type "int")  [assignment]
# pyright says: reportAssignmentType: Type "Lease" is not assignable to declared type "int"
token: int = JSONSession("sessions").lease("s")  # E
