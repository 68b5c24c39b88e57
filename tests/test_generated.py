"""Generated code: its source in tracebacks, and its caches freed with the classes (issue 25)."""

from __future__ import annotations

import datetime as dt
import gc
import linecache
import traceback
import weakref
from pathlib import Path
from typing import Any

import pytest

from statekit import JSONSession, StateModule, json_schema, make_converter, state_field, stateful
from statekit.state.plan import ENCODE_CONVERTER
from statekit.values.class_cache import cache_sizes
from statekit.values.types import Dump, Load, dump_of, shape_of


@stateful
class Note:
    title: str
    body: str | list[dict[str, Any]]


def _code_lines(hook: Any) -> list[str]:
    return linecache.getlines(hook.__code__.co_filename)


def test_two_variants_of_one_class_each_show_their_own_source_in_a_traceback() -> None:
    plain = make_converter()
    custom = make_converter()

    def shout(value: str) -> str:
        if value == "boom":
            raise RuntimeError("the user's hook failed")
        return value.upper()

    custom.register_unstructure_hook(str, shout)
    first = plain.get_unstructure_hook(Note)  # made first: its name must stay its own
    second = custom.get_unstructure_hook(Note)
    assert first.__code__.co_filename != second.__code__.co_filename
    assert first.__code__.co_filename.startswith(f"<statekit unstructure {__name__}.Note")
    assert second.__code__.co_filename.startswith(f"<statekit unstructure {__name__}.Note")
    assert any("__k_a0" in line for line in _code_lines(first))  # the scalar check of statekit's hook
    assert not any("__k_a0" in line for line in _code_lines(second))  # the user's hook, called
    assert second(Note("t", "b")) == {"title": "T", "body": "b"}

    with pytest.raises(Exception) as plain_failure:
        first(Note(1, "b"))  # type: ignore[arg-type]
    with pytest.raises(RuntimeError) as custom_failure:
        second(Note("boom", "b"))

    plain_frame = traceback.extract_tb(plain_failure.value.__traceback__)[1]
    custom_frame = traceback.extract_tb(custom_failure.value.__traceback__)[1]
    assert plain_frame.filename == first.__code__.co_filename
    assert plain_frame.line == "__h_a0(a0)"  # the line of the plain variant that ran, not the other's
    assert custom_frame.filename == second.__code__.co_filename
    assert custom_frame.line == "a0 = __h_a0(a0)"
    shown = "".join(traceback.format_exception(custom_failure.value))
    assert f'File "{second.__code__.co_filename}", line {custom_frame.lineno}' in shown


def test_a_generated_function_dropped_takes_its_source_out_of_linecache() -> None:
    @stateful
    class Draft:
        title: str

    hook = make_converter().get_unstructure_hook(Draft)
    filename = hook.__code__.co_filename
    assert "".join(_code_lines(hook)).startswith("def unstructure(o):")
    del Draft, hook  # the hook is held on its class, and goes with it
    gc.collect()
    assert filename not in linecache.cache


def _throwaway_classes() -> tuple[type, type]:
    @stateful
    class Item:
        role: str
        content: str | list[dict[str, Any]]
        tags: list[str] = state_field(factory=list)

    @stateful
    class Box(StateModule):
        items: list[Item] = state_field(factory=list)
        turns: int = state_field(default=0)

    return Item, Box


def _use(item_cls: Any, box_cls: Any, session: JSONSession) -> None:
    box = box_cls(items=[item_cls("user", "hi"), item_cls("tool", [{"k": 1}], ["x"])], turns=2)
    state = box.state_dict()
    again = box_cls()
    again.load_state_dict(state)
    assert again.state_dict() == state
    session.save("s", box=box)
    loaded = box_cls()
    session.load("s", box=loaded)
    assert loaded.state_dict() == state
    assert json_schema(box_cls)["type"] == "object"


@pytest.mark.slow
def test_classes_made_and_dropped_are_collected_with_their_generated_code(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    _use(*_throwaway_classes(), session)  # what is made once for all (statekit's own types) is made here
    gc.collect()
    before = cache_sizes()

    classes = [_throwaway_classes() for _ in range(300)]
    for item_cls, box_cls in classes:
        _use(item_cls, box_cls, session)
    during = cache_sizes()
    for name in ("fast structure", "record mirrors", "typed documents", "unstructure hooks", "generated sources"):
        assert during[name] >= before[name] + 300, name  # each class's code is cached while it lives
    refs = [weakref.ref(cls) for pair in classes for cls in pair]
    del classes, item_cls, box_cls
    gc.collect()

    assert [ref for ref in refs if ref() is not None] == []
    assert cache_sizes() == before


def test_a_shape_is_decided_once_per_converter_state() -> None:
    conv = make_converter()
    shape = shape_of(Note, conv)
    assert (shape_of(Note, conv) is shape, shape.load, shape.record is not None) == (True, Load.RECORD, True)
    assert shape_of(str | list[dict[str, Any]], conv) is shape_of(str | list[dict[str, Any]], conv)
    conv.register_structure_hook(Note, lambda value, _: Note("t", "b"))  # a hook registered later: decided again
    assert (shape_of(Note, conv).load, shape_of(Note, conv).owned) == (Load.CATTRS, False)
    assert conv.structure({"title": "x", "body": "y"}, Note) == Note("t", "b")


def test_shapes_of_python_types_are_dropped_with_their_converter() -> None:
    conv = make_converter()
    assert shape_of(list[dt.date], conv).load is Load.LIST
    assert shape_of(list[dt.date], conv) is shape_of(list[dt.date], conv)  # held by the converter: no class to hold it
    held = weakref.ref(conv)
    del conv
    gc.collect()
    assert held() is None


def test_no_hook_statekit_makes_carries_a_mark_of_its_own() -> None:
    """What a hook is for is said in its Shape, never in attributes set on the function (issue 25)."""
    conv = make_converter()
    union = str | list[dict[str, Any]]
    hooks: list[Any] = [conv.get_structure_hook(tp) for tp in (str, int, list[int], dict[str, Any], union, Note)]
    hooks += [conv.get_unstructure_hook(tp) for tp in (str, int, float, union, list[Note], Note)]
    hooks += [ENCODE_CONVERTER.get_unstructure_hook(tp) for tp in (union, Note)]
    assert [name for hook in hooks for name in vars(hook) if name.startswith("__statekit")] == []
    assert dump_of(union, ENCODE_CONVERTER)[0] is Dump.UNION_CHECK  # yet each is known for what it does
    assert dump_of(union, conv)[0] is Dump.UNION_COPY
    assert dump_of(str, conv) == (Dump.SCALAR, str)


def test_a_hook_registered_after_first_use_reaches_the_generated_dump_and_load() -> None:
    conv = make_converter()
    assert conv.unstructure(Note("t", "b")) == {"title": "t", "body": "b"}
    assert conv.structure({"title": "t", "body": "b"}, Note) == Note("t", "b")
    conv.register_unstructure_hook(str, str.upper)
    conv.register_structure_hook(str, lambda value, _: value.lower())
    assert conv.unstructure(Note("t", "b")) == {"title": "T", "body": "b"}
    assert conv.structure({"title": "T", "body": "b"}, Note) == Note("t", "b")
