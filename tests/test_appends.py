"""Append-only lists: a save after appends writes only the new items, and loads see everything."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import examples
from test_depth import nested
from workers import run_forked
from append_models import Agent, Memory, Msg, NumberedMemory, NumberedMsg, TextMemory
from statekit import StateModule, state_field, stateful
from statekit._limits import MAX_DEPTH
from statekit.cli._compact import ATTEMPTS, compact_sessions
from statekit.cli import main
from statekit.errors import (
    ConflictError,
    DocumentError,
    SessionError,
    StateDefinitionError,
    StateDumpError,
    StateLoadError,
)
from statekit.session import JSONSession, YAMLSession
from statekit.session import _appends, _prefix, _proofs, document, files
from statekit.state.typed import typed_loads
from statekit.values.seam import SEAM


def _msgs(count: int, start: int = 0) -> list[Msg]:
    return [Msg("user", f"message {index}") for index in range(start, start + count)]


def _load(folder: Path, name: str = "chat") -> Agent:
    agent = Agent()
    JSONSession(folder).load(name, agent=agent, allow_not_exist=False)
    return agent


def _files(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


# -- declaring ----------------------------------------------------------------------


def test_items_must_be_immutable() -> None:
    @stateful
    class Loose:
        text: str = ""

    with pytest.raises(StateDefinitionError, match=r"Bad\.items: the items of an append_only list must be frozen"):

        @stateful
        class Bad(StateModule):
            items: list[Loose] = state_field(factory=list, append_only=True)


@pytest.mark.parametrize("annotation", ["list[dict[str, int]]", "list[list[int]]", "dict[str, int]", "tuple[int, ...]"])
def test_only_lists_of_immutable_items(annotation: str) -> None:
    namespace: dict[str, Any] = {}
    source = (
        "from statekit import StateModule, state_field, stateful\n"
        "@stateful\n"
        "class Bad(StateModule):\n"
        f"    items: {annotation} = state_field(factory=list, append_only=True)\n"
    )
    with pytest.raises(StateDefinitionError, match=r"Bad\.items: "):
        exec(source, namespace)  # noqa: S102 - a class definition under test


def test_no_codec_on_append_only_fields() -> None:
    with pytest.raises(StateDefinitionError, match="cannot be combined with to_json"):

        @stateful
        class Bad(StateModule):
            items: list[str] = state_field(factory=list, append_only=True, to_json=list)


def test_state_dict_is_unchanged() -> None:
    agent = Agent()
    agent.memory.content.extend(_msgs(2))
    agent.events.append(7)
    assert agent.state_dict() == {
        "memory": {"content": [{"role": "user", "text": "message 0"}, {"role": "user", "text": "message 1"}], "note": ""},
        "events": [7],
    }


# -- what a save writes ------------------------------------------------------------------


def test_appends_write_only_the_new_items(tmp_path: Path) -> None:
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(100))
    session.save("chat", agent=agent)
    document = (tmp_path / "chat.json").read_bytes()
    agent.memory.content.append(Msg("assistant", "reply"))
    agent.events.append(1)
    session.save("chat", agent=agent)
    # the document is not rewritten: one byte of its metadata now says that its companion holds deltas
    assert (tmp_path / "chat.json").read_bytes() == document.replace(b'"deltas": 0', b'"deltas": 1', 1)
    lines = (tmp_path / "chat.json.log").read_bytes().splitlines()
    assert len(lines) == 2
    (sequence, checksum), *deltas = json.loads(lines[1])
    assert (sequence, len(checksum)) == (1, 8)
    assert deltas == [
        [["agent", "memory", "content"], [{"role": "assistant", "text": "reply"}]],
        [["agent", "events"], [1]],
    ]
    loaded = _load(tmp_path)
    assert loaded.memory.content == agent.memory.content and loaded.events == [1]


def test_the_document_module_reads_what_a_save_wrote(tmp_path: Path) -> None:
    """statekit.session.document spells the format a save writes: its readers find the token, the flag, the header."""
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(3))
    session.save("chat", agent=agent)
    raw = (tmp_path / "chat.json").read_bytes()
    data = json.loads(raw)
    token = document.token_of(data)
    assert data[document.META_KEY][document.FORMAT_KEY] == document.APPENDS_FORMAT
    assert token is not None and document.doc_token(raw) == token and not document.has_deltas(raw)
    assert document.without_token(data)[document.META_KEY] == {document.FORMAT_KEY: document.FORMAT_VERSION}
    agent.events.append(1)
    session.save("chat", agent=agent)
    assert document.has_deltas((tmp_path / "chat.json").read_bytes())
    header = (tmp_path / "chat.json.log").read_bytes().split(b"\n", 1)[0]
    assert document.header_of(header) == (document.LOG_FORMAT, token, 1)


def test_session_files_reads_a_file_merged_with_its_companion(tmp_path: Path) -> None:
    """statekit.session.files: a session file by path, its appended items merged in, the file's own bytes kept."""
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(2))
    session.save("chat", agent=agent)
    agent.events.append(7)
    session.save("chat", agent=agent)
    path = tmp_path / "chat.json"
    assert files.companion_path(path) == tmp_path / "chat.json.log" and files.companion_path(path).is_file()
    read = files.read_session_file(str(path))
    assert read.data["agent"]["events"] == [7] and read.data["agent"]["memory"]["content"][1]["text"] == "message 1"
    assert read.raw is not None and bytes(read.raw) == path.read_bytes() == files.read_regular_file(path)
    assert read.source == str(path)
    assert json.loads(read.raw)["agent"]["events"] == []  # the file alone has no appended item
    assert files.session_stems(tmp_path, ".json") == ["chat"]
    other = Agent()
    session.save("other", agent=other)
    other.events.append(8)
    session.save("other", agent=other)
    shutil.copyfile(tmp_path / "other.json.log", tmp_path / "chat.json.log")  # another document's companion
    with pytest.raises(DocumentError):
        files.read_session_file(str(path))


def test_unchanged_save_writes_nothing(tmp_path: Path) -> None:
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(3))
    session.save("chat", agent=agent)
    before = (tmp_path / "chat.json").stat().st_mtime_ns
    session.save("chat", agent=agent)
    assert (tmp_path / "chat.json").stat().st_mtime_ns == before
    assert _files(tmp_path) == ["chat.json"]


@pytest.mark.parametrize(
    "change",
    [
        lambda a: a.memory.content.__setitem__(0, Msg("user", "edited")),
        lambda a: a.memory.content.pop(),
        lambda a: a.memory.content.insert(0, Msg("user", "first")),
        lambda a: a.memory.content.reverse(),
        lambda a: setattr(a.memory, "content", [Msg(m.role, m.text) for m in a.memory.content]),
        lambda a: a.memory.content.clear(),
        lambda a: setattr(a.memory, "note", "changed"),
        lambda a: a.memory.content.__setitem__(1, Msg("user", "message 1")),  # equal, but another object
    ],
    ids=["replace", "pop", "insert", "reorder", "reassign", "clear", "other-field", "equal-replacement"],
)
def test_anything_but_appends_rewrites_whole(tmp_path: Path, change: Any) -> None:
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(3))
    session.save("chat", agent=agent)
    agent.memory.content.append(Msg("user", "appended"))
    session.save("chat", agent=agent)
    assert "chat.json.log" in _files(tmp_path)
    change(agent)
    agent.memory.content.append(Msg("user", "after"))
    session.save("chat", agent=agent)
    assert _files(tmp_path) == ["chat.json"]
    loaded = _load(tmp_path)
    assert loaded.memory.content == agent.memory.content and loaded.memory.note == agent.memory.note


def _shorten_and_extend(agent: Agent) -> None:
    del agent.memory.content[-2:]
    agent.memory.content.extend([Msg("user", "message 48"), Msg("user", "other")])  # the same length again


def _delete_and_append(agent: Agent) -> None:
    del agent.memory.content[10]
    agent.memory.content.append(Msg("user", "message 50"))  # the same length again


def _swap_two(agent: Agent) -> None:
    content = agent.memory.content
    content[3], content[4] = content[4], content[3]


