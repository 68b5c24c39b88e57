"""A save's checks of values under ``Any`` run as one census (issue 11).

The save's checkers defer each value under ``Any`` to :func:`all_json`, which
checks them all level by level at C speed; when it finds something, the dump
runs again checking value by value. So the census must never accept what the
value-by-value check refuses, and deferring must never change what a save
writes or which problem it names.
"""

from __future__ import annotations

import copy
import enum
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from statekit import StateModule, state_field, stateful
from statekit.values.census import all_json, check_any, checks_deferred
from statekit.state.dump import dump_many
from statekit.values.plain import BadValue
from statekit.values.seam import SEAM
from statekit._limits import MAX_DEPTH
from statekit.codecs import JSON
from statekit.errors import StateDumpError
from statekit.session import JSONSession

from strategies import examples, json_data, made_once, record_types, json_union_records, data_for
from test_agreement import _put, _slots
from test_depth import nested


class Color(enum.Enum):
    RED = "red"


class Text(str):
    pass


def at_once_accepts(value: Any) -> bool:
    try:
        check_any(value)
    except (BadValue, RecursionError):
        return False
    return True


_NOT_JSON = [
    float("nan"), float("inf"), -math.inf, (1, 2), Color.RED, Text("x"), {1, 2}, b"x", object(), 1j, {("k",): 1},
]


@pytest.mark.parametrize("bad", _NOT_JSON, ids=repr)
@pytest.mark.parametrize("depth", [0, 1, 5])
def test_the_census_refuses_what_the_walk_refuses(bad: Any, depth: int) -> None:
    value = {"a": [1, "x", None, True, 2.5, {"deep": nested(depth)}], "b": bad}
    for _ in range(depth):
        value = {"wrap": [value]}
    assert not all_json([{"fine": 1}, value])


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_data, max_size=4))
def test_the_census_accepts_json_data(values: list[Any]) -> None:
    assert all_json(values) == at_once_accepts(values)


_ANY_BAD: st.SearchStrategy[Any] = st.sampled_from([float("nan"), float("-inf"), (1,), Color.RED, Text("t"), frozenset(), None, 3, 1.5])


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_census_never_accepts_what_the_walk_refuses(data: st.DataObject) -> None:
    values = data.draw(st.lists(json_data, min_size=1, max_size=3), label="values")
    slots: list[tuple[Any, Any]] = []
    for value in values:
        _slots(value, slots)
    if slots:
        container, key = data.draw(st.sampled_from(slots), label="slot")
        _put(container, key, data.draw(_ANY_BAD, label="bad"))
    if all_json(values):
        assert at_once_accepts(values)


def test_the_census_stops_at_the_depth_limit_and_at_cycles() -> None:
    assert all_json([nested(MAX_DEPTH)])
    assert not all_json([nested(MAX_DEPTH + 1)])  # deeper than a document may nest: the walk decides
    cycle: list[Any] = []
    cycle.append(cycle)
    assert not all_json([cycle])


@pytest.mark.parametrize("at", [0, 1023, 1024, 2999])
def test_the_census_checks_every_chunk(at: int) -> None:
    values: list[Any] = [{"i": [index, 0.5]} for index in range(3000)]
    assert all_json(values)
    values[at]["i"].append((at,))
    assert not all_json(values)


def test_shared_values_are_checked_wherever_they_sit() -> None:
    shared: dict[str, Any] = {"x": [1.0]}
    assert all_json([[shared, shared], shared])
    shared["x"].append(math.nan)
    assert not all_json([[shared, shared]])


@stateful
class Notes(StateModule):
    title: str = state_field(default="")
    blobs: list[dict[str, Any]] = state_field(factory=list)
    content: str | list[dict[str, Any]] = state_field(default="")
    extra: dict[str, Any] | None = state_field(default=None)
    anything: Any = state_field(default=None)
    count: int = state_field(default=0)


def test_a_good_save_checks_once_and_a_bad_one_again_value_by_value() -> None:
    before = SEAM.rechecks

    def runs() -> int:
        return SEAM.rechecks - before

    notes = Notes(blobs=[{"a": [1, {"b": 2.5}]}], content=[{"t": "x"}], extra={"k": None}, anything=[1, "2"])
    good = JSON.dumps(dump_many({"n": notes}, live=True))
    assert runs() == 0
    assert good == JSON.dumps(dump_many({"n": notes}))
    notes.blobs[0]["a"][1]["b"] = math.inf
    with pytest.raises(StateDumpError) as caught:
        dump_many({"n": notes}, live=True)
    assert runs() == 1
    assert [str(p) for p in caught.value.problems] == ["n.blobs[0].a[1].b: inf (not a finite number) is not JSON data"]


