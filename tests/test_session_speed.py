"""The session fast path (issue 11) keeps every guarantee of the copying path.

A session save encodes straight from the live objects (JSON values validated,
not copied) and a session load keeps orjson's fresh data instead of copying
it; the garbage collector is paused meanwhile. These tests pin that the bytes,
the loaded state and every refusal are the same as through ``state_dict`` /
``load_state_dict``.
"""

from __future__ import annotations

import gc
import re
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from agent_models import Memory, Message, Role, Team
from statekit import StateModule, state_field, stateful
from statekit.state.gc import paused_gc
from statekit.state.dump import dump_many
from statekit.state.load import load_many
from statekit.codecs import JSON
from statekit.errors import DocumentError, StateDumpError, StateLoadError, format_path
from statekit.session import JSONSession
from strategies import examples, state_modules, teams

PROPERTY = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(state_modules)
def test_live_encoding_writes_the_bytes_of_the_snapshot(module: StateModule) -> None:
    snapshot = JSON.dumps(dump_many({"m": module}))
    assert JSON.dumps(dump_many({"m": module}, live=True)) == snapshot
    assert JSON.dumps({"m": module.state_dict()}) == snapshot


@PROPERTY
@given(teams)
def test_a_fresh_load_builds_what_a_copying_load_builds(team: Team) -> None:
    raw = JSON.dumps({"team": team.state_dict()})
    fresh, copied = Team(), Team()
    load_many({"team": fresh}, orjson.loads(raw), fresh=True)
    load_many({"team": copied}, orjson.loads(raw))
    assert JSON.dumps(fresh.state_dict()) == JSON.dumps(copied.state_dict()) == JSON.dumps(team.state_dict())


@stateful
class Log(StateModule):
    level: float = state_field(default=0.0)
    blocks: list[dict[str, Any]] = state_field(factory=list)
    content: str | list[dict[str, Any]] = state_field(default="")
    extra: dict[str, Any] = state_field(factory=dict)


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        ({"blocks": [{"a": float("nan")}]}, "log.blocks[0].a"),
        ({"blocks": [{"a": (1, 2)}]}, "log.blocks[0].a"),
        ({"blocks": [[1]]}, "log.blocks[0]"),
        ({"content": [{"x": {1: "one"}}]}, "log.content[0].x"),
        ({"extra": {"deep": [1, 2, float("inf")]}}, "log.extra.deep[2]"),
        ({"level": float("-inf")}, "log.level"),
    ],
)
def test_a_save_refuses_what_state_dict_refuses_and_keeps_the_file(tmp_path: Path, bad: dict[str, Any], path: str) -> None:
    session = JSONSession(tmp_path)
    session.save("s", log=Log(level=1, extra={"ok": True}))
    before = (tmp_path / "s.json").read_bytes()
    with pytest.raises(StateDumpError) as info:
        session.save("s", log=Log(**bad))
    assert [format_path(problem.path) for problem in info.value.problems] == [path]
    assert (tmp_path / "s.json").read_bytes() == before
    assert b'"level": 1.0' in before  # an int in a float field is written as the copying path writes it


@stateful
class Note:
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] | None = None


@stateful
class Notes(StateModule):
    items: list[Note] = state_field(factory=list)


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        (Note([{"x": float("nan")}]), "notes.items[1].content[0].x"),
        (Note([{"x": [(1, 2)]}]), "notes.items[1].content[0].x[0]"),
        (Note(["text"]), "notes.items[1].content[0]"),  # type: ignore[list-item]
        (Note(7), "notes.items[1].content"),  # type: ignore[arg-type]
        (Note("ok", {"n": float("inf")}), "notes.items[1].metadata.n"),
        (Note("ok", [1]), "notes.items[1].metadata"),  # type: ignore[arg-type]
    ],
)
def test_a_save_checks_the_unions_of_records(tmp_path: Path, bad: Note, path: str) -> None:
    """Record fields typed as JSON unions are checked inline by generated code: every member still is."""
    session = JSONSession(tmp_path)
    session.save("s", notes=Notes([Note("hi", {"turn": 1})]))
    before = (tmp_path / "s.json").read_bytes()
    with pytest.raises(StateDumpError) as info:
        session.save("s", notes=Notes([Note([{"type": "text"}], None), bad]))
    assert [format_path(problem.path) for problem in info.value.problems] == [path]
    assert (tmp_path / "s.json").read_bytes() == before


@stateful
class Reading:
    xs: list[float] | None = None
    ws: dict[str, float] | str = ""


@stateful
class Readings(StateModule):
    items: list[Reading] = state_field(factory=list)


