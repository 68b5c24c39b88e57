"""The typed session load (msgspec mirrors) and the full path cannot disagree (issue 11).

The typed path only ever loads well-formed data, and must then give exactly
what the full path gives; on anything else it declines (changing nothing) and
the full path loads or reports. These tests compare the two on random types
and data, pin the cases where it must decline, and check that it is taken.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Optional
from unittest import mock

import attr
import attrs
import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from statekit import JSONSession, LoadResult, StateDefinitionError, StateLoadError, StateModule, state_field, stateful
from statekit.values.bounded import ANY_LEVELS
from statekit.values.seam import SEAM
from statekit._limits import MAX_DEPTH
from statekit.state.load import load_many
from statekit.state.typed import decode, load_typed, typed_document
from statekit.codecs import JSON, Codec
from statekit.errors import DocumentError
from statekit.session.document import META_KEY

from strategies import data_for, examples, json_data, json_union_records, made_once, record_types, value_types
from test_agreement import shape
from test_depth import Blob, nested

META = {META_KEY: {"format": 1}}


def holder(tp: Any) -> type[StateModule]:
    """A module class with one field, ``value: tp``."""
    namespace = {"__annotations__": {"value": tp}, "value": state_field(default=None)}
    cls: type[StateModule] = stateful(type("Holder", (StateModule,), namespace))
    return cls


reused_holder = made_once(holder)
""":func:`holder`, made once per drawn type: the properties load fresh instances of it."""


def typed(modules: dict[str, StateModule], raw: bytes, strict: bool = True) -> dict[str, LoadResult] | None:
    """The typed path alone: its results, or ``None`` when it declines."""
    document_type = typed_document(modules, META_KEY)
    if document_type is None:
        return None
    document = decode(document_type, raw)
    return None if document is None else load_typed(document_type, modules, document, strict)


def full(modules: dict[str, StateModule], raw: bytes, strict: bool = True) -> Any:
    """The full path alone: its results, or the problems it reports."""
    try:
        return load_many(modules, JSON.loads(raw, None), strict=strict, fresh=True)
    except StateLoadError as err:
        return sorted((p.path, p.message) for p in err.problems)


def assert_agree(cls: type[StateModule], data: Any, strict: bool) -> bool:
    """Load ``{"value": data}`` both ways; return whether the typed path took it."""
    raw = msgspec.json.encode({**META, "m": {"value": data}})
    fast, slow = cls(), cls()
    before = shape(fast.value)  # type: ignore[attr-defined]
    got = typed({"m": fast}, raw, strict)
    expected = full({"m": slow}, raw, strict)
    if got is None:
        assert shape(fast.value) == before  # type: ignore[attr-defined]  # declined: nothing changed
        return False
    assert isinstance(expected, dict), f"typed path loaded what the full path refuses: {expected}"
    assert shape(fast.value) == shape(slow.value)  # type: ignore[attr-defined]
    assert got == expected
    return True


@pytest.mark.parametrize("bounded", [False, True], ids=["depth-pass", "bounded-decoder"])
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_typed_and_full_paths_agree_on_random_types_and_data(bounded: bool, data: st.DataObject) -> None:
    tp = data.draw(st.one_of(value_types, record_types, json_union_records), label="type")
    try:
        cls = reused_holder(tp)
    except StateDefinitionError:
        return  # refused at definition: nothing to compare
    deep = json_data.map(lambda value: [[[[[[[[[value]]]]]]]]])  # past ANY_LEVELS: the bounded decoder refuses
    values = st.one_of(data_for(tp), data_for(tp, noisy=True), json_data, deep)
    with mock.patch.object(SEAM, "bounded_from", 0 if bounded else 1 << 62):
        for value in data.draw(st.lists(values, min_size=3, max_size=3), label="data"):
            for strict in (True, False):
                assert_agree(cls, copy.deepcopy(value), strict)


@stateful
class Msg:
    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] | None = None


@stateful(frozen=True)
class Stamp:
    at: str
    tags: list[str] = attrs.field(factory=list)


@stateful
class Memory(StateModule):
    content: list[Msg] = state_field(factory=list)
    stamps: dict[str, Stamp] = state_field(factory=dict)


@stateful
class Agent(StateModule):
    name: str = state_field(default="")
    score: float = state_field(default=0.0)
    memory: Memory = state_field(factory=Memory)
    last: Optional[Msg] = state_field(default=None)


def agent_document(**changes: Any) -> dict[str, Any]:
    state = {
        "name": "Friday",
        "score": 3,
        "memory": {
            "content": [{"role": "user", "content": "hi", "metadata": {"turn": 1}}, {"role": "assistant", "content": [{"type": "text"}], "metadata": None}],
            "stamps": {"a": {"at": "noon", "tags": ["x"]}},
        },
        "last": None,
    }
    state.update(changes)
    return {**META, "agent": state}


def test_well_formed_data_takes_the_typed_path_and_loads_as_the_full_path_does() -> None:
    raw = msgspec.json.encode(agent_document())
    fast, slow = Agent(), Agent()
    assert typed({"agent": fast}, raw) is not None
    full({"agent": slow}, raw)
    assert fast == slow
    assert fast.score == 3.0 and type(fast.score) is float  # an int in a float field, as cattrs makes it
    assert fast.memory.content[0] == Msg("user", "hi", {"turn": 1})
    assert fast.memory.stamps["a"] == Stamp("noon", ["x"])


@pytest.mark.parametrize(
    "changes",
    [
        {"name": 1},  # a wrong type
        {"extra": 1},  # an unknown key in a module
        {"memory": {"content": [{"role": "user", "content": "hi", "metadata": None, "zz": 1}], "stamps": {}}},  # in a record
        {"memory": {"content": [{"role": "user", "content": "hi"}], "stamps": {}}},  # a defaulted key left out
        {"last": {"role": "user", "content": 5}},
        {"score": "high"},
    ],
)
def test_anything_unusual_is_declined_and_changes_nothing(changes: dict[str, Any]) -> None:
    raw = msgspec.json.encode(agent_document(**changes))
    agent = Agent(name="before")
    assert typed({"agent": agent}, raw) is None
    assert agent == Agent(name="before")


def test_a_document_with_deltas_or_a_newer_format_is_declined() -> None:
    agent = Agent()
    for meta in ({"format": 1, "token": "t"}, {"format": 2}, {"format": "1"}):
        raw = msgspec.json.encode({**agent_document(), META_KEY: meta})
        assert typed({"agent": agent}, raw) is None
    assert typed({"agent": agent}, msgspec.json.encode({"agent": agent_document()["agent"]})) is not None  # no metadata: older files


@stateful
class Checked:
    text: str = attrs.field(validator=attrs.validators.min_len(1))


@stateful
class Notes(StateModule):
    checked: list[Checked] = state_field(factory=list)
    count: int = state_field(default=0, validator=attrs.validators.ge(0))


def test_a_validator_refusal_reports_through_the_full_path_with_its_path(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    (tmp_path / "s.json").write_bytes(msgspec.json.encode({**META, "notes": {"checked": [{"text": "ok"}, {"text": ""}], "count": 1}}))
    notes = Notes(count=7)
    with pytest.raises(StateLoadError) as caught:
        session.load("s", notes=notes)
    assert [p.path for p in caught.value.problems] == [("notes", "checked", 1)]  # the record its validator refused
    assert notes == Notes(count=7)
    (tmp_path / "s.json").write_bytes(msgspec.json.encode({**META, "notes": {"checked": [], "count": -1}}))
    with pytest.raises(StateLoadError) as caught:
        session.load("s", notes=notes)
    assert [p.path for p in caught.value.problems] == [("notes", "count")]


def test_the_depth_limit_is_exact_on_the_typed_path(tmp_path: Path) -> None:
    most = MAX_DEPTH - 2  # the document and the module's state are two levels
    blob = Blob()
    assert typed({"blob": blob}, msgspec.json.encode({**META, "blob": {"data": nested(most)}})) is not None
    assert blob.data == nested(most)
    too_deep = msgspec.json.encode({**META, "blob": {"data": nested(most + 1)}})
    assert typed({"blob": Blob()}, too_deep) is None
    (tmp_path / "deep.json").write_bytes(too_deep)
    with pytest.raises(DocumentError, match=f"nested deeper than {MAX_DEPTH} levels"):
        JSONSession(tmp_path).load("deep", blob=Blob())


@stateful
class Leaf:
    n: int = 0


@stateful
class Tail(StateModule):
    leaf: Leaf = state_field(factory=Leaf)


@stateful
class Link(StateModule):
    next: Optional[StateModule] = state_field(default=None)


def linked(links: int) -> Link:
    """``links`` modules in a chain, ending in a ``Tail``."""
    head = last = Link()
    for _ in range(links - 1):
        last.next = Link()
        last = last.next
    last.next = Tail()
    return head


@pytest.mark.parametrize(("links", "accepted"), [(MAX_DEPTH - 3, True), (MAX_DEPTH - 2, False)])
def test_the_typed_depth_pass_counts_a_record_at_the_bottom(links: int, accepted: bool) -> None:
    """Document, ``links`` modules, the tail module, then a record of scalars: ``links + 3`` levels."""
    state: Any = {"leaf": {"n": 1}}
    for _ in range(links):
        state = {"next": state}
    raw = msgspec.json.encode({**META, "head": state})
    assert (typed({"head": linked(links)}, raw) is not None) is accepted
    if accepted:
        assert full({"head": linked(links)}, raw) == {"head": LoadResult([], [])}
    else:
        with pytest.raises(DocumentError, match=f"nested deeper than {MAX_DEPTH} levels"):
            full({"head": linked(links)}, raw)


class _NoDepthCodecSession(JSONSession):
    """A session whose codec writes with plain orjson, which nests up to 254 levels."""

    codec: ClassVar[Codec] = Codec("json", ".json", orjson.dumps, JSON.loads, JSON.locate, fast=True)


def test_bytes_another_codec_wrote_are_depth_checked_when_loaded(tmp_path: Path) -> None:
    session = _NoDepthCodecSession(tmp_path)
    session.save("s", blob=Blob(data=nested(MAX_DEPTH)))  # this codec does not refuse it
    with pytest.raises(DocumentError, match=f"nested deeper than {MAX_DEPTH} levels"):
        session.load("s", blob=Blob())


def count_depth_passes(monkeypatch: pytest.MonkeyPatch, bounded_from: int = 0) -> Callable[[], int]:
    """Count the depth passes from now on; documents from ``bounded_from`` bytes try the bounded decoder first."""
    monkeypatch.setattr(SEAM, "bounded_from", bounded_from)
    before = SEAM.depth_passes
    return lambda: SEAM.depth_passes - before


def test_only_bytes_the_session_wrote_or_loaded_skip_the_depth_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passes = count_depth_passes(monkeypatch, bounded_from=SEAM.bounded_from)  # small documents: the pass
    session = JSONSession(tmp_path)
    session.save("s", blob=Blob(data=nested(3)))
    blob = Blob()
    session.load("s", blob=blob)  # its own bytes: checked when they were written
    session.load("s", blob=blob)  # loaded just now
    assert (blob.data, passes()) == (nested(3), 0)
    (tmp_path / "s.json").write_bytes(msgspec.json.encode({**META, "blob": {"data": nested(MAX_DEPTH - 1)}}))
    with pytest.raises(DocumentError, match=f"nested deeper than {MAX_DEPTH} levels"):
        session.load("s", blob=blob)  # another writer's bytes: checked
    assert passes() == 1
    assert blob.data == nested(3)


def lists_of_any(levels: int) -> Any:
    """The type of ``levels`` lists nested in one another, around a value typed ``Any``."""
    tp: Any = Any
    for _ in range(levels):
        tp = list[tp]
    return tp


# Document, module, the lists of the type, then ANY_LEVELS levels in the Any: exactly MAX_DEPTH.
AT_THE_LIMIT = MAX_DEPTH - 2 - ANY_LEVELS


@pytest.mark.parametrize("lists", [AT_THE_LIMIT, AT_THE_LIMIT + 1])
@pytest.mark.parametrize("in_any", [ANY_LEVELS - 1, ANY_LEVELS, ANY_LEVELS + 1])
def test_types_that_prove_the_limit_need_no_depth_pass(lists: int, in_any: int, monkeypatch: pytest.MonkeyPatch) -> None:
    cls = holder(lists_of_any(lists))
    passes = count_depth_passes(monkeypatch)
    raw = msgspec.json.encode({**META, "m": {"value": nested(lists + in_any)}})
    within = lists + in_any + 2 <= MAX_DEPTH
    assert (typed({"m": cls()}, raw) is not None) is within
    # The bounded decoder takes the document when the types prove the limit and
    # the Any holds at most ANY_LEVELS; otherwise the depth pass decides, exactly.
    bounded_took = lists == AT_THE_LIMIT and in_any <= ANY_LEVELS
    assert passes() == (0 if bounded_took else 1)
    if within:
        assert full({"m": cls()}, raw) == {"m": LoadResult([], [])}
    else:
        with pytest.raises(DocumentError, match=f"nested deeper than {MAX_DEPTH} levels"):
            full({"m": cls()}, raw)


def test_an_any_nested_past_the_bounded_decoder_takes_the_depth_pass_from_then_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = holder(dict[str, Any])
    passes = count_depth_passes(monkeypatch)
    shallow = msgspec.json.encode({**META, "m": {"value": {"a": nested(ANY_LEVELS - 1)}}})
    deep = msgspec.json.encode({**META, "m": {"value": {"a": nested(ANY_LEVELS + 5)}}})
    (tmp_path / "s.json").write_bytes(shallow)
    module: Any = cls()
    JSONSession(tmp_path).load("s", m=module)  # another writer's bytes, shallow: no pass
    assert (module.value, passes()) == ({"a": nested(ANY_LEVELS - 1)}, 0)
    (tmp_path / "s.json").write_bytes(deep)
    JSONSession(tmp_path).load("s", m=module)  # typed, with the pass (the bounded decoder refused)
    assert (module.value, passes()) == ({"a": nested(ANY_LEVELS + 5)}, 1)
    (tmp_path / "s.json").write_bytes(shallow)
    JSONSession(tmp_path).load("s", m=module)  # this shape held deep data: straight to the pass
    assert (module.value, passes()) == ({"a": nested(ANY_LEVELS - 1)}, 2)


def test_small_documents_take_the_depth_pass_without_making_the_bounded_decoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module: Any = holder(dict[str, Any])()
    raw = msgspec.json.encode({**META, "m": {"value": {"a": [1]}}})
    passes = count_depth_passes(monkeypatch, bounded_from=len(raw) + 1)
    (tmp_path / "s.json").write_bytes(raw)
    JSONSession(tmp_path).load("s", m=module)
    typed_doc = typed_document({"m": module}, META_KEY)
    assert typed_doc is not None
    assert (module.value, passes(), typed_doc.bounded_made) == ({"a": [1]}, 1, False)
    monkeypatch.setattr(SEAM, "bounded_from", len(raw))
    JSONSession(tmp_path).load("s", m=module)
    assert (passes(), typed_doc.bounded_made, typed_doc.bounded is not None) == (1, True, True)


def test_a_large_document_the_session_wrote_is_proved_by_the_bounded_decoder_before_any_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes = count_depth_passes(monkeypatch)  # every document is large enough for the bounded decoder
    session = JSONSession(tmp_path)
    module: Any = holder(dict[str, Any])(value={"a": nested(ANY_LEVELS - 1)})
    session.save("s", m=module)
    session.load("s", m=module)  # its own bytes: the bounded decoder takes them (no compare, no pass)
    typed_doc = typed_document({"m": module}, META_KEY)
    assert typed_doc is not None
    assert (module.value, passes(), typed_doc.bounded_made, typed_doc.deep) == ({"a": nested(ANY_LEVELS - 1)}, 0, True, False)
    module.value = {"a": nested(ANY_LEVELS + 5)}
    session.save("s", m=module)
    session.load("s", m=module)  # the bounded decoder refuses; the compare finds its own bytes: no pass
    assert (module.value, passes(), typed_doc.deep) == ({"a": nested(ANY_LEVELS + 5)}, 0, True)
    other: Any = holder(dict[str, Any])()
    JSONSession(tmp_path).load("s", m=other)  # a new object has seen no bytes: the pass
    assert (other.value, passes()) == ({"a": nested(ANY_LEVELS + 5)}, 1)
    (tmp_path / "s.json").write_bytes(msgspec.json.encode({**META, "m": {"value": {"a": nested(MAX_DEPTH - 2)}}}))
    with pytest.raises(DocumentError, match=f"nested deeper than {MAX_DEPTH} levels"):
        session.load("s", m=module)  # another writer's bytes, too deep: refused, not taken for its own
    assert (module.value, passes()) == ({"a": nested(ANY_LEVELS + 5)}, 2)


@stateful
class Custom(StateModule):
    """A module with its own load_state_dict, held by a typed one."""

    seen: list[Any] = state_field(factory=list)

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> LoadResult:
        self.seen.append(state_dict)
        return LoadResult([], [])


@stateful
class Host(StateModule):
    title: str = state_field(default="")
    custom: Custom = state_field(factory=Custom)
    token: str = state_field(default="", secret=True)
    child: Optional[Memory] = state_field(default=None)


def test_keys_without_a_mirror_load_through_the_loader_beside_typed_ones(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.use_secret_key("k" * 32)
    host = Host(title="t", token="s3cret")
    host.child = Memory()
    session.save("h", host=host)
    loaded = Host()
    loaded.child = Memory()
    session.load("h", host=loaded)
    assert (loaded.title, loaded.token, loaded.custom.seen) == ("t", "s3cret", [{"seen": []}])
    assert loaded.child == Memory()


def test_a_byte_order_mark_and_a_failed_second_module_leave_everything_as_it_was(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    good = msgspec.json.encode({**agent_document(), "notes": {"checked": [{"text": ""}], "count": 0}})
    (tmp_path / "s.json").write_bytes(b"\xef\xbb\xbf" + good)
    agent, notes = Agent(name="before"), Notes()
    with pytest.raises(StateLoadError):
        session.load("s", agent=agent, notes=notes)
    assert agent == Agent(name="before") and notes == Notes()
    (tmp_path / "s.json").write_bytes(b"\xef\xbb\xbf" + msgspec.json.encode(agent_document()))
    session.load("s", agent=agent)
    assert agent.name == "Friday"


@pytest.mark.parametrize(
    ("tp", "data"),
    [
        (str, "x"),
        (float, 2),
        (Optional[int], None),
        (list[dict[str, Any]], [{"a": [1, {"b": None}]}]),
        (Msg, {"role": "r", "content": [{"type": "text"}], "metadata": {"k": 1.5}}),
        (list[Msg], [{"role": "r", "content": "c", "metadata": None}]),
        (dict[str, Stamp], {"s": {"at": "noon", "tags": []}}),
        (Optional[Stamp], {"at": "noon", "tags": ["t"]}),
    ],
)
def test_mirrored_types_take_the_typed_path(tp: Any, data: Any) -> None:
    cls = holder(tp)
    assert assert_agree(cls, data, strict=True)
    assert assert_agree(cls, data, strict=False)


@stateful
class Counter(StateModule):
    value: int = state_field(default=0)


@pytest.mark.parametrize(
    ("other", "reason"),
    [
        (b"[" * 250 + b"1" + b"]" * 250, f"nested deeper than {MAX_DEPTH} levels"),
        (b'"\xff"', "not UTF-8"),
        (b"1e400", "invalid JSON"),
    ],
)
def test_a_module_not_asked_for_is_still_checked_as_the_full_path_does(tmp_path: Path, other: bytes, reason: str) -> None:
    (tmp_path / "s.json").write_bytes(b'{"m": {"value": 5}, "other": ' + other + b"}")
    counter = Counter()
    with pytest.raises(DocumentError, match=reason):
        JSONSession(tmp_path).load("s", m=counter)
    assert counter.value == 0


def test_null_metadata_is_refused_as_the_full_path_does(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_bytes(b'{"__statekit__": null, "m": {"value": 5}}')
    with pytest.raises(DocumentError, match="__statekit__ should be an object holding the format, got null"):
        JSONSession(tmp_path).load("s", m=Counter())


@attrs.define
class KeywordFirst:
    a: int = attrs.field(kw_only=True)
    b: int


@attrs.define
class Derived:
    a: int
    b: int = attrs.field(init=False, default=5)


@stateful
class Odd(StateModule):
    keyword: KeywordFirst = state_field(factory=lambda: KeywordFirst(a=1, b=2))
    derived: Derived = state_field(factory=lambda: Derived(1))


def test_keyword_only_fields_before_positional_ones_and_init_false_fields_round_trip(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    saved = Odd(keyword=KeywordFirst(a=3, b=4), derived=Derived(7))
    assert saved.state_dict() == {"keyword": {"a": 3, "b": 4}, "derived": {"a": 7}}  # as cattrs writes them
    session.save("s", odd=saved)
    raw = (tmp_path / "s.json").read_bytes()
    assert typed({"odd": Odd()}, raw) is not None
    loaded = Odd()
    session.load("s", odd=loaded)
    assert loaded == saved
    Odd().load_state_dict(saved.state_dict())


@attrs.define
class Inner:
    a: int = 1


@attr.s
class Untyped:
    x = attr.ib()  # type: ignore[var-annotated]


@stateful
class HoldsUntyped(StateModule):
    untyped: Untyped = state_field(factory=lambda: Untyped(Inner()))


def test_an_untyped_attr_ib_is_dumped_by_the_class_of_its_value() -> None:
    assert HoldsUntyped().state_dict() == {"untyped": {"x": {"a": 1}}}
    assert HoldsUntyped(Untyped([1, 2])).state_dict() == {"untyped": {"x": [1, 2]}}


def test_a_load_of_fewer_modules_than_last_seen_skips_the_typed_decode(tmp_path: Path) -> None:
    before = SEAM.typed_decodes

    def calls() -> int:
        return SEAM.typed_decodes - before

    session = JSONSession(tmp_path)
    session.save("s", agent=Agent(name="a"), notes=Notes(count=2))
    agent = Agent()
    session.load("s", agent=agent)  # the document holds notes too: the typed decode would fail on them
    assert (agent.name, calls()) == ("a", 0)
    agent, notes = Agent(), Notes()
    session.load("s", agent=agent, notes=notes)
    assert (agent.name, notes.count, calls()) == ("a", 2, 1)
    fresh = JSONSession(tmp_path)  # knows nothing yet: tries once, then remembers what the file holds
    fresh.load("s", agent=Agent())
    fresh.load("s", agent=Agent())
    assert calls() == 2


PARSED: list[str] = []


def _parse(text: str) -> str:
    PARSED.append(text)
    return text


@stateful
class Coded:
    text: str = state_field(from_json=_parse, to_json=str)


@stateful
class CodedHolder(StateModule):
    coded: Coded = state_field(factory=lambda: Coded("a"))
    count: int = state_field(default=0, validator=attrs.validators.ge(0))


def test_a_from_json_deep_in_a_field_runs_once_when_a_later_validator_refuses(tmp_path: Path) -> None:
    """A record holding a from_json is left to the full path whole: the typed
    path would run the codec, decline at the validator, and the full path would run it again."""
    (tmp_path / "s.json").write_bytes(msgspec.json.encode({**META, "h": {"coded": {"text": "b"}, "count": -1}}))
    PARSED.clear()
    with pytest.raises(StateLoadError) as caught:
        JSONSession(tmp_path).load("s", h=CodedHolder())
    assert [p.path for p in caught.value.problems] == [("h", "count")]
    assert PARSED == ["b"]
