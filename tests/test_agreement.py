"""The generated fast path and cattrs' path cannot disagree (issue 9, item 10).

A field's load hooks (``FieldPlan.load_strict``, ``load_lenient`` and the
session's ``load_fresh``) run a fast function first and cattrs' detailed hook
when it gives up. Whatever the type and the data, they must give what cattrs'
hook alone gives: an equal value of the same types, or the same problems.
Any future fast mechanism must keep this file green.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from collections.abc import Callable
from typing import Any

import attr
import attrs
import cattrs
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from statekit import StateModule, StateDefinitionError, StateLoadError, make_converter, state_field, stateful
from statekit.values.converter import lenient
from statekit.values.problems import problems_of
from statekit.state.plan import FieldPlan

from strategies import data_for, examples, json_data, json_union_records, made_once, record_type, record_types, value_types

Outcome = tuple[str, Any]


def outcome(run: Callable[[], Any]) -> Outcome:
    """``("ok", shape of the value)`` or ``("error", the problems, sorted)``."""
    try:
        return "ok", shape(run())
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return "error", sorted((tuple(map(str, p)), m) for p, m in problems_of(exc))


def shape(value: Any) -> Any:
    """The value with every type spelled out (``True`` is not ``1``, a tuple is not a list)."""
    kind = type(value)
    if attrs.has(kind):
        return kind, tuple(shape(getattr(value, f.name)) for f in attrs.fields(kind))
    if dataclasses.is_dataclass(value):
        return kind, tuple(shape(getattr(value, f.name)) for f in dataclasses.fields(value))
    if kind in (list, tuple):
        return kind, tuple(shape(v) for v in value)
    if kind in (set, frozenset):
        return kind, tuple(sorted((repr(shape(v)) for v in value)))
    if kind is dict:
        return kind, tuple((k, shape(v)) for k, v in value.items())
    return kind, value


def holder_plan(tp: Any, converter: cattrs.Converter | None = None) -> FieldPlan:
    """The plan of a field of type ``tp`` in a fresh module class."""
    namespace = {"__annotations__": {"value": tp}, "value": state_field(default=None)}
    holder: Any = stateful(converter=converter)(type("Holder", (StateModule,), namespace))
    plan: FieldPlan = holder.__statekit_plan__.by_name["value"]
    return plan


reused_holder_plan = made_once(holder_plan)
""":func:`holder_plan` with statekit's converter, made once per drawn type."""


def assert_agree(plan: FieldPlan, conv: cattrs.Converter, tp: Any, data: Any) -> None:
    strict, loose = conv.get_structure_hook(tp), lenient(conv).get_structure_hook(tp)
    expected = outcome(lambda: strict(copy.deepcopy(data), tp))
    assert plan.load_strict is not None and plan.load_lenient is not None
    assert outcome(lambda: plan.load_strict(copy.deepcopy(data))) == expected  # type: ignore[misc]
    if plan.load_fresh is not None:
        assert outcome(lambda: plan.load_fresh(copy.deepcopy(data))) == expected  # type: ignore[misc]
    expected_loose = outcome(lambda: loose(copy.deepcopy(data), tp))
    assert outcome(lambda: plan.load_lenient(copy.deepcopy(data))) == expected_loose  # type: ignore[misc]


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_and_cattrs_paths_agree_on_random_types_and_data(data: st.DataObject) -> None:
    tp = data.draw(st.one_of(value_types, record_types, json_union_records), label="type")
    try:
        plan = reused_holder_plan(tp)
    except StateDefinitionError:
        return  # a type statekit refuses at definition: nothing to compare
    from statekit.state.plan import DEFAULT_CONVERTER

    values = st.one_of(data_for(tp), data_for(tp, noisy=True), data_for(tp, noisy=True), json_data)
    for value in data.draw(st.lists(values, min_size=4, max_size=4), label="data"):
        assert_agree(plan, DEFAULT_CONVERTER, tp, value)


def shouting() -> cattrs.Converter:
    conv = make_converter()
    conv.register_structure_hook(str, lambda value, _: str(value).upper())
    return conv


@stateful
class Line:
    role: str
    text: str


