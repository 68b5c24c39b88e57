"""Careless use of the API gets a clear StatekitError at the first mistake (issue 9, items 8, 9, 11)."""

from __future__ import annotations

import asyncio
import re
import dataclasses
from pathlib import Path
from typing import Any

import attrs
import pytest

from statekit import ConflictError, JSONSession, StateModule, StatekitError, YAMLSession, from_config, state_field, stateful
from statekit.errors import SessionError, StateDefinitionError
from statekit.session._files import FileSession

ADD_STATEFUL = "declares state_field\\(\\) attributes but is not @stateful: add @stateful"


@stateful
class Counter(StateModule):
    count: int = state_field(default=0)


@stateful
class Note:
    text: str = ""


# --- item 8: state_field() without @stateful -----------------------------------------


def test_state_field_without_stateful_is_refused_when_the_class_is_created() -> None:
    with pytest.raises(StateDefinitionError, match=f"Forgetful {ADD_STATEFUL}"):

        class Forgetful(StateModule):
            count: int = state_field(default=0)


def test_attrs_define_instead_of_stateful_is_refused_when_the_class_is_created() -> None:
    with pytest.raises(StateDefinitionError, match=f"Attrsy {ADD_STATEFUL}"):

        @attrs.define
        class Attrsy(StateModule):
            count: int = state_field(default=0)


def test_dataclass_instead_of_stateful_is_refused_before_an_instance_exists() -> None:
    @dataclasses.dataclass
    class Dataclassy(StateModule):
        count: int = state_field(default=0)

    with pytest.raises(StateDefinitionError, match=f"Dataclassy {ADD_STATEFUL}"):
        Dataclassy()


def test_attrs_define_without_slots_is_refused_before_an_instance_exists() -> None:
    @attrs.define(slots=False)
    class Unslotted(StateModule):
        count: int = state_field(default=0)

    with pytest.raises(StateDefinitionError, match=f"Unslotted {ADD_STATEFUL}"):
        Unslotted()


def test_stateful_classes_and_their_plain_subclasses_still_work() -> None:
    @stateful
    class More(Counter):
        extra: str = state_field(default="x")

    class Plain(More):
        """No state_field of its own: inherits the plan."""

    assert Plain(count=2).state_dict() == {"count": 2, "extra": "x"}


def test_a_module_without_state_fields_needs_no_decorator() -> None:
    class Holder(StateModule):
        def __init__(self) -> None:
            self.counter = Counter(3)

    assert Holder().state_dict() == {"counter": {"count": 3}}


# --- item 9: something that is not a module given to save/load -----------------------


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ({"count": 1}, "got a dict"),
        (Counter, "got the class Counter; pass an instance"),
        (Note("x"), "got Note, a value record"),
        ("agent", "got a string"),
        (None, "got null"),
    ],
)
def test_save_and_load_of_a_non_module_name_the_argument(tmp_path: Path, value: Any, what: str) -> None:
    session = JSONSession(tmp_path)
    session.save("s1", agent=Counter(1))
    before = session.session_path("s1").read_bytes()
    expected = f"agent= must be a StateModule instance, {what}"
    with pytest.raises(StatekitError, match=expected):
        session.save("s1", counter=Counter(), agent=value)
    with pytest.raises(StatekitError, match=expected):
        session.load("s1", agent=value)
    with pytest.raises(StatekitError, match=expected):
        session.load("never-saved", agent=value)
    assert session.session_path("s1").read_bytes() == before
    session.close()


# --- item 11: a blocking call inside a running loop, within `with` ------------------


def test_blocking_call_in_a_running_loop_reports_that_call_not_close(tmp_path: Path) -> None:
    async def careless() -> None:
        with JSONSession(tmp_path) as session:
            session.save("s1", agent=Counter())

    with pytest.raises(SessionError, match=r"session\.save\(\) blocks") as caught:
        asyncio.run(careless())
    assert "close()" not in str(caught.value)


def test_with_block_in_a_running_loop_without_error_still_reports_close(tmp_path: Path) -> None:
    async def careless() -> None:
        with JSONSession(tmp_path) as session:
            await session.asave("s1", agent=Counter())

    with pytest.raises(SessionError, match=r"session\.close\(\) blocks"):
        asyncio.run(careless())


# --- flags: a value that is only truthy is not True --------------------------------

NOT_FLAGS = ["no", "false", 0, 1, None, []]


@pytest.mark.parametrize("value", NOT_FLAGS)
def test_strict_of_load_state_dict_and_from_config_must_be_a_bool(value: Any) -> None:
    counter = Counter(3)
    with pytest.raises(StatekitError, match=f"strict must be True or False, got {re.escape(repr(value))}"):
        counter.load_state_dict({"count": 5, "typo": 1}, strict=value)
    assert counter.count == 3
    with pytest.raises(StatekitError, match="strict must be True or False"):
        from_config(Counter, {"count": 5}, strict=value)