@pytest.mark.parametrize(
    "change",
    [
        lambda a: a.memory.content.__setitem__(0, Msg("user", "edited")),
        lambda a: a.memory.content.__setitem__(25, Msg("user", "edited")),
        lambda a: a.memory.content.__setitem__(49, Msg("user", "edited")),  # the last item saved
        lambda a: a.memory.content.__setitem__(49, Msg("user", "message 49")),  # equal, but another object
        lambda a: setattr(a.memory, "content", [*a.memory.content[:-1], Msg("user", "other")]),
        _shorten_and_extend,
        lambda a: a.events.__setitem__(0, 1.0),  # equal to the saved 1, but not the same
        _delete_and_append,
        _swap_two,
        lambda a: a.memory.content.sort(key=lambda m: m.text, reverse=True),
        lambda a: a.memory.content.reverse(),
        lambda a: a.memory.content.__setitem__(slice(5, 7), [Msg("user", "x"), Msg("user", "y")]),
        lambda a: a.memory.content.insert(0, a.memory.content.pop()),  # moved: the same items, the same length
    ],
    ids=[
        "first",
        "middle",
        "last-saved",
        "equal-last",
        "replaced-list",
        "shortened-extended",
        "equal-scalar",
        "deleted-appended",
        "swapped",
        "sorted",
        "reversed",
        "slice-assigned",
        "moved",
    ],
)
@pytest.mark.parametrize("pointers", [True, False], ids=["pointers", "identity-scan"])
def test_a_change_to_a_saved_item_after_many_deltas_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, pointers: bool
) -> None:
    """The saved items are known without scanning them one by one, yet whatever
    changed among them is found: the document is rewritten, and loads as held."""
    monkeypatch.setattr(SEAM, "pointer_prefixes", pointers)
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(20))
    agent.events.append(1)
    session.save("chat", agent=agent)
    for start in range(20, 50, 10):  # three deltas: the saved items grow with each
        agent.memory.content.extend(_msgs(10, start))
        session.save("chat", agent=agent)
    assert len((tmp_path / "chat.json.log").read_bytes().splitlines()) == 4
    change(agent)
    if isinstance(agent.events[0], float):  # a float among ints is refused: the whole list is checked again
        with pytest.raises(StateDumpError, match=re.escape("agent.events[0]: expected an integer")):
            session.save("chat", agent=agent)
        return
    agent.memory.content.append(Msg("user", "after"))
    session.save("chat", agent=agent)
    assert _files(tmp_path) == ["chat.json"]
    loaded = _load(tmp_path)
    assert loaded.memory.content == agent.memory.content and len(loaded.memory.content) == 51


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)(),
    reason="the pointer compare needs CPython's list layout and the GIL",
)
def test_cpython_compares_saved_items_by_their_pointers_in_place() -> None:
    """The layout probe passes where it must (the fast path is not lost in silence), and the compare
    in place tells the saved items from any others, at the start, the middle and the end."""
    assert _prefix._POINTERS is not None and _prefix._MATCHES is not None
    items: list[Any] = [*range(1000, 4000), Msg("user", "last")]
    prefix = _prefix.Prefix.of(items)
    items.append(Msg("user", "new"))
    assert prefix.starts(items) and prefix.starts(items[:-1]) and not prefix.starts(items[:-2])
    for at in (0, 1500, 3000):
        changed = list(items)
        changed[at] = Msg("user", "last") if at == 3000 else int(str(items[at]))  # equal, but another object
        assert changed == items and not prefix.starts(changed)
    assert prefix.grown([items[-1]]).starts(items) and not prefix.grown([Msg("user", "new")]).starts(items)


@pytest.mark.parametrize("watch", ["trace", "profile"])
async def test_saves_under_a_trace_or_profile_function_still_tell_appends_from_edits(tmp_path: Path, watch: str) -> None:
    """Python code may then run between any two lines: the live list is compared through a slice of it.
    (Async saves: the check runs in this thread, which the function watches.)"""
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(20))
    await session.asave("chat", agent=agent)
    setter: Any = sys.settrace if watch == "trace" else sys.setprofile
    previous: Any = sys.gettrace() if watch == "trace" else sys.getprofile()
    setter(lambda *_: None)
    try:
        agent.memory.content.append(Msg("user", "appended"))
        await session.asave("chat", agent=agent)
        lines = len((tmp_path / "chat.json.log").read_bytes().splitlines())
        agent.memory.content[3] = Msg("user", "message 3")  # equal, but another object
        await session.asave("chat", agent=agent)
    finally:
        setter(previous)
    assert lines == 2 and _files(tmp_path) == ["chat.json"]
    loaded = Agent()
    await JSONSession(tmp_path).aload("chat", agent=loaded)
    assert loaded.memory.content == agent.memory.content


def test_a_loading_object_saves_deltas(tmp_path: Path) -> None:
    agent = Agent()
    agent.memory.content.extend(_msgs(3))
    JSONSession(tmp_path).save("chat", agent=agent)
    session, other = JSONSession(tmp_path), Agent()
    session.load("chat", agent=other)
    other.memory.content.append(Msg("user", "more"))
    session.save("chat", agent=other)
    assert len((tmp_path / "chat.json.log").read_bytes().splitlines()) == 2
    assert _load(tmp_path).memory.content == [*agent.memory.content, Msg("user", "more")]


def test_a_load_of_part_of_the_document_saves_whole(tmp_path: Path) -> None:
    agent, memory = Agent(), Memory()
    JSONSession(tmp_path).save("chat", agent=agent, memory=memory)
    session = JSONSession(tmp_path)
    session.load("chat", agent=agent)
    agent.events.append(1)
    session.save("chat", agent=agent)  # rewrites the document whole, keeping memory, which it does not name
    assert _files(tmp_path) == ["chat.json"]
    assert list(json.loads((tmp_path / "chat.json").read_bytes())) == ["__statekit__", "agent", "memory"]


@stateful(frozen=True)
class _NotedMsg:
    role: str
    text: str
    note: str = ""


@stateful
class _NotedMemory(StateModule):
    content: list[_NotedMsg] = state_field(factory=list, append_only=True)
    note: str = state_field(default="")


def test_a_lenient_load_that_left_keys_out_saves_whole(tmp_path: Path) -> None:
    """Items stored with a key the class no longer has: a delta would keep it in the
    document, and every strict load would then refuse what this save wrote."""
    old = _NotedMemory([_NotedMsg("user", "hi", "x")])
    JSONSession(tmp_path).save("chat", memory=old)
    session, memory = JSONSession(tmp_path), Memory()
    assert session.load("chat", strict=False, memory=memory)["memory"].unexpected_keys == ["memory.content[0].note"]
    memory.content.append(Msg("user", "second"))
    session.save("chat", memory=memory)
    assert _files(tmp_path) == ["chat.json"]
    loaded = Memory()
    JSONSession(tmp_path).load("chat", memory=loaded)
    assert loaded.content == [Msg("user", "hi"), Msg("user", "second")]


def _text_to_body(state: dict[str, Any]) -> dict[str, Any]:
    state["body"] = state.pop("text")
    return state


@stateful(frozen=True, version=2, migrations={1: _text_to_body})
class _BodyMsg:
    role: str
    body: str


@stateful
class _BodyMemory(StateModule):
    content: list[_BodyMsg] = state_field(factory=list, append_only=True)
    note: str = state_field(default="")


def test_items_a_load_migrated_are_saved_at_their_new_version(tmp_path: Path) -> None:
    """The migrated items differ from the stored ones: a delta would leave the old ones in the document."""
    JSONSession(tmp_path).save("chat", memory=Memory(_msgs(2)))
    session, memory = JSONSession(tmp_path), _BodyMemory()
    session.load("chat", memory=memory)
    memory.content.append(_BodyMsg("user", "third"))
    session.save("chat", memory=memory)
    assert _files(tmp_path) == ["chat.json"]
    stored = json.loads((tmp_path / "chat.json").read_bytes())["memory"]["content"]
    assert stored == [{"__version__": 2, "role": "user", "body": text} for text in ("message 0", "message 1", "third")]
    session.load("chat", memory=memory)  # all at the current version now: appends are deltas again
    memory.content.append(_BodyMsg("user", "fourth"))
    session.save("chat", memory=memory)
    assert _files(tmp_path) == ["chat.json", "chat.json.log"]


@stateful
class _Keyed(StateModule):
    token: str = state_field(default="", secret=True)
    content: list[Msg] = state_field(factory=list, append_only=True)