@pytest.mark.parametrize(
    ("bad", "paths"),
    [
        (Reading([1.5, float("nan")]), ["readings.items[0].xs[1]"]),
        (Reading(None, {"w": float("inf")}), ["readings.items[0].ws.w"]),
        (Reading([float("-inf")], {"w": float("nan")}), ["readings.items[0].xs[0]", "readings.items[0].ws.w"]),
    ],
)
def test_a_save_refuses_nan_in_the_float_unions_of_records(tmp_path: Path, bad: Reading, paths: list[str]) -> None:
    """A union with a float inside is not checked inline (a float must be finite, an int converted)."""
    with pytest.raises(StateDumpError) as info:
        JSONSession(tmp_path).save("s", readings=Readings([bad]))
    assert [format_path(problem.path) for problem in info.value.problems] == paths
    assert not (tmp_path / "s.json").exists()


def test_ints_in_the_float_unions_of_records_save_and_load_as_floats(tmp_path: Path) -> None:
    readings = Readings([Reading([1, 2.5], {"w": 3})])
    session = JSONSession(tmp_path)
    session.save("s", readings=readings)
    stored = orjson.loads((tmp_path / "s.json").read_bytes())["readings"]["items"][0]
    assert [type(x) for x in stored["xs"]] == [float, float] and type(stored["ws"]["w"]) is float
    loaded = Readings()
    session.load("s", readings=loaded)
    assert loaded.items == [Reading([1.0, 2.5], {"w": 3.0})]
    assert [type(x) for x in loaded.items[0].xs or []] == [float, float]


def test_a_fresh_load_names_every_bad_value_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_bytes(
        orjson.dumps({"log": {"level": "high", "blocks": [{"a": 1}, "b", 3], "content": [[]], "extra": []}})
    )
    log = Log(level=2.0, blocks=[{"kept": True}])
    with pytest.raises(StateLoadError) as info:
        JSONSession(tmp_path).load("s", log=log)
    assert info.value.paths == ["log.level", "log.blocks[1]", "log.blocks[2]", "log.content[0]", "log.extra"]
    assert (log.level, log.blocks) == (2.0, [{"kept": True}])


def test_a_loaded_value_is_not_shared_between_loads(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s", log=Log(blocks=[{"n": [1]}]))
    first, second = Log(), Log()
    session.load("s", log=first)
    session.load("s", log=second)
    first.blocks[0]["n"].append(2)
    assert second.blocks == [{"n": [1]}]


def test_paused_gc_nests_and_restores_the_collector() -> None:
    assert gc.isenabled()
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_gc_leaves_a_collector_the_program_switched_off() -> None:
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_paused_gc_overlapping_in_threads_restores_the_collector_once_all_end() -> None:
    inside, release = threading.Barrier(3), threading.Event()

    def work() -> None:
        with paused_gc():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()
    assert not gc.isenabled()
    release.set()
    for thread in threads:
        thread.join()
    assert gc.isenabled()


def test_a_typed_load_keeps_the_collector_off_until_the_decoded_data_is_dropped(tmp_path: Path) -> None:
    blocks: list[dict[str, Any]] = [{"type": "tool_use", "input": {"query": "q" * 600, "top_k": 3}}]
    memory = Memory(content=[Message(Role.TOOL, blocks) for _ in range(2000)])  # over 1 MiB: decoded in a thread
    session = JSONSession(tmp_path)
    session.save("s", memory=memory)
    loaded = Memory()
    session.load("s", memory=loaded)
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()  # the counts start from nothing: only the load's own objects can start a pass
    gc.callbacks.append(count)
    try:
        session.load("s", memory=loaded)  # as a long-running agent loads again: new records for old
    finally:
        gc.callbacks.remove(count)
    assert loaded.content == memory.content
    # No pass over the decoded data (one used to start when the decode's thread handed it back,
    # and walked it all before the commit): it is dropped before the collector is back on.
    assert passes == []


def test_an_integer_beyond_64_bits_loads_exactly_and_is_refused_on_save(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"log": {"level": 0, "blocks": [], "content": "", "extra": {"n": 18446744073709551616}}}')
    log = Log()
    session = JSONSession(tmp_path)
    session.load("s", log=log)
    assert log.extra == {"n": 2**64}
    with pytest.raises(StateDumpError):
        session.save("s", log=log)


@pytest.mark.parametrize(("raw", "where"), [(b'{"log": {"level": 1,}}', ":1:20"), (b'{"log": "\xff"}', ":1:10")])
def test_a_document_the_decoder_refuses_is_named_with_its_line_and_column(tmp_path: Path, raw: bytes, where: str) -> None:
    (tmp_path / "s.json").write_bytes(raw)
    with pytest.raises(DocumentError, match=re.escape(f"s.json{where}")):
        JSONSession(tmp_path).load("s", log=Log())