@pytest.mark.parametrize("data", [{"role": "user", "text": "hi"}, {"role": "user", "text": 3}, {"role": "user"}])
def test_a_user_hook_for_str_inside_a_record_is_honoured_by_both_paths(data: dict[str, Any]) -> None:
    conv = shouting()
    plan = holder_plan(list[Line], conv)
    assert_agree(plan, conv, list[Line], [data])
    if "text" in data:
        assert plan.load_strict([data]) == [Line("USER", str(data["text"]).upper())]  # type: ignore[misc]


def test_a_hook_registered_after_first_use_reaches_strict_and_lenient_loads() -> None:
    conv = make_converter()
    holder_plan(Line, conv)  # first use: the lenient twin is made now
    conv.register_structure_hook(str, lambda value, _: str(value).upper())
    plan = holder_plan(Line, conv)
    good = {"role": "user", "text": "hi"}
    assert plan.load_strict(good) == Line("USER", "HI")  # type: ignore[misc]
    assert plan.load_lenient({**good, "extra": 1}) == Line("USER", "HI")  # type: ignore[misc]


def test_from_json_runs_once_when_a_record_fails() -> None:
    calls: list[Any] = []

    def parse(value: Any) -> str:
        calls.append(value)
        return str(value)

    @stateful
    class Tagged:
        tag: str = state_field(from_json=parse)
        count: int = 0

    @stateful
    class Box(StateModule):
        items: list[Tagged] = state_field(factory=list)

    box = Box()
    with pytest.raises(StateLoadError, match=r"items\[1\]\.count: expected an integer"):
        box.load_state_dict({"items": [{"tag": "a", "count": 1}, {"tag": "b", "count": "x"}]})
    assert calls == ["a", "b"]
    calls.clear()
    box.load_state_dict({"items": [{"tag": "a", "count": 1}]})
    assert calls == ["a"] and box.items == [Tagged("a", 1)]


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@pytest.mark.parametrize(
    ("tp", "data"),
    [
        (bool, 1),
        (bool, 0.0),
        (int, True),
        (int, 1.0),
        (float, 3),
        (float, True),
        (str, 1),
        (str, None),
        (str | None, None),
        (list[int], [1, "2"]),
        (tuple[int, str], [1]),
        (Level, 2),
        (dict[str, list[Line]], {"a": [{"role": "r", "text": "t", "zz": 1}]}),
    ],
)
def test_edge_cases_agree(tp: Any, data: Any) -> None:
    from statekit.state.plan import DEFAULT_CONVERTER

    assert_agree(holder_plan(tp), DEFAULT_CONVERTER, tp, data)
    record = record_type([tp, str])  # the same inside a record, where generated code checks it inline
    records: Any = list[record]  # type: ignore[valid-type]
    for item in ({"f0": data, "f1": "x"}, {"f0": data, "f1": 1}, {"f0": data}):
        assert_agree(holder_plan(record), DEFAULT_CONVERTER, record, item)
        assert_agree(holder_plan(records), DEFAULT_CONVERTER, records, [item])


@attr.s
class Loose:
    """An attrs class without annotations: its attributes take any JSON data."""

    x = attr.ib()  # type: ignore[var-annotated]
    y = attr.ib(default=0)  # type: ignore[var-annotated]


@stateful
class HoldsLoose(StateModule):
    loose: Loose = state_field(factory=lambda: Loose(None))


@pytest.mark.parametrize(
    "data",
    [{"x": [1, {"a": None}], "y": 2}, {"x": [1, {"a": None}]}, {"x": "s", "zz": 1}, {"y": 2}],
)
def test_an_untyped_attribute_takes_any_json_data_on_both_paths(data: dict[str, Any]) -> None:
    from statekit.state.plan import DEFAULT_CONVERTER

    plan = holder_plan(Loose)
    assert_agree(plan, DEFAULT_CONVERTER, Loose, data)
    assert plan.load_strict is not None and plan.load_lenient is not None
    if data == {"x": [1, {"a": None}]}:  # y left out: cattrs' path builds it
        loaded = plan.load_strict(data)
        assert loaded == Loose([1, {"a": None}]) and loaded.x is not data["x"]
    if "zz" in data:
        assert plan.load_lenient(data) == Loose("s")