def test_a_secret_left_out_for_want_of_a_key_does_not_stop_delta_saves(tmp_path: Path) -> None:
    """Without a key the secret is neither saved nor loaded (the load lists it as missing): no reason to rewrite."""
    JSONSession(tmp_path, omit_secrets=True).save("chat", keyed=_Keyed("sk-1", _msgs(2)))
    session, keyed = JSONSession(tmp_path, omit_secrets=True), _Keyed()
    assert session.load("chat", keyed=keyed)["keyed"].missing_keys == ["keyed.token"]
    before = (tmp_path / "chat.json").read_bytes()
    keyed.content.append(Msg("user", "more"))
    session.save("chat", keyed=keyed)
    assert (tmp_path / "chat.json").read_bytes() == before.replace(b'"deltas": 0', b'"deltas": 1', 1)
    assert len((tmp_path / "chat.json.log").read_bytes().splitlines()) == 2


def test_scalar_items(tmp_path: Path) -> None:
    session, agent = JSONSession(tmp_path), Agent()
    for value in range(5):
        agent.events.append(value)
        session.save("chat", agent=agent)
    assert _load(tmp_path).events == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("append", "path", "message"),
    [
        (lambda agent: agent.memory.content.append(Msg(7, "x")), ("agent", "memory", "content", 3, "role"), "expected a string"),  # type: ignore[arg-type]
        (lambda agent: agent.events.append("x"), ("agent", "events", 2), "expected an integer"),
        (lambda agent: agent.events.append(2**64), ("agent", "events", 2), "an integer of 65 bits"),
    ],
    ids=["record-field", "scalar", "refused-by-the-codec"],
)
def test_a_bad_appended_item_is_named_by_its_index_in_the_whole_list(
    tmp_path: Path, append: Any, path: tuple[Any, ...], message: str
) -> None:
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(3))
    agent.events.extend([1, 2])
    session.save("chat", agent=agent)
    before = _files(tmp_path), (tmp_path / "chat.json").read_bytes()
    append(agent)
    with pytest.raises(StateDumpError) as caught:
        session.save("chat", agent=agent)  # a delta save: only the new items are encoded
    assert [p.path for p in caught.value.problems] == [path]
    assert message in caught.value.problems[0].message
    assert (_files(tmp_path), (tmp_path / "chat.json").read_bytes()) == before


@stateful(frozen=True)
class _Blob:
    data: Any = None


@stateful
class _Blobs(StateModule):
    items: list[_Blob] = state_field(factory=list, append_only=True)


@stateful
class _Deep(StateModule):
    inner: _Blobs = state_field(factory=_Blobs)


def test_a_delta_save_checks_the_depth_the_items_have_in_the_document(tmp_path: Path) -> None:
    """The delta line holds items fewer levels down than the document does: a delta
    save refuses what a full save refuses, with the same path."""
    session, deep = JSONSession(tmp_path), _Deep()
    session.save("chat", deep=deep)
    before = _files(tmp_path), (tmp_path / "chat.json").read_bytes()
    deep.inner.items.append(_Blob(nested(MAX_DEPTH - 4)))  # the document: root, deep, inner, items, the item, data
    with pytest.raises(StateDumpError) as full:
        JSONSession(tmp_path).save("whole", deep=deep)
    with pytest.raises(StateDumpError) as delta:
        session.save("chat", deep=deep)
    assert [p.path[:5] for p in delta.value.problems] == [("deep", "inner", "items", 0, "data")]
    assert delta.value.problems == full.value.problems
    assert (_files(tmp_path), (tmp_path / "chat.json").read_bytes()) == before


def test_a_delta_too_deep_in_the_document_is_refused_on_load(tmp_path: Path) -> None:
    session, deep = JSONSession(tmp_path), _Deep()
    deep.inner.items.append(_Blob(1))
    session.save("chat", deep=deep)
    deep.inner.items.append(_Blob(2))
    session.save("chat", deep=deep)
    log = tmp_path / "chat.json.log"
    item = {"data": nested(MAX_DEPTH - 4)}  # within the line's own limit, past it in the document
    lines = log.read_bytes().split(b"\n")[1:-1]
    line, _ = _proofs.seal(orjson.dumps([[["deep", "inner", "items"], [item]]]), 2, _proofs.last(lines)[1])
    log.write_bytes(log.read_bytes() + line)
    with pytest.raises(DocumentError, match=r"chat\.json\.log:3: a delta appends items nested deeper than"):
        JSONSession(tmp_path).load("chat", deep=_Deep())


def _make_odd(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(path.parent / "chat.json")


@pytest.mark.parametrize("kind", ["fifo", "folder", "link"])
@pytest.mark.parametrize("name", ["chat.json.log", ".chat.json.log.old"])
def test_an_odd_file_where_the_companion_goes_is_refused_and_left_alone(tmp_path: Path, kind: str, name: str) -> None:
    """A save would move it aside and delete it; a delta save reported a conflict."""
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(2))
    session.save("chat", agent=agent)
    _make_odd(tmp_path / name, kind)
    agent.memory.content.append(Msg("user", "more"))
    for overwrite in (False, True):
        with pytest.raises(SessionError, match=f"{re.escape(str(tmp_path / name))} is "):
            session.save("chat", agent=agent, overwrite=overwrite)
    with pytest.raises(SessionError, match=f"{re.escape(str(tmp_path / name))} is "):
        session.delete("chat")
    assert (tmp_path / name).is_symlink() if kind == "link" else (tmp_path / name).exists()
    assert (tmp_path / "chat.json").exists()


def saved_with_numbered_deltas(session: Any, memory: NumberedMemory) -> None:
    """Item 0 in the document; item 1 on delta line 2, items 2 and 3 on line 3 (texts are integers)."""
    for items in ([0], [1], [2, 3]):
        memory.content.extend(NumberedMsg("u", text) for text in items)
        session.save("chat", memory=memory)


def test_a_problem_in_an_appended_item_names_its_companion_line(tmp_path: Path) -> None:
    """Positioned where the item is stored (the key of the bad value, as in the document)."""
    saved_with_numbered_deltas(JSONSession(tmp_path), NumberedMemory())
    with pytest.raises(StateLoadError) as caught:
        JSONSession(tmp_path).load("chat", memory=TextMemory())
    places = [(Path(p.source or "").name, p.line, p.column, p.path) for p in caught.value.problems]
    log = (tmp_path / "chat.json.log").read_bytes().split(b"\n")
    assert places == [
        ("chat.json", 11, 9, ("memory", "content", 0, "text")),
        ("chat.json.log", 2, log[1].index(b'"text":1') + 1, ("memory", "content", 1, "text")),
        ("chat.json.log", 3, log[2].index(b'"text":2') + 1, ("memory", "content", 2, "text")),
        ("chat.json.log", 3, log[2].index(b'"text":3') + 1, ("memory", "content", 3, "text")),
    ]


# -- the typed load (issue 25) -----------------------------------------------------------


def _typed_load(folder: Path) -> tuple[JSONSession, Agent]:
    """A new session object's load of ``chat``, which must take the typed path."""
    session, agent = JSONSession(folder), Agent()
    before = typed_loads()
    session.load("chat", agent=agent, allow_not_exist=False)
    assert typed_loads() == before + 1, "the load did not take the typed path"
    return session, agent


@pytest.mark.parametrize("deltas", [0, 2], ids=["document", "document+companion"])
def test_a_session_with_append_only_lists_takes_the_typed_load(tmp_path: Path, deltas: int) -> None:
    _, saved = _saved_with_deltas(tmp_path, deltas)
    assert ("chat.json.log" in _files(tmp_path)) is (deltas > 0)
    _, agent = _typed_load(tmp_path)
    assert (agent.memory.content, agent.events) == (saved.memory.content, [])


