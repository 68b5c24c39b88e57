"""Cycles and the depth limit in the state layer (issue 9, items 1 and 7)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

import pytest

from statekit import JSONSession, StateModule, StateLoadError, state_field, stateful
from statekit._limits import MAX_DEPTH, shallow_bytes
from statekit.errors import StateDumpError, StatekitError

LIMIT = f"nested deeper than {MAX_DEPTH} levels"


@stateful
class Link(StateModule):
    label: str = state_field(default="")
    next: Optional[Link] = state_field(default=None)


@stateful
class Blob(StateModule):
    data: Any = state_field(default=None)


@dataclasses.dataclass
class Tree:
    children: list[Tree] = dataclasses.field(default_factory=list)


@stateful
class Forest(StateModule):
    tree: Tree = state_field(factory=Tree)


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def chain(length: int) -> Link:
    head = Link("0")
    current = head
    for index in range(1, length):
        current.next = Link(str(index))
        current = current.next
    return head


def test_a_module_holding_itself_names_where_the_cycle_closes() -> None:
    link = Link("self")
    link.next = link
    with pytest.raises(StateDumpError) as caught:
        link.state_dict()
    (problem,) = caught.value.problems
    assert problem.dotted == "next"
    assert "the state contains itself: this is the same object as <root>" in problem.message


def test_two_modules_holding_each_other_name_where_the_cycle_closes(tmp_path: Path) -> None:
    first, second = Link("a"), Link("b")
    first.next, second.next = second, first
    with pytest.raises(StateDumpError, match=r"next\.next: the state contains itself: .* as <root>"):
        first.state_dict()
    session = JSONSession(tmp_path)
    with pytest.raises(StateDumpError, match=r"agent\.next\.next: .* same object as agent,"):
        session.save("s1", agent=first)
    assert not session.exists("s1")
    session.close()


def test_an_undeclared_attribute_holding_its_owner_is_a_cycle() -> None:
    class Owner(StateModule):
        def __init__(self) -> None:
            self.child = Blob()
            self.child.owner = self  # type: ignore[attr-defined]

    with pytest.raises(StateDumpError, match=r"child\.owner: the state contains itself: .* as <root>"):
        Owner().state_dict()


def test_a_long_chain_of_modules_within_the_limit_round_trips() -> None:
    head = chain(MAX_DEPTH)
    state = head.state_dict()
    fresh = Link()
    fresh.load_state_dict(state)
    assert fresh == head


@pytest.mark.parametrize("length", [MAX_DEPTH + 1, 2000])
def test_a_chain_past_the_limit_is_a_clear_error(length: int) -> None:
    with pytest.raises(StateDumpError) as caught:
        chain(length).state_dict()
    (problem,) = caught.value.problems
    assert problem.path == ("next",) * MAX_DEPTH
    assert LIMIT in problem.message and "MAX_DEPTH" in problem.message


def test_a_value_holding_itself_names_where_the_cycle_closes() -> None:
    loop: list[Any] = [1, {"k": []}]
    loop[1]["k"].append(loop)
    with pytest.raises(StateDumpError, match=r"data\[1\]\.k\[0\]: the state contains itself: .* as data,"):
        Blob(loop).state_dict()


def test_a_record_holding_itself_names_where_the_cycle_closes() -> None:
    tree = Tree()
    tree.children.append(Tree([tree]))
    with pytest.raises(StateDumpError, match=r"tree\.children\[0\]\.children\[0\]: the state contains itself"):
        Forest(tree).state_dict()


def test_values_past_the_limit_are_refused_both_ways() -> None:
    deep = Blob(nested(MAX_DEPTH + 5))
    with pytest.raises(StateDumpError, match=LIMIT):
        deep.state_dict()
    target = Blob("kept")
    with pytest.raises(StateLoadError, match=LIMIT):
        target.load_state_dict({"data": nested(MAX_DEPTH + 5)})
    assert target.data == "kept"


def test_values_within_the_limit_round_trip() -> None:
    value = nested(MAX_DEPTH - 1)  # plus the state dict itself: exactly the limit
    assert Blob(value).state_dict() == {"data": value}
    target = Blob()
    target.load_state_dict({"data": value})
    assert target.data == value


@pytest.mark.parametrize("levels", [MAX_DEPTH, 1000, 5000])
def test_a_deep_value_in_a_session_is_a_statekit_error_and_writes_nothing(tmp_path: Path, levels: int) -> None:
    session = JSONSession(tmp_path)
    with pytest.raises(StatekitError, match="MAX_DEPTH"):
        session.save("s1", blob=Blob(nested(levels)))
    assert not session.exists("s1")
    session.close()


def test_a_cyclic_input_to_load_is_refused_and_changes_nothing() -> None:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    target = Blob("kept")
    with pytest.raises(StateLoadError, match=LIMIT):
        target.load_state_dict({"data": loop})
    assert target.data == "kept"


@pytest.mark.parametrize("opening", [b"[", b"{"])
def test_the_quick_depth_count_takes_up_to_the_limit_of_opening_brackets(opening: bytes) -> None:
    """``shallow_bytes`` says "certainly within the limit" for at most MAX_DEPTH opening brackets of
    either kind (inside strings too: they only make the count larger), and leaves the rest to the walk."""
    filler = b'"x" ' * 100
    assert shallow_bytes(filler + opening * (MAX_DEPTH - 1) + b"{")
    assert not shallow_bytes(filler + opening * MAX_DEPTH + b"[")
    assert shallow_bytes(b'["' + b"{" * (MAX_DEPTH - 1) + b'"]')
    assert not shallow_bytes(b'["' + b"{" * MAX_DEPTH + b'"]')