def test_an_untyped_attribute_refuses_what_is_not_json_data() -> None:
    holder = HoldsLoose(Loose("before"))
    with pytest.raises(StateLoadError, match=r"loose\.x: a set is not JSON data"):
        holder.load_state_dict({"loose": {"x": {1, 2}}})  # Python data: checked as JSON data
    assert holder.loose == Loose("before")


def _dump_outcome(run: Callable[[], Any]) -> Outcome:
    try:
        return "ok", shape(run())
    except Exception:  # noqa: BLE001 - only whether it refused is compared (the dump walks slowly to say why)
        return "error", None


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_record_dumps_agree_with_cattrs_generated_ones(data: st.DataObject) -> None:
    from cattrs.gen import make_dict_unstructure_fn

    from statekit.state.plan import DEFAULT_CONVERTER

    tp = data.draw(record_types, label="record")
    try:
        value = DEFAULT_CONVERTER.structure(data.draw(data_for(tp), label="data"), tp)
    except Exception:  # noqa: BLE001 - data the record refuses: nothing to dump
        return
    reference = make_dict_unstructure_fn(tp, DEFAULT_CONVERTER)
    ours = DEFAULT_CONVERTER.get_unstructure_hook(tp)
    assert _dump_outcome(lambda: ours(value)) == _dump_outcome(lambda: reference(value))
    field = data.draw(st.sampled_from(attrs.fields(tp)), label="field")
    bad = data.draw(st.sampled_from([(1, 2), Level.LOW, float("nan"), {1: "a"}, object()]), label="bad")
    object.__setattr__(value, field.name, bad)
    assert _dump_outcome(lambda: ours(value)) == _dump_outcome(lambda: reference(value))


def _slots(value: Any, out: list[tuple[Any, Any]]) -> None:
    """Every (container, key) where a value sits inside ``value``: record fields, list items, dict values."""
    if attrs.has(type(value)):
        items: Any = ((f.name, getattr(value, f.name)) for f in attrs.fields(type(value)))
    elif type(value) in (list, dict):
        items = enumerate(value) if type(value) is list else value.items()
    else:
        return
    for key, item in list(items):
        out.append((value, key))
        _slots(item, out)


def _put(container: Any, key: Any, bad: Any) -> None:
    if attrs.has(type(container)):
        object.__setattr__(container, key, bad)  # frozen records too
    else:
        container[key] = bad


@made_once
def items_holder(tp: Any) -> Any:
    """A module class holding ``items: list[tp]``, made once per drawn type."""
    namespace = {"__annotations__": {"items": list[tp]}, "items": state_field(factory=list)}
    return stateful(type("Holder", (StateModule,), namespace))


_BAD = [float("nan"), float("inf"), float("-inf"), (1, 2), Level.LOW, {1: "a"}, object(), 7, 2.5, "x", None, True]


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_live_save_refuses_exactly_what_the_snapshot_refuses(data: st.DataObject) -> None:
    """The save's in-place checks (generated, unions inline) against the copying dump, a bad value anywhere."""
    from statekit.state.dump import dump_many
    from statekit.state.plan import DEFAULT_CONVERTER
    from statekit.codecs import JSON

    tp = data.draw(st.one_of(record_types, json_union_records), label="record")
    try:
        value = DEFAULT_CONVERTER.structure(data.draw(data_for(tp), label="data"), tp)
        holder_type = items_holder(tp)
    except Exception:  # noqa: BLE001 - data the record refuses, or a holder statekit refuses: nothing to save
        return
    holder = holder_type(items=[value])
    slots: list[tuple[Any, Any]] = []
    _slots(value, slots)
    if slots:
        container, key = data.draw(st.sampled_from(slots), label="slot")
        _put(container, key, data.draw(st.sampled_from(_BAD), label="bad"))
    snapshot = _dump_outcome(lambda: JSON.dumps(dump_many({"m": holder})))
    assert _dump_outcome(lambda: JSON.dumps(dump_many({"m": holder}, live=True))) == snapshot