@pytest.mark.parametrize("deltas", [0, 2], ids=["document", "document+companion"])
def test_a_delta_save_right_after_a_typed_load_writes_only_the_new_items(tmp_path: Path, deltas: int) -> None:
    _saved_with_deltas(tmp_path, deltas)
    document = (tmp_path / "chat.json").read_bytes()
    before = (tmp_path / "chat.json.log").read_bytes().splitlines() if deltas else []
    session, agent = _typed_load(tmp_path)
    agent.memory.content.append(Msg("user", "new"))
    agent.events.append(9)
    session.save("chat", agent=agent)
    assert (tmp_path / "chat.json").read_bytes() == document.replace(b'"deltas": 0', b'"deltas": 1', 1)
    lines = (tmp_path / "chat.json.log").read_bytes().splitlines()
    assert lines[1:-1] == before[1:]  # the stored deltas are left as they were, one line is added
    (sequence, _), *added = json.loads(lines[-1])
    assert (sequence, added) == (
        deltas + 1,
        [[["agent", "memory", "content"], [{"role": "user", "text": "new"}]], [["agent", "events"], [9]]],
    )
    loaded = _load(tmp_path)
    assert (loaded.memory.content, loaded.events) == (agent.memory.content, agent.events)


@pytest.mark.parametrize(
    "change",
    [
        lambda a: a.memory.content.__setitem__(0, Msg("user", "edited")),
        lambda a: a.memory.content.__setitem__(3, Msg("user", "delta 1")),  # an appended one, equal
        lambda a: a.memory.content.pop(0),
        lambda a: setattr(a.memory, "note", "changed"),
    ],
    ids=["replace", "equal-replacement-of-a-delta-item", "pop", "other-field"],
)
def test_an_edit_after_a_typed_load_rewrites_the_document(tmp_path: Path, change: Any) -> None:
    _saved_with_deltas(tmp_path, 2)
    session, agent = _typed_load(tmp_path)
    change(agent)
    agent.memory.content.append(Msg("user", "after"))
    session.save("chat", agent=agent)
    assert _files(tmp_path) == ["chat.json"]
    loaded = _load(tmp_path)
    assert (loaded.memory.content, loaded.memory.note) == (agent.memory.content, agent.memory.note)


def test_a_delta_item_the_typed_load_cannot_take_is_reported_at_its_companion_line(tmp_path: Path) -> None:
    """The document is well-formed, an appended item is not: the full load names its line."""
    session, memory = JSONSession(tmp_path), NumberedMemory()
    session.save("chat", memory=memory)
    memory.content.append(NumberedMsg("u", 7))
    session.save("chat", memory=memory)
    before, text = typed_loads(), TextMemory()
    with pytest.raises(StateLoadError) as caught:
        JSONSession(tmp_path).load("chat", memory=text)
    log = (tmp_path / "chat.json.log").read_bytes().split(b"\n")
    places = [(Path(p.source or "").name, p.line, p.column, p.path) for p in caught.value.problems]
    assert places == [("chat.json.log", 2, log[1].index(b'"text":7') + 1, ("memory", "content", 0, "text"))]
    assert (typed_loads(), text.content) == (before, [])


# -- Hypothesis: whatever happens to the list, a load gives it back ----------------------

_OPS = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3)),
    st.tuples(st.just("extend"), st.integers(0, 3)),
    st.tuples(st.just("pop"), st.integers(0, 9)),
    st.tuples(st.just("insert"), st.integers(0, 9)),
    st.tuples(st.just("replace"), st.integers(0, 9)),
    st.tuples(st.just("assign"), st.integers(0, 3)),
    st.tuples(st.just("clear"), st.just(0)),
    st.tuples(st.just("note"), st.integers(0, 3)),
    st.tuples(st.just("save"), st.just(0)),
    st.tuples(st.just("reload"), st.just(0)),
)


def _apply(agent: Agent, op: str, arg: int, counter: list[int]) -> None:
    content = agent.memory.content
    counter[0] += 1
    fresh = Msg("user", f"m{counter[0]}")
    if op == "append":
        content.append(fresh)
    elif op == "extend":
        content.extend(Msg("user", f"m{counter[0]}.{index}") for index in range(arg))
    elif op == "pop" and content:
        content.pop(arg % len(content))
    elif op == "insert":
        content.insert(arg, fresh)
    elif op == "replace" and content:
        content[arg % len(content)] = fresh
    elif op == "assign":
        agent.memory.content = content[:arg]
    elif op == "clear":
        content.clear()
    elif op == "note":
        agent.memory.note = str(arg)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OPS, max_size=30))
def test_loads_always_equal_the_live_list(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]) -> None:
    folder = tmp_path_factory.mktemp("appends")
    session, agent, counter = JSONSession(folder), Agent(), [0]
    for op, arg in [*ops, ("save", 0)]:
        if op == "save":
            session.save("chat", agent=agent)
            loaded = _load(folder)
            assert loaded.memory.content == agent.memory.content
            assert loaded.memory.note == agent.memory.note
        elif op == "reload":
            session.save("chat", agent=agent)
            session, agent = JSONSession(folder), Agent()
            session.load("chat", agent=agent)
        else:
            _apply(agent, op, arg, counter)


# -- companions: torn lines, strangers, crashes in the middle of a rewrite ------------------


def _saved_with_deltas(folder: Path, deltas: int = 2) -> tuple[JSONSession, Agent]:
    session, agent = JSONSession(folder), Agent()
    agent.memory.content.extend(_msgs(2))
    session.save("chat", agent=agent)
    for index in range(deltas):
        agent.memory.content.append(Msg("user", f"delta {index}"))
        session.save("chat", agent=agent)
    return session, agent


class _Killed(BaseException):
    """Stands for a SIGKILL: raised where a writer dies, past every clean-up of the save."""


