"""A save refuses what a load would refuse, and a load builds what was saved.

Found by a bug hunt (session 7): literal, enum, UUID, path and date fields
were written unchecked, so that every later load refused the file (or, for a
path, loaded another value); enum members without a JSON form were written as
lists or ``null``; records with their own ``__init__`` were built with their
values in the wrong fields; an unset ``init=False`` field crashed a save.
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from pathlib import Path
from typing import Any, Literal, Optional

import attrs
import pytest

from statekit import JSONSession, StateModule, make_converter, state_field, stateful
from statekit.errors import StateDefinitionError, StateDumpError


class Color(enum.Enum):
    RED = "red"


class Shape(enum.Enum):
    SQUARE = "square"


@stateful
class Tag:
    name: str


@stateful
class TagPlus(Tag):
    """A subclass: its ``weight`` would be lost in a ``Tag`` field."""

    weight: int = 0


@attrs.define
class Lookalike:
    """Another class with the same attribute."""

    name: str


@stateful
class Stamped:
    """A record with a codec (dumped by cattrs' generated code, not statekit's)."""

    at: str = state_field(to_json=str.upper, from_json=str.lower)


@stateful
class StampedPlus(Stamped):
    by: str = ""


def holder(tp: Any, default: Any) -> Any:
    """A module class with one field, ``value: tp = default``."""
    namespace = {"__annotations__": {"value": tp}, "value": state_field(default=default)}
    return stateful(type("Holder", (StateModule,), namespace))


@pytest.mark.parametrize(
    ("tp", "default", "bad", "message"),
    [
        (Literal["fast", "slow"], "fast", "medium", "expected one of 'fast', 'slow', got a string"),
        (Literal[1, 2], 1, True, "expected one of 1, 2, got a boolean"),
        (Literal[1, 2], 1, 1.0, "expected one of 1, 2, got a number"),
        (Color, Color.RED, Shape.SQUARE, "expected a member of Color, got a Shape"),
        (Literal[Color.RED, "x"], "x", Shape.SQUARE, "expected one of <Color.RED: 'red'>, 'x', got a Shape"),
        (list[Literal["x"]], None, ["x", "y"], "expected one of 'x', got a string"),
        (Optional[Literal["a"]], None, "b", "expected one of 'a', got a string"),
        (dict[Literal["k"], int], None, {"j": 1}, "expected one of 'k', got a string"),
        (uuid.UUID, None, "6f1c0d0e-0000-4000-8000-000000000000", "expected a UUID, got a string"),
        (Path, None, ["a"], "expected a path, got a list"),
        (dt.date, None, dt.datetime(2025, 1, 2, 3, 4), "expected a date, got a datetime"),
        (dt.datetime, None, "2025-01-02", "expected a datetime, got a string"),
        (Tag, None, TagPlus("a", 1), "expected a Tag, got a TagPlus"),
        (Tag, None, Lookalike("a"), "expected a Tag, got a Lookalike"),
        (list[Tag], None, [Tag("a"), TagPlus("b", 2)], "value[1]: expected a Tag, got a TagPlus"),
        (Optional[Tag], None, Lookalike("a"), "expected a Tag, got a Lookalike"),
        (dict[str, Stamped], None, {"k": StampedPlus("x", "me")}, "value.k: expected a Stamped, got a StampedPlus"),
        (Tag | Stamped | None, None, TagPlus("a", 1), "expected a Tag or a Stamped or null, got a TagPlus"),
        (list[Tag | Stamped], None, [Stamped("x"), Lookalike("a")], "value[1]: expected a Tag or a Stamped, got a Lookalike"),
        (list[Tag], None, (Tag("a"),), "value: expected list[test_save_refuses.Tag], got a tuple"),
        (list[Tag], None, iter([Tag("a")]), "value: expected list[test_save_refuses.Tag], got a list_iterator"),
        (tuple[int, ...], None, [1, 2], "value: expected tuple[int, ...], got a list"),
        (tuple[int, str], None, [1, "a"], "value: expected tuple[int, str], got a list"),
        (set[int], None, [1, 1], "value: expected set[int], got a list"),
        (set[int], None, frozenset({1}), "value: expected set[int], got a frozenset"),
        (frozenset[str], None, {"a"}, "value: expected frozenset[str], got a set"),
    ],
)
def test_a_save_refuses_a_value_outside_its_type(tmp_path: Path, tp: Any, default: Any, bad: Any, message: str) -> None:
    module = holder(tp, default)()
    module.value = bad
    with pytest.raises(StateDumpError) as dumping:
        module.state_dict()
    assert message in str(dumping.value)
    with pytest.raises(StateDumpError, match=r"m\.value"):
        JSONSession(tmp_path).save("s", m=module)
    assert list(tmp_path.iterdir()) == []


def test_values_inside_their_type_round_trip(tmp_path: Path) -> None:
    cases = [
        (Literal[Color.RED, "x"], Color.RED),
        (Literal[1, 2], 2),
        (Color, Color.RED),
        (Optional[Literal["a"]], "a"),
        (dt.date, dt.date(2025, 1, 2)),
        (Path, Path("a/b")),
        (list[Tag], [Tag("a")]),
        (Tag | Stamped | None, Stamped("x")),
        (dict[str, Stamped], {"k": Stamped("y")}),
        (tuple[int, ...], (1, 2)),
        (set[int], {3, 1}),
        (frozenset[str], frozenset({"a"})),
    ]
    for index, (tp, value) in enumerate(cases):
        cls = holder(tp, None)
        saved, loaded = cls(), cls()
        saved.value = value
        JSONSession(tmp_path).save(f"s{index}", m=saved)
        JSONSession(tmp_path).load(f"s{index}", m=loaded)
        assert (type(loaded.value), loaded.value) == (type(value), value)


class Pair(enum.Enum):
    A = (1, 2)


class Odd(enum.Enum):
    N = float("nan")


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (Pair, "Pair.A = (1, 2): has no JSON form"),
        (Odd, "Odd.N = nan: has no JSON form"),
        (Literal[b"x"], "the literal = b'x': has no JSON form"),
        (list[Pair], "Pair.A = (1, 2): has no JSON form"),
        (Literal[2**70], "the literal = 1180591620717411303424: an integer of 71 bits; orjson, statekit's JSON writer, holds integers"),
        (Literal["a\ud800"], "which UTF-8 cannot hold"),  # the JSON codec's own refusal
    ],
)
def test_enum_and_literal_values_without_a_json_form_are_refused_where_they_are_used(tp: Any, message: str) -> None:
    with pytest.raises(StateDefinitionError, match=rf"Holder\.value: .*{message}".replace("(", r"\(").replace(")", r"\)")):
        holder(tp, None)


def test_an_enum_without_a_json_form_is_fine_with_a_users_hooks(tmp_path: Path) -> None:
    converter = make_converter()
    converter.register_unstructure_hook(Pair, lambda member: member.name)
    converter.register_structure_hook(Pair, lambda name, _: Pair[name])

    @stateful(converter=converter)
    class Holds(StateModule):
        pair: Pair = state_field(default=Pair.A)

    assert Holds().state_dict() == {"pair": "A"}
    JSONSession(tmp_path).save("s", m=Holds())
    loaded = Holds(pair=Pair.A)
    JSONSession(tmp_path).load("s", m=loaded)
    assert loaded.pair is Pair.A


@stateful
class Reordered:
    """A record whose own ``__init__`` takes its fields in another order (attrs' documented pattern)."""

    a: int
    b: str
    c: int = 0

    def __init__(self, b: str, a: int, c: int = 0) -> None:
        self.__attrs_init__(a, b, c)  # type: ignore[attr-defined]  # attrs adds it (mypy does not know)


@stateful
class HoldsReordered(StateModule):
    record: Reordered = state_field(factory=lambda: Reordered(b="x", a=1))
    records: list[Reordered] = state_field(factory=list)


def test_a_record_with_its_own_init_is_built_by_keyword(tmp_path: Path) -> None:
    saved = HoldsReordered()
    saved.records = [Reordered(b="y", a=2, c=3)]
    JSONSession(tmp_path).save("s", m=saved)
    by_session = HoldsReordered(record=Reordered(b="", a=0))
    JSONSession(tmp_path).load("s", m=by_session)  # the typed path
    assert (by_session.record, by_session.records) == (saved.record, saved.records)
    for state in ({"record": {"a": 1, "b": "x", "c": 0}, "records": []}, {"record": {"a": 1, "b": "x"}, "records": []}):
        loaded = HoldsReordered(record=Reordered(b="", a=0))
        loaded.load_state_dict(state)  # all keys (generated code) and a default left out (cattrs)
        assert loaded.record == Reordered(b="x", a=1)


@stateful
class Late(StateModule):
    """``later`` is set after construction; ``client`` is a plain attribute, not state."""

    count: int = state_field(default=0)
    later: int = state_field(init=False)
    client: object = attrs.field(init=False)


def test_an_unset_init_false_state_field_is_a_dump_error(tmp_path: Path) -> None:
    with pytest.raises(StateDumpError, match=r"m\.later: has no value \(an init=False field that was never set\)"):
        JSONSession(tmp_path).save("s", m=Late())
    assert list(tmp_path.iterdir()) == []
    late = Late()
    late.later = 5
    assert late.state_dict() == {"count": 0, "later": 5}  # an unset plain attribute is nobody's business