def test_the_first_problem_in_dump_order_is_named_as_without_deferring() -> None:
    notes = Notes(blobs=[{"a": math.nan}])
    notes.count = "many"  # type: ignore[assignment]
    with pytest.raises(StateDumpError) as caught:
        dump_many({"n": notes}, live=True)
    assert [str(p) for p in caught.value.problems] == ["n.blobs[0].a: nan (not a finite number) is not JSON data"]
    chained, seen = caught.value.__context__, []
    while chained is not None:
        seen.append(str(chained))
        chained = chained.__context__
    assert not [text for text in seen if "count" in text]  # the first run's error is not in the traceback


def _problems(run: Callable[[], Any]) -> Any:
    try:
        return "ok", JSON.dumps(run())
    except StateDumpError as err:
        return "error", [str(p) for p in err.problems]


@made_once
def blob_and_items_holder(tp: Any) -> Any:
    """A module class holding ``blob: Any`` and ``items: list[tp]``, made once per drawn type."""
    annotations = {"blob": Any, "items": list[tp]}
    namespace: dict[str, Any] = {"__annotations__": annotations, "blob": state_field(default=None), "items": state_field(factory=list)}
    return stateful(type("Holder", (StateModule,), namespace))


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_deferring_names_the_problem_the_walk_names(data: st.DataObject) -> None:
    """One or two bad values anywhere (under ``Any`` or in a typed field): the same bytes
    or the same first problem as checking value by value."""
    from statekit.state.plan import DEFAULT_CONVERTER

    tp = data.draw(st.one_of(record_types, json_union_records), label="record")
    try:
        value = DEFAULT_CONVERTER.structure(data.draw(data_for(tp), label="data"), tp)
        holder_type = blob_and_items_holder(tp)
    except Exception:  # noqa: BLE001 - data the record refuses, or a holder statekit refuses: nothing to save
        return
    blobs = st.lists(json_data, min_size=1, max_size=3)
    holder = holder_type(blob=data.draw(blobs, label="blob"), items=[value, copy.deepcopy(value)])
    other = holder_type(blob=data.draw(blobs, label="other blob"), items=[copy.deepcopy(value)])
    for _ in range(data.draw(st.integers(1, 2), label="bad values")):
        slots: list[tuple[Any, Any]] = []
        for module in (holder, other):
            _slots(module.blob, slots)  # under Any: deferred to the census
            _slots(module.items, slots)  # typed: checked at once
        container, key = data.draw(st.sampled_from(slots), label="slot")
        _put(container, key, data.draw(st.sampled_from(_NOT_JSON[:5] + ["x", 7, None]), label="bad"))
    modules = {"m": holder, "o": other}
    with mock.patch.object(SEAM, "deferring", False):  # value by value
        at_once = _problems(lambda: dump_many(modules, live=True))
    assert _problems(lambda: dump_many(modules, live=True)) == at_once