def _killed_before_count(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """The next delta save dies after its line is stored and before the header's count says ``count``."""
    def dying(value: int) -> bytes:
        if value == count:
            raise _Killed
        return document.count_field(value)

    monkeypatch.setattr("statekit.session._companion.count_field", dying)


def test_two_writers_killed_between_line_and_count_leave_a_session_that_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer killed after its line and before its count leaves one line more than the header says,
    which loads; the next writer, killed in the same place, must not leave two more (found by the crash suite)."""
    _saved_with_deltas(tmp_path, deltas=1)  # the header counts 1
    for count in (2, 3):  # two writers in turn, each loading what the last one left and dying the same way
        writer, agent = JSONSession(tmp_path), Agent()
        writer.load("chat", agent=agent)
        agent.memory.content.append(Msg("user", f"killed {count}"))
        with monkeypatch.context() as patch:
            _killed_before_count(patch, count)
            with pytest.raises(_Killed):
                writer.save("chat", agent=agent)
        assert _load(tmp_path).memory.content == agent.memory.content  # every stored line loads


def test_a_torn_last_line_is_ignored_then_cut(tmp_path: Path) -> None:
    session, agent = _saved_with_deltas(tmp_path)
    with open(tmp_path / "chat.json.log", "ab") as log:
        log.write(b'[[["agent","memory","content"],[{"role":"us')
    assert _load(tmp_path).memory.content == agent.memory.content
    agent.memory.content.append(Msg("user", "after the crash"))
    session.save("chat", agent=agent)
    assert _load(tmp_path).memory.content == agent.memory.content
    assert (tmp_path / "chat.json.log").read_bytes().endswith(b"after the crash\"}]]]\n")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_companion_is_named(tmp_path: Path) -> None:
    _saved_with_deltas(tmp_path)
    (tmp_path / "chat.json.log").chmod(0)
    with pytest.raises(SessionError, match=rf"cannot read {re.escape(str(tmp_path / 'chat.json.log'))}, beside .*chat\.json: Permission denied"):
        _load(tmp_path)


def test_a_lock_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    """As another user's lock file left by a writer of theirs would be (a folder stands in for it: root opens any file)."""
    session, agent = _saved_with_deltas(tmp_path)
    (tmp_path / ".chat.json.lock").mkdir()
    agent.memory.content.append(Msg("user", "more"))
    lock = re.escape(str(tmp_path / ".chat.json.lock"))
    with pytest.raises(SessionError, match=rf"^cannot open {lock}, the lock file of .*chat\.json: Is a directory"):
        session.save("chat", agent=agent)


def test_an_empty_companion_is_called_empty(tmp_path: Path) -> None:
    _saved_with_deltas(tmp_path)
    (tmp_path / "chat.json.log").write_bytes(b"")
    with pytest.raises(DocumentError, match=r"chat\.json\.log:1: the companion of .*chat\.json is empty") as caught:
        _load(tmp_path)
    assert "names another" not in str(caught.value)


def test_a_token_past_the_first_bytes_is_not_called_reordered(tmp_path: Path) -> None:
    _saved_with_deltas(tmp_path)
    path = tmp_path / "chat.json"
    path.write_bytes(path.read_bytes().replace(b'"format"', b'"note": "' + b"x" * 600 + b'", "format"', 1))
    with pytest.raises(DocumentError, match="token .* is not within its first 512 bytes") as caught:
        _load(tmp_path)
    assert "not its first key" not in str(caught.value)


def test_a_document_copied_without_its_companion_is_refused(tmp_path: Path) -> None:
    """A backup of *.json alone: the document says its companion holds deltas."""
    _, agent = _saved_with_deltas(tmp_path / "sessions")
    (tmp_path / "backup").mkdir()
    for path in (tmp_path / "sessions").glob("*.json"):
        (tmp_path / "backup" / path.name).write_bytes(path.read_bytes())
    with pytest.raises(DocumentError, match=r"companion .*backup/chat\.json\.log is missing") as caught:
        _load(tmp_path / "backup")
    assert caught.value.source == str(tmp_path / "backup" / "chat.json")
    (tmp_path / "backup" / "chat.json.log").write_bytes((tmp_path / "sessions" / "chat.json.log").read_bytes())
    assert _load(tmp_path / "backup").memory.content == agent.memory.content


def test_a_document_whose_token_was_removed_is_refused(tmp_path: Path) -> None:
    _saved_with_deltas(tmp_path)
    path = tmp_path / "chat.json"
    document = json.loads(path.read_bytes())
    del document["__statekit__"]["log"]
    path.write_text(json.dumps(document, indent=2))
    with pytest.raises(DocumentError, match=r"chat\.json\.log holds items appended to document [0-9a-f]+, but this document has no token"):
        _load(tmp_path)


def test_old_companions_without_sequence_load_and_the_next_save_rewrites_them(tmp_path: Path) -> None:
    """A companion of format 1 (as statekit wrote before issue 26): its lines are deltas alone."""
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(2))
    session.save("chat", agent=agent)
    path, log = tmp_path / "chat.json", tmp_path / "chat.json.log"
    token = json.loads(path.read_bytes())["__statekit__"]["log"]
    path.write_bytes(path.read_bytes().replace(b',\n    "deltas": 0', b""))  # as older statekits wrote it
    lines = [orjson.dumps([[["agent", "memory", "content"], [{"role": "user", "text": f"old {index}"}]]]) for index in range(2)]
    log.write_bytes(orjson.dumps({"statekit_log": 1, "document": token}) + b"\n" + b"\n".join(lines) + b"\n")
    loading, reader = Agent(), JSONSession(tmp_path)
    reader.load("chat", agent=loading)
    assert [m.text for m in loading.memory.content] == ["message 0", "message 1", "old 0", "old 1"]
    loading.memory.content.append(Msg("user", "new"))
    reader.save("chat", agent=loading)  # rewritten whole: no line of the new format joins an old companion
    assert _files(tmp_path) == ["chat.json"]
    assert _load(tmp_path).memory.content == loading.memory.content


def test_the_deltas_flag_cleared_by_hand_loads_the_document_alone(tmp_path: Path) -> None:
    """What the refusal of a missing companion says to do, to load the last full write on purpose."""
    _saved_with_deltas(tmp_path)
    (tmp_path / "chat.json.log").unlink()
    path = tmp_path / "chat.json"
    path.write_bytes(path.read_bytes().replace(b'"deltas": 1', b'"deltas": 0'))
    assert _load(tmp_path).memory.content == _msgs(2)


def test_a_hard_linked_companion_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    session, agent = _saved_with_deltas(tmp_path / "sessions")
    outside = tmp_path / "outside.log"
    os.link(tmp_path / "sessions" / "chat.json.log", outside)
    before = outside.read_bytes()
    agent.memory.content.append(Msg("user", "more"))
    with pytest.raises(SessionError, match=r"chat\.json\.log has 2 hard links; statekit never reads or writes"):
        session.save("chat", agent=agent)
    assert outside.read_bytes() == before
    with pytest.raises(SessionError, match=r"chat\.json\.log has 2 hard links"):
        _load(tmp_path / "sessions")