@pytest.mark.parametrize("value", NOT_FLAGS)
def test_overwrite_must_be_a_bool_and_nothing_is_written(tmp_path: Path, value: Any) -> None:
    session, other = JSONSession(tmp_path), JSONSession(tmp_path)
    session.save("s1", agent=Counter(1))
    other.save("s1", agent=Counter(2))  # session's next plain save would conflict
    before = session.session_path("s1").read_bytes()
    with pytest.raises(SessionError, match=f"overwrite must be True or False, got {re.escape(repr(value))}"):
        session.save("s1", overwrite=value, agent=Counter(3))
    with pytest.raises(SessionError, match="overwrite must be True or False"):
        session.write_document("s1", {"agent": {"count": 4}}, overwrite=value)
    assert session.session_path("s1").read_bytes() == before
    session.close(), other.close()


@pytest.mark.parametrize("value", NOT_FLAGS)
def test_strict_and_allow_not_exist_of_a_session_load_must_be_bools(tmp_path: Path, value: Any) -> None:
    session = JSONSession(tmp_path)
    session.save("s1", agent=Counter(1))
    counter = Counter(7)
    with pytest.raises(SessionError, match="strict must be True or False"):
        session.load("s1", strict=value, agent=counter)
    with pytest.raises(SessionError, match="allow_not_exist must be True or False"):
        session.load("never-saved", allow_not_exist=value, agent=counter)
    assert counter.count == 7
    session.close()


# --- issue 23: mistakes that lost data without a word ---------------------------------


def test_every_error_a_user_can_catch_is_exported_from_statekit() -> None:
    import inspect

    import statekit
    import statekit.errors

    public = [
        name
        for name, value in vars(statekit.errors).items()
        if inspect.isclass(value) and value.__module__ == "statekit.errors" and not name.startswith("_")
    ]
    assert {"SessionError", "StateDumpError", "InvalidSessionIdError", "MissingExtraError", "Problem"} <= set(public)
    for name in public:
        assert getattr(statekit, name) is getattr(statekit.errors, name), name
        assert name in statekit.__all__, name
    errors = [value for value in vars(statekit.errors).values() if inspect.isclass(value) and issubclass(value, StatekitError)]
    assert len(errors) >= 12
    assert all(error.__name__ in statekit.__all__ for error in errors)


def test_an_annotated_module_attribute_without_state_field_is_refused() -> None:
    with pytest.raises(StateDefinitionError, match=r"Agent\.turns is annotated but not declared") as caught:

        @stateful
        class Agent(StateModule):
            name: str = state_field(default="")
            turns: int = 0

    assert "state_field(...)" in str(caught.value) and "attrs.field(...)" in str(caught.value)
    with pytest.raises(StateDefinitionError, match=r"Bare\.count is annotated but not declared"):

        @stateful
        class Bare(StateModule):
            count: int


def test_plain_attributes_class_vars_and_held_modules_are_still_allowed() -> None:
    from typing import ClassVar

    @stateful
    class Agent(StateModule):
        turns: int = state_field(default=0)
        client: object = attrs.field(default=None)
        limit: ClassVar[int] = 3
        counter: Counter = attrs.field(factory=Counter)
        spare: Counter | None = None

    assert Agent(turns=2).state_dict() == {"turns": 2, "counter": {"count": 0}, "spare": None}

    @stateful
    class Record:  # a value record: every field is data
        text: str = ""
        size: int = 0

    assert Record("x").text == "x"


@pytest.mark.parametrize(("default", "kind"), [([], "list"), ({}, "dict"), (set(), "set"), ([1, 2], "list")])
def test_a_mutable_default_is_refused_pointing_at_factory(default: Any, kind: str) -> None:
    with pytest.raises(StateDefinitionError, match=rf"Memory\.items: a {kind} default .* shared .*factory={kind}"):

        @stateful
        class Memory(StateModule):
            items: Any = state_field(default=default)

    with pytest.raises(StateDefinitionError, match=rf"Entry\.tags: a {kind} default"):

        @stateful
        class Entry:
            tags: Any = state_field(default=default)

    @stateful
    class Fine(StateModule):
        items: list[int] = state_field(factory=list)
        frozen: tuple[int, ...] = state_field(default=())

    assert Fine().items is not Fine().items


@pytest.mark.parametrize("call", ["save", "save_empty_kwargs", "update"])
def test_a_save_or_update_naming_no_module_is_refused_and_changes_nothing(tmp_path: Path, call: str) -> None:
    session = JSONSession(tmp_path)
    session.save("s1", agent=Counter(1))
    before = session.session_path("s1").read_bytes()
    with pytest.raises(SessionError, match=r"names no module.*pass the modules by name") as caught:
        if call == "save":
            session.save("s1")
        elif call == "save_empty_kwargs":
            session.save("s1", **{})
        else:
            session.update("s1", lambda: None)
    assert "session.save('s1', agent=agent)" in str(caught.value) or "session.update('s1', mutate, agent=agent)" in str(caught.value)
    with pytest.raises(SessionError, match="names no module"):
        session.save("new")
    assert session.session_path("s1").read_bytes() == before
    assert not session.exists("new")
    session.close()