def test_deferrals_belong_to_their_thread_and_nest() -> None:
    from statekit.state.dump import _dump_top

    bad, good = Notes(anything=[math.nan]), Notes(anything=[1])
    entered, dumped = threading.Event(), threading.Event()
    outcomes: dict[str, str] = {}

    def first() -> Any:  # dumps the bad module while the other thread's deferral is the newer one
        entered.wait(5)
        try:
            return _dump_top(bad, ("b",), True)
        finally:
            dumped.set()

    def second() -> Any:
        entered.set()
        dumped.wait(5)
        return _dump_top(good, ("g",), True)

    def run(name: str, build: Callable[[], Any]) -> None:
        try:
            checks_deferred(build)
            outcomes[name] = "ok"
        except StateDumpError:
            outcomes[name] = "refused"

    threads = [threading.Thread(target=run, args=(name, build)) for name, build in [("bad", first), ("good", second)]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == {"bad": "refused", "good": "ok"}
    with pytest.raises(StateDumpError):  # nested: the inner census checks its own values
        checks_deferred(lambda: (dump_many({"g": good}, live=True), dump_many({"b": bad}, live=True)))
    assert checks_deferred(lambda: dump_many({"g": good}, live=True)) == {"g": good.state_dict()}


@stateful(frozen=True)
class Note:
    text: str
    meta: Any


@stateful
class Journal(StateModule):
    notes: list[Note] = state_field(factory=list, append_only=True)


@pytest.mark.parametrize("saved_first", [0, 2], ids=["full-save", "delta-save"])
def test_appended_items_are_checked_by_the_census_too(tmp_path: Path, saved_first: int) -> None:
    session, journal = JSONSession(tmp_path), Journal()
    journal.notes.extend(Note(f"n{i}", {"i": [i, 0.5]}) for i in range(saved_first))
    if saved_first:
        session.save("j", journal=journal)
    journal.notes.append(Note("bad", {"scores": [1.0, math.nan]}))
    with pytest.raises(StateDumpError) as caught:
        session.save("j", journal=journal)
    assert [str(p) for p in caught.value.problems] == [
        f"journal.notes[{saved_first}].meta.scores[1]: nan (not a finite number) is not JSON data"
    ]
    journal.notes[-1:] = [Note("good", {"scores": [1.0, 2.0]})]
    session.save("j", journal=journal)
    loaded = Journal()
    session.load("j", journal=loaded)
    assert loaded.notes == journal.notes


@stateful
class Entry:
    text: str
    blocks: str | list[dict[str, Any]]
    meta: dict[str, Any] | None
    anything: Any


@stateful
class Entries(StateModule):
    items: list[Entry] = state_field(factory=list)


def _entries() -> Entries:
    return Entries(
        items=[
            Entry("a", "plain", None, None),
            Entry("b", [{"t": "x", "in": {"q": [1, 2.5]}}], {"turn": 1}, [1, "2"]),
            Entry("c", [], {}, {"k": {"deep": [None]}}),
        ]
    )


@pytest.mark.parametrize(
    ("where", "bad"),
    [
        ("meta", {"x": math.nan}),
        ("blocks", [{"t": (1, 2)}]),
        ("blocks", [{"t": "ok"}, "not a block"]),
        ("blocks", ({"t": "a tuple"},)),
        ("anything", {1: "int key"}),
        ("anything", Color.RED),
        ("meta", Text("x")),
    ],
    ids=repr,
)
def test_a_list_of_records_sends_its_values_to_the_census_as_one_record_at_a_time_would(where: str, bad: Any) -> None:
    """A list of records dumps in one generated loop that gives the values under ``Any`` to the census
    itself (no call of their checker each): the same bytes when all is well, and the same first problem,
    named at the item, as checking value by value when one is not JSON data."""
    entries = _entries()
    modules = {"e": entries}
    with mock.patch.object(SEAM, "deferring", False):
        good_at_once = _problems(lambda: dump_many(modules, live=True))
    assert good_at_once == ("ok", JSON.dumps({"e": entries.state_dict()}))
    assert _problems(lambda: dump_many(modules, live=True)) == good_at_once
    setattr(entries.items[1], where, bad)
    with mock.patch.object(SEAM, "deferring", False):
        at_once = _problems(lambda: dump_many(modules, live=True))
    assert at_once[0] == "error" and at_once[1][0].startswith(f"e.items[1].{where}")
    assert _problems(lambda: dump_many(modules, live=True)) == at_once


def test_a_list_of_records_checks_its_values_in_the_thread_that_dumps_it() -> None:
    """The loop looks up the census of the save running in its own thread: a bad item is refused there
    while a good one saves in another thread."""
    bad, good = _entries(), _entries()
    bad.items[2].meta = {"x": math.inf}
    outcomes: dict[str, str] = {}
    barrier = threading.Barrier(2)

    def run(name: str, module: Entries) -> None:
        barrier.wait(5)
        try:
            for _ in range(200):
                dump_many({name: module}, live=True)
            outcomes[name] = "ok"
        except StateDumpError as err:
            outcomes[name] = str(err.problems[0])

    threads = [threading.Thread(target=run, args=item) for item in [("bad", bad), ("good", good)]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == {"bad": "bad.items[2].meta.x: inf (not a finite number) is not JSON data", "good": "ok"}