def test_a_hard_linked_session_file_is_not_read_through(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    secret = tmp_path / "elsewhere.json"
    secret.write_text('{"agent": {"memory": {"content": [], "note": "private"}, "events": []}}')
    os.link(secret, tmp_path / "sessions" / "chat.json")
    with pytest.raises(SessionError, match=r"chat\.json has 2 hard links"):
        _load(tmp_path / "sessions")
    with pytest.raises(SessionError, match=r"chat\.json has 2 hard links"):
        JSONSession(tmp_path / "sessions").save("chat", agent=Agent())
    assert "private" in secret.read_text()


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_what_killed_writers_left_is_cleaned_up_by_the_next_write_in_the_folder(tmp_path: Path) -> None:
    import fcntl

    _, b = _saved_with_deltas(tmp_path / "b")
    _, d = _saved_with_deltas(tmp_path / "d")
    _saved_with_deltas(tmp_path / "c")
    for name in ("b", "d"):
        for path in (tmp_path / name).iterdir():
            path.replace(tmp_path / path.name.replace("chat", name))
        (tmp_path / name).rmdir()
    (tmp_path / "c" / "chat.json.log").replace(tmp_path / "c.json.log")  # a delete killed after removing c.json
    shutil.rmtree(tmp_path / "c")
    for name in (".b.json.lock", ".b.json.tmp", ".b.json.log.tmp", ".e.json.tmp", ".e.json.lock"):
        (tmp_path / name).write_bytes(b'{"half": ')
    (tmp_path / ".b.json.log.old").write_bytes(b'{"statekit_log":2,"document":"0000000000000000"}\n')
    (tmp_path / "d.json.log").replace(tmp_path / ".d.json.log.old")  # a full write of d killed before its document
    b_doc = tmp_path / "b.json"
    b_doc.write_bytes(b_doc.read_bytes().replace(b'"deltas": 1', b'"deltas": 0'))  # its first delta save killed before
    with open(tmp_path / ".e.json.lock", "rb") as held:  # a writer of e is running
        fcntl.flock(held, fcntl.LOCK_EX)
        JSONSession(tmp_path).save("a", agent=Agent())
    assert _files(tmp_path) == [".e.json.lock", ".e.json.tmp", "a.json", "b.json", "b.json.log", "d.json", "d.json.log"]
    assert _load(tmp_path, "b").memory.content == b.memory.content
    assert _load(tmp_path, "d").memory.content == d.memory.content
    assert b'"deltas": 1' in b_doc.read_bytes()  # so that b found without its companion is refused


def test_a_companion_of_another_document_is_an_error(tmp_path: Path) -> None:
    _saved_with_deltas(tmp_path / "a")
    _saved_with_deltas(tmp_path / "b")
    (tmp_path / "a" / "chat.json.log").replace(tmp_path / "b" / "chat.json.log")
    with pytest.raises(DocumentError, match=r"companion .*b/chat\.json\.log does not belong") as info:
        _load(tmp_path / "b")
    assert str(tmp_path / "b" / "chat.json") in str(info.value)


def test_a_document_whose_keys_a_tool_reordered_is_refused_until_put_back(tmp_path: Path) -> None:
    _, agent = _saved_with_deltas(tmp_path)
    path = tmp_path / "chat.json"
    document = json.loads(path.read_bytes())
    (tmp_path / "chat.json").write_text(json.dumps({"agent": document["agent"], **document}, indent=2))  # what jq -S does
    loading = Agent()
    with pytest.raises(DocumentError, match="'__statekit__' metadata is not its first key") as info:
        JSONSession(tmp_path).load("chat", agent=loading)
    assert str(path) in str(info.value)
    assert loading.memory.content == []  # nothing was loaded: the appended items were not silently left out
    path.write_text(json.dumps(document, indent=2))
    assert _load(tmp_path).memory.content == agent.memory.content


def test_a_crash_before_the_document_is_replaced(tmp_path: Path) -> None:
    """The companion was put aside, the new document not written yet: the old state loads."""
    _, agent = _saved_with_deltas(tmp_path)
    (tmp_path / "chat.json.log").replace(tmp_path / ".chat.json.log.old")
    assert _load(tmp_path).memory.content == agent.memory.content
    session = JSONSession(tmp_path)
    session.load("chat", agent=agent)
    agent.memory.content.append(Msg("user", "next"))
    session.save("chat", agent=agent)  # brings the companion back, then appends
    assert _files(tmp_path) == ["chat.json", "chat.json.log"]
    assert _load(tmp_path).memory.content == agent.memory.content


@pytest.mark.parametrize("left", ["chat.json.log", ".chat.json.log.old"])
def test_a_full_write_leaves_no_companion_behind(tmp_path: Path, left: str) -> None:
    """A full write checks the companions under its lock: deltas (or deltas a killed write put aside) go once the new document is in."""
    _, agent = _saved_with_deltas(tmp_path)
    if left != "chat.json.log":
        (tmp_path / "chat.json.log").replace(tmp_path / left)
    agent.memory.content.append(Msg("user", "next"))
    JSONSession(tmp_path).save("chat", agent=agent, overwrite=True)
    assert _files(tmp_path) == ["chat.json"]
    assert _load(tmp_path).memory.content == agent.memory.content


def test_deltas_left_aside_are_not_overwritten(tmp_path: Path) -> None:
    """A writer that saw no deltas must not start a companion while a crash left this document's aside."""
    first, agent = _saved_with_deltas(tmp_path, deltas=0)
    second, other = JSONSession(tmp_path), Agent()
    second.load("chat", agent=other)
    other.memory.content.append(Msg("user", "second"))
    second.save("chat", agent=other)
    (tmp_path / "chat.json.log").replace(tmp_path / ".chat.json.log.old")  # a rewrite killed half-way
    agent.memory.content.append(Msg("user", "first"))
    with pytest.raises(ConflictError):
        first.save("chat", agent=agent)
    assert [m.text for m in _load(tmp_path).memory.content][-1] == "second"


def test_a_crash_after_the_document_is_replaced(tmp_path: Path) -> None:
    """The new document is written, the old companion not deleted yet: it is ignored."""
    session, agent = _saved_with_deltas(tmp_path)
    old = (tmp_path / "chat.json.log").read_bytes()
    agent.memory.content[0] = Msg("user", "rewritten")
    session.save("chat", agent=agent)
    (tmp_path / ".chat.json.log.old").write_bytes(old)
    assert _load(tmp_path).memory.content == agent.memory.content


# -- revisions -----------------------------------------------------------------------------


def test_a_delta_over_another_writers_delta_conflicts(tmp_path: Path) -> None:
    first, agent = _saved_with_deltas(tmp_path)
    second, other = JSONSession(tmp_path), Agent()
    second.load("chat", agent=other)
    other.memory.content.append(Msg("user", "second"))
    second.save("chat", agent=other)
    agent.memory.content.append(Msg("user", "first"))
    log = (tmp_path / "chat.json.log").read_bytes()
    with pytest.raises(ConflictError):
        first.save("chat", agent=agent)
    assert (tmp_path / "chat.json.log").read_bytes() == log


def test_a_delta_saved_again_after_a_conflict_stores_what_the_list_holds_now(tmp_path: Path) -> None:
    """The refused delta had already added its item to the saved items' snapshot;
    the next save from the same base leaves that item out and still writes a delta."""
    first, agent = _saved_with_deltas(tmp_path)
    stored = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    second, other = JSONSession(tmp_path), Agent()
    second.load("chat", agent=other)
    other.memory.content.append(Msg("user", "second"))
    second.save("chat", agent=other)
    agent.memory.content.append(Msg("user", "first"))
    with pytest.raises(ConflictError):
        first.save("chat", agent=agent)
    for name, data in stored.items():  # the other writer's save taken back: the base holds again
        (tmp_path / name).write_bytes(data)
    agent.memory.content[-1] = Msg("user", "retry")
    first.save("chat", agent=agent)
    agent.memory.content.append(Msg("user", "more"))
    first.save("chat", agent=agent)
    assert _files(tmp_path) == ["chat.json", "chat.json.log"]
    lines = (tmp_path / "chat.json.log").read_bytes().splitlines()
    assert len(lines) == len(stored["chat.json.log"].splitlines()) + 2  # two deltas, no rewrite
    assert [m.text for m in _load(tmp_path).memory.content][-3:] == [agent.memory.content[-3].text, "retry", "more"]
    assert _load(tmp_path).memory.content == agent.memory.content


def test_a_delta_over_a_rewrite_conflicts(tmp_path: Path) -> None:
    first, agent = _saved_with_deltas(tmp_path)
    second, other = JSONSession(tmp_path), Agent()
    second.load("chat", agent=other)
    other.memory.note = "rewritten"
    second.save("chat", agent=other)
    agent.memory.content.append(Msg("user", "first"))
    with pytest.raises(ConflictError):
        first.save("chat", agent=agent)
    assert _load(tmp_path).memory.note == "rewritten"


async def test_an_item_appended_while_a_delta_save_starts_is_saved_later(tmp_path: Path) -> None:
    """A task that appends while a delta save hands its write to a worker: the
    save stores the items it encoded, and remembers no more than those."""
    session, agent = JSONSession(tmp_path), Agent()
    agent.memory.content.extend(_msgs(1))
    await session.asave("chat", agent=agent)

    async def append_meanwhile() -> None:
        await asyncio.sleep(0)
        agent.memory.content.append(Msg("user", "meanwhile"))

    meanwhile = asyncio.ensure_future(append_meanwhile())
    await asyncio.sleep(0)  # it now waits to run right after the save's first yield
    agent.memory.content.append(Msg("user", "appended"))
    await session.asave("chat", agent=agent)
    await meanwhile
    await session.asave("chat", agent=agent)
    loaded = Agent()
    await JSONSession(tmp_path).aload("chat", agent=loaded)
    assert loaded.memory.content == [*_msgs(1), Msg("user", "appended"), Msg("user", "meanwhile")]


def test_saves_while_another_thread_resizes_the_list_store_what_it_holds_at_the_end(tmp_path: Path) -> None:
    """The saved items are compared with the live list's own array while another thread
    shrinks it (its array then freed or moved) and grows it again: no save reads past its end,
    and a save once the thread stopped stores exactly what the list holds."""
    session, agent = JSONSession(tmp_path), Agent()
    agent.events.extend(range(40_000))  # an array the allocator maps on its own, and unmaps when it shrinks
    session.save("chat", agent=agent)
    stop = threading.Event()

    def resize() -> None:
        while not stop.is_set():
            del agent.events[100:]
            agent.events.extend(range(100, 40_000))

    thread = threading.Thread(target=resize)
    thread.start()
    try:
        for _ in range(30):
            session.save("chat", agent=agent)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    agent.events.append(-1)
    session.save("chat", agent=agent)
    assert _load(tmp_path).events == agent.events


def test_two_writers_appending_through_update_lose_nothing(tmp_path: Path) -> None:
    JSONSession(tmp_path).save("chat", agent=Agent())

    def writer(name: str) -> None:
        session, agent = JSONSession(tmp_path), Agent()
        for index in range(40):
            session.update("chat", lambda: agent.memory.content.append(Msg(name, str(index))), retries=1000, agent=agent)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    content = _load(tmp_path).memory.content
    for name in ("a", "b"):
        assert [m.text for m in content if m.role == name] == [str(index) for index in range(40)]


_APPENDER = """
from append_models import Agent, Msg
from statekit.session import JSONSession


def work(folder, name):
    session, agent = JSONSession(folder), Agent()
    for index in range(30):
        session.update("chat", lambda: agent.memory.content.append(Msg(name, str(index))), retries=1000, agent=agent)
"""


def test_writer_processes_appending_through_update_lose_nothing(tmp_path: Path) -> None:
    JSONSession(tmp_path).save("chat", agent=Agent())
    run_forked(_APPENDER, [[str(tmp_path), name] for name in ("a", "b", "c")], timeout=120)
    content = _load(tmp_path).memory.content
    for name in ("a", "b", "c"):
        assert [m.text for m in content if m.role == name] == [str(index) for index in range(30)]


def test_a_companion_with_lines_its_header_never_counted_is_refused_after_reading_again(tmp_path: Path) -> None:
    """A read that finds more lines than the header counts (past one: a save killed before counting) reads
    again, as a reader that caught writers appending mid-read would; a companion that stays so is refused."""
    _saved_with_deltas(tmp_path, deltas=3)
    log = tmp_path / "chat.json.log"
    data = bytearray(log.read_bytes())
    at = document.count_at(bytes(data))
    assert at is not None
    data[at : at + len(document.count_field(1))] = document.count_field(1)
    log.write_bytes(bytes(data))
    with pytest.raises(DocumentError, match="the header says 1 deltas were saved, but 3 are here: lines were added after the last save"):
        JSONSession(tmp_path).load("chat", agent=Agent())


# -- compaction, the raw-document API, YAML ---------------------------------------------------


def test_deltas_past_the_threshold_are_compacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_appends, "COMPACT_MIN_BYTES", 600)
    session, agent = JSONSession(tmp_path), Agent()
    sizes = []
    for index in range(30):
        agent.memory.content.append(Msg("user", f"message {index}"))
        session.save("chat", agent=agent)
        log = tmp_path / "chat.json.log"
        sizes.append(log.stat().st_size if log.exists() else 0)
    assert max(sizes) <= 600 and sizes.count(0) >= 2
    assert _load(tmp_path).memory.content == agent.memory.content