def test_a_module_passed_by_position_is_told_to_go_by_name(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    with pytest.raises(SessionError, match=r"user_id got a Counter: modules are passed by name, as in session\.save\('s1', counter=counter\)"):
        session.save("s1", Counter(1))  # type: ignore[arg-type]
    with pytest.raises(SessionError, match=r"modules are passed by name.*session\.load"):
        session.load("s1", Counter(1))  # type: ignore[arg-type]
    with pytest.raises(SessionError, match=r"mutate got a Counter: modules are passed by name"):
        session.update("s1", Counter(1))  # type: ignore[call-overload]
    assert not session.exists("s1")
    session.close()


@pytest.mark.parametrize(("option", "meant"), [("overwite", "overwrite"), ("overwrit", "overwrite"), ("userid", "user_id")])
def test_a_misspelled_option_suggests_the_option(tmp_path: Path, option: str, meant: str) -> None:
    session = JSONSession(tmp_path)
    with pytest.raises(SessionError, match=rf"save\(\) has no option {option}=; did you mean {meant}=\?"):
        session.save("s1", counter=Counter(1), **{option: True})  # type: ignore[arg-type]
    with pytest.raises(SessionError, match=r"load\(\) has no option strikt=; did you mean strict=\?"):
        session.load("s1", counter=Counter(1), strikt=False)  # type: ignore[arg-type]
    with pytest.raises(SessionError, match=r"update\(\) has no option retry=; did you mean retries=\?"):
        session.update("s1", lambda: None, counter=Counter(1), retry=3)  # type: ignore[call-overload]
    assert not session.exists("s1")
    session.close()


@pytest.mark.parametrize("kind", [JSONSession, YAMLSession])
def test_a_session_folder_that_is_a_file_is_refused_when_the_session_is_made(tmp_path: Path, kind: type[FileSession]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(SessionError, match=r"save_dir '.*afile' is a file, not a folder"):
        kind(afile)
    assert afile.read_text() == "not a folder"
    kind(tmp_path / "new-folder").close()  # a folder that does not exist yet is fine: made on the first save


def test_update_returns_what_mutate_returned_and_runs_a_plain_mutate_on_the_callers_thread(tmp_path: Path) -> None:
    import threading

    session, other = JSONSession(tmp_path), JSONSession(tmp_path)
    other.save("config", counter=Counter(40))
    counter, seen = Counter(), Counter()
    threads: list[threading.Thread] = []

    def mutate() -> int:
        threads.append(threading.current_thread())
        other.load("config", counter=seen)  # a blocking session method, from inside a blocking update
        counter.count += seen.count + 2
        return counter.count

    assert session.update("s1", mutate, counter=counter) == 42
    assert threads == [threading.current_thread()]

    async def amutate() -> str:
        counter.count += 1
        return "done"

    assert session.update("s1", amutate, counter=counter) == "done"
    assert asyncio.run(session.aupdate("s1", lambda: "sync in async", counter=counter)) == "sync in async"
    loaded = Counter()
    session.load("s1", counter=loaded)
    assert loaded.count == 43
    session.close(), other.close()


def test_a_mutate_with_the_wrong_arity_is_a_session_error_before_anything_is_loaded(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("s1", counter=Counter(1))

    def needs_one(counter: Counter) -> None:
        counter.count += 1

    counter = Counter(7)
    with pytest.raises(SessionError, match=r"mutate must take no arguments .* needs_one\(counter: 'Counter'\)"):
        session.update("s1", needs_one, counter=counter)  # type: ignore[arg-type]
    assert counter.count == 7
    session.close()


def test_update_giving_up_says_how_often_it_tried_and_that_retries_can_be_raised(tmp_path: Path) -> None:
    session, meddler = JSONSession(tmp_path), JSONSession(tmp_path)
    session.save("s1", counter=Counter(1))
    calls = 0

    def mutate() -> None:
        nonlocal calls
        calls += 1
        meddler.save("s1", overwrite=True, counter=Counter(100 + calls))  # another writer, every time

    with pytest.raises(ConflictError, match=r"update\(\) gave up on .*s1\.json after 3 attempts \(retries=2\).*Raise retries=") as caught:
        session.update("s1", mutate, retries=2, counter=Counter())
    assert calls == 3
    assert isinstance(caught.value.__cause__, ConflictError)
    assert "update() does this" in str(caught.value.__cause__)  # the plain stale save's text is another
    session.close(), meddler.close()