def test_read_document_sees_the_merged_state(tmp_path: Path) -> None:
    _, agent = _saved_with_deltas(tmp_path)
    session = JSONSession(tmp_path)
    stored = session.read_document("chat")
    assert stored is not None
    assert stored.data["agent"]["memory"]["content"] == [{"role": m.role, "text": m.text} for m in agent.memory.content]
    assert stored.data["__statekit__"] == {"format": 1}
    assert json.loads(stored.raw) == stored.data
    session.write_document("chat", stored.data, expected_revision=stored.revision)  # a compaction
    assert _files(tmp_path) == ["chat.json"]
    assert _load(tmp_path).memory.content == agent.memory.content


def test_yaml_rewrites_and_reads_back(tmp_path: Path) -> None:
    session, agent = YAMLSession(tmp_path), Agent()
    for index in range(3):
        agent.memory.content.append(Msg("user", str(index)))
        session.save("chat", agent=agent)
    assert _files(tmp_path) == ["chat.yaml"]
    loaded = Agent()
    YAMLSession(tmp_path).load("chat", agent=loaded)
    assert loaded.memory.content == agent.memory.content


def test_a_yaml_copy_of_a_json_document_with_a_token_is_refused_saying_why(tmp_path: Path) -> None:
    """A hand copy keeps the token of a JSON session whose appended items stay in its .log."""
    agent = Agent()
    agent.memory.content.extend(_msgs(2))
    JSONSession(tmp_path).save("chat", agent=agent)
    data = json.loads((tmp_path / "chat.json").read_bytes())
    (tmp_path / "chat.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(DocumentError, match=r"chat\.yaml: .* names items appended beside it.*statekit convert"):
        YAMLSession(tmp_path).load("chat", agent=Agent())


# -- the command line ------------------------------------------------------------------------


def test_show_sees_the_merged_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, agent = _saved_with_deltas(tmp_path)
    assert main(["show", "--dir", str(tmp_path), "chat", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [m["text"] for m in shown["agent"]["memory"]["content"]] == [m.text for m in agent.memory.content]


def test_compact_folds_the_deltas_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, agent = _saved_with_deltas(tmp_path)
    JSONSession(tmp_path).save("plain", agent=Agent())
    assert main(["compact", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "chat: compacted into" in out and "plain: nothing appended to fold in" in out
    assert _files(tmp_path) == ["chat.json", "plain.json"]
    assert _load(tmp_path).memory.content == agent.memory.content
    assert json.loads((tmp_path / "chat.json").read_bytes())["__statekit__"] == {"format": 1}


class _WrittenWhileRead(JSONSession):
    """A folder whose session another writer appends to right after each of the first ``times`` reads."""

    def __init__(self, folder: Path, times: int) -> None:
        super().__init__(folder)
        self.times, self.writer, self.agent = times, JSONSession(folder), Agent()
        self.writer.load("chat", agent=self.agent)

    async def aread_document(self, session_id: str, user_id: str | None = None, *, at: str | None = None) -> Any:
        stored = await super().aread_document(session_id, user_id, at=at)
        if self.times:
            self.times -= 1
            self.agent.memory.content.append(Msg("user", f"meanwhile {self.times}"))
            await self.writer.asave("chat", agent=self.agent)
        return stored


@pytest.mark.parametrize("times", [1, 3])
def test_compact_of_a_session_being_written_tries_again(tmp_path: Path, times: int) -> None:
    _saved_with_deltas(tmp_path)
    store, out, err = _WrittenWhileRead(tmp_path, times), io.StringIO(), io.StringIO()
    assert asyncio.run(compact_sessions(store, [(None, "chat")], out=out, err=err))
    assert (out.getvalue(), err.getvalue()) == (f"chat: compacted into {tmp_path / 'chat.json'}\ncompacted 1, unchanged 0, failed 0\n", "")
    assert _files(tmp_path) == ["chat.json"]
    assert _load(tmp_path).memory.content == store.agent.memory.content  # what the writer added is kept


def test_compact_of_a_session_written_all_the_time_says_so_in_the_commands_words(tmp_path: Path) -> None:
    _saved_with_deltas(tmp_path)
    store, out, err = _WrittenWhileRead(tmp_path, 1000), io.StringIO(), io.StringIO()
    assert not asyncio.run(compact_sessions(store, [(None, "chat")], out=out, err=err))
    assert err.getvalue().startswith(f"chat: not compacted: it was written {ATTEMPTS} times while being compacted")
    assert "statekit compact" in err.getvalue() and "update()" not in err.getvalue() and "overwrite" not in err.getvalue()
    assert _load(tmp_path).memory.content == store.agent.memory.content


def test_compact_repairs_what_a_crash_left_and_refuses_damage_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, torn = _saved_with_deltas(tmp_path, deltas=2)
    with open(tmp_path / "chat.json.log", "ab") as torn_log:
        torn_log.write(b'[[3,"00000000"],[["agent","memory","content"],[{"role":"us')  # a save killed mid-append
    assert main(["compact", "--dir", str(tmp_path), "chat"]) == 0
    assert _files(tmp_path) == ["chat.json"] and _load(tmp_path).memory.content == torn.memory.content
    _saved_with_deltas(tmp_path / "damaged", deltas=3)
    log = tmp_path / "damaged" / "chat.json.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join([lines[0], lines[2], lines[1], lines[3]]))
    capsys.readouterr()
    assert main(["compact", "--dir", str(tmp_path / "damaged"), "chat"]) == 1
    assert f"chat: not compacted: {log}:2: delta 2 where delta 1 belongs" in capsys.readouterr().err
    assert _files(tmp_path / "damaged") == ["chat.json", "chat.json.log"]


def test_commands_on_a_session_file_see_the_merged_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, agent = _saved_with_deltas(tmp_path / "sessions")
    assert main(["show", str(tmp_path / "sessions" / "chat.json"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["agent"]["memory"]["content"]) == len(agent.memory.content) == 4
    assert main(["convert", str(tmp_path / "sessions" / "chat.json"), str(tmp_path / "chat.yaml")]) == 0
    loaded = Agent()
    YAMLSession(tmp_path).load("chat", agent=loaded)
    assert loaded.memory.content == agent.memory.content


@pytest.mark.parametrize("damage", ["reordered", "token-removed", "companion-missing", "line-removed"])
def test_commands_on_a_damaged_session_file_refuse_it_as_a_load_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    _saved_with_deltas(tmp_path, deltas=3)
    path, log = tmp_path / "chat.json", tmp_path / "chat.json.log"
    document = json.loads(path.read_bytes())
    if damage == "reordered":
        path.write_text(json.dumps({"agent": document["agent"], "__statekit__": document["__statekit__"]}))
    elif damage == "token-removed":
        del document["__statekit__"]["log"]
        path.write_text(json.dumps(document))
    elif damage == "companion-missing":
        log.unlink()
    else:
        lines = log.read_bytes().splitlines(keepends=True)
        log.write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(DocumentError) as loading:
        _load(tmp_path)
    assert main(["show", str(path), "--json"]) == 1
    assert loading.value.reason in capsys.readouterr().err


def test_commands_follow_a_link_named_on_the_command_line_to_a_session_with_deltas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As they do to any other file: the rule against links holds inside a session folder, not here."""
    _, agent = _saved_with_deltas(tmp_path / "sessions")
    (tmp_path / "latest.json").symlink_to(tmp_path / "sessions" / "chat.json")
    assert main(["show", str(tmp_path / "latest.json"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [m["text"] for m in shown["agent"]["memory"]["content"]] == [m.text for m in agent.memory.content]
    assert main(["validate", str(tmp_path / "latest.json"), "--module", "agent=append_models:Agent"]) == 0
    assert main(["convert", str(tmp_path / "latest.json"), str(tmp_path / "chat.yaml")]) == 0
    loaded = Agent()
    YAMLSession(tmp_path).load("chat", agent=loaded)
    assert loaded.memory.content == agent.memory.content


def test_a_damaged_delta_line_is_named(tmp_path: Path) -> None:
    _saved_with_deltas(tmp_path, deltas=3)
    log = tmp_path / "chat.json.log"
    lines = log.read_bytes().split(b"\n")
    lines[2] = b'[[["agent","memory","content"],[{"role":x}]]]'  # complete (newline-terminated) but not JSON
    log.write_bytes(b"\n".join(lines))
    with pytest.raises(DocumentError, match=r"chat\.json\.log:3:41: invalid JSON: unexpected character"):
        _load(tmp_path)


def test_a_syntax_error_in_a_document_with_deltas_is_placed_and_worded(tmp_path: Path) -> None:
    """The document read with its deltas is a bytes subclass, which orjson's error path refused."""
    _saved_with_deltas(tmp_path)
    path = tmp_path / "chat.json"
    text = path.read_bytes()
    path.write_bytes(text.replace(b'"note"', b'"note" x', 1))
    line = text[: text.index(b'"note"')].count(b"\n") + 1
    with pytest.raises(DocumentError, match=rf"chat\.json:{line}:\d+: invalid JSON: unexpected character"):
        _load(tmp_path)


# -- damage: every damaged session loads the state last saved, or is refused with its position ------

DELTAS = 4


def _appended(session: JSONSession, agent: Agent, texts: list[str]) -> None:
    """One delta save per text, each appending it."""
    for text in texts:
        agent.memory.content.append(Msg("user", text))
        session.save("chat", agent=agent)


def damaged_logs(lines: list[bytes], foreign: list[bytes], fork: list[bytes]) -> dict[str, bytes]:
    """A companion's lines (the header first, each with its newline) damaged in every way of issue 26.

    Args:
        lines: The session's: the header and :data:`DELTAS` delta lines.
        foreign: Another document's, as many.
        fork: A copy of this document that went on with other deltas after the second.
    """
    h, d1, d2, d3, d4 = lines
    whole = b"".join(lines)
    cases = {
        **{f"duplicated-{i}": b"".join([*lines[: i + 1], lines[i], *lines[i + 1 :]]) for i in range(DELTAS + 1)},
        "duplicated-first-at-end": whole + d1,
        **{f"swapped-{i}-{j}": b"".join(_swap(lines, i, j)) for i, j in [(0, 1), (1, 2), (2, 3), (3, 4), (1, 4), (2, 4)]},
        **{f"removed-{i}": b"".join(lines[:i] + lines[i + 1 :]) for i in range(DELTAS + 1)},
        **{f"foreign-{i}": b"".join([*lines[:i], foreign[i], *lines[i + 1 :]]) for i in range(1, DELTAS + 1)},
        "foreign-appended": whole + foreign[1],
        "fork-3": b"".join([h, d1, d2, fork[3], d4]),
        "fork-4": b"".join([h, d1, d2, d3, fork[4]]),
        "foreign-whole": b"".join(foreign),
    }
    start = 0
    for index, line in enumerate(lines):
        spots = [10, 20] if index == 0 else [2, 5, len(line) // 2, len(line) - 2]
        for spot in spots:
            flipped = bytearray(whole)
            flipped[start + spot] ^= 1
            cases[f"flipped-{index}-{spot}"] = bytes(flipped)
        start += len(line)
    ends = [len(b"".join(lines[: i + 1])) for i in range(DELTAS + 1)]
    for name, cut in [("in-header", 10), ("after-header", ends[0]), ("in-1", ends[0] + 9), ("after-2", ends[2]),
                      ("in-3", ends[2] + len(d3) // 2), ("in-4", ends[3] + len(d4) // 2), ("newline", ends[4] - 1)]:
        cases[f"truncated-{name}"] = whole[:cut]
    cases["empty"] = b""
    return cases


def _swap(lines: list[bytes], i: int, j: int) -> list[bytes]:
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return out


def _deltas_with_fork(tmp_path: Path) -> tuple[Agent, list[bytes], list[bytes], list[bytes]]:
    """A session whose 4 deltas were saved, another session's companion, and a fork's."""
    main, fork, other = tmp_path / "main", tmp_path / "fork", tmp_path / "other"
    session, agent = _saved_with_deltas(main, deltas=0)
    _appended(session, agent, ["d1", "d2"])
    fork.mkdir()
    for name in ("chat.json", "chat.json.log"):
        (fork / name).write_bytes((main / name).read_bytes())
    _appended(session, agent, ["d3", "d4"])
    forked_session, forked = JSONSession(fork), Agent()
    forked_session.load("chat", agent=forked)
    _appended(forked_session, forked, ["fork 3", "fork 4"])
    _saved_with_deltas(other, deltas=DELTAS)
    main_log, other_log, fork_log = (
        (folder / "chat.json.log").read_bytes().splitlines(keepends=True) for folder in (main, other, fork)
    )
    return agent, main_log, other_log, fork_log


def assert_exact_or_refused(load: Any, expected: Agent) -> DocumentError | None:
    """Load, and require the state last saved (``None``), or a ``DocumentError`` that says where."""
    loaded = Agent()
    try:
        load(loaded)
    except DocumentError as err:
        assert err.source, err
        return err
    assert loaded.memory.content == expected.memory.content and loaded.events == expected.events
    return None


def _file_cases(folder: Path) -> dict[str, Any]:
    doc, log = folder / "chat.json", folder / "chat.json.log"
    text = doc.read_bytes()
    meta = json.loads(text)["__statekit__"]
    return {
        "missing-companion": lambda: log.unlink(),
        "token-removed": lambda: doc.write_bytes(text.replace(f'"log": "{meta["log"]}",'.encode(), b"", 1)),
        "token-changed": lambda: doc.write_bytes(text.replace(meta["log"].encode(), b"0" * 16, 1)),
        "token-past-512": lambda: doc.write_bytes(text.replace(b'"format"', b'"pad": "' + b"x" * 600 + b'", "format"', 1)),
        "metadata-reordered": lambda: doc.write_text(json.dumps({"agent": json.loads(text)["agent"], "__statekit__": meta})),
    }


def test_every_damaged_session_loads_the_state_last_saved_or_is_refused_with_its_position(tmp_path: Path) -> None:
    agent, lines, foreign, fork = _deltas_with_fork(tmp_path)
    assert len(lines) == DELTAS + 1
    main = tmp_path / "main"
    document, log = (main / "chat.json").read_bytes(), main / "chat.json.log"
    in_log = damaged_logs(lines, foreign, fork)
    cases: dict[str, Any] = {name: (lambda data=data: log.write_bytes(data)) for name, data in in_log.items()}
    cases.update(_file_cases(main))
    assert len(cases) >= 51
    outcomes = {}
    for name, damage in cases.items():
        damage()
        try:
            outcomes[name] = assert_exact_or_refused(lambda into: JSONSession(main).load("chat", agent=into), agent)
        except AssertionError as err:
            raise AssertionError(f"{name}: loaded another state") from err
        (main / "chat.json").write_bytes(document)
        log.write_bytes(b"".join(lines))
    assert [name for name, err in outcomes.items() if err is None] == []  # a reformatted document would load
    for name in in_log:  # each refused at the companion's line at fault (a line cut off: where it is missing)
        refused = outcomes[name]
        assert refused is not None and (Path(refused.source or "").name, refused.line is not None) == (
            "chat.json.log",
            True,
        ), (name, str(refused))
