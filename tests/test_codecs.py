"""Codecs: plain data <-> bytes, errors with positions, and safety of the YAML loader."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import examples
from statekit.codecs import JSON, JSON_COMPACT, YAML, Codec, with_document_positions
from statekit.codecs import yaml as yaml_codec
from statekit.errors import DocumentError, Problem, StateDumpError, StateLoadError

CODECS = [pytest.param(JSON, id="json"), pytest.param(JSON_COMPACT, id="json-compact"), pytest.param(YAML, id="yaml")]

texts = st.text(st.characters(blacklist_categories=["Cs"]))
json_data = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("codec", CODECS)
@given(data=json_data)
@settings(max_examples=examples(200), deadline=None)
def test_round_trip_is_exact_and_stable(codec: Codec, data: Any) -> None:
    raw = codec.dumps(data)
    assert codec.loads(raw, None) == data
    assert codec.dumps(codec.loads(raw, None)) == raw


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"a": [1, "lone \ud800"]}, ("a", 1), "lone surrogate"),
        ({"a": {1: "x"}}, ("a",), "keys must be strings"),
        ({"a": {"k\udfff": "x"}}, ("a",), "lone surrogate"),
        ({"a": [{"b": object()}]}, ("a", 0, "b"), "object is not JSON data"),
        ({"when": __import__("datetime").date(2025, 1, 1)}, ("when",), "date is not JSON data"),
    ],
)
def test_non_json_data_is_a_dump_error_naming_the_path(codec: Codec, data: Any, path: tuple[Any, ...], message: str) -> None:
    with pytest.raises(StateDumpError, match=message) as caught:
        codec.dumps(data)
    assert caught.value.problems[0].path == path


def test_json_refuses_integers_beyond_64_bits() -> None:
    with pytest.raises(StateDumpError, match=r"orjson, statekit's JSON writer, holds integers from -2\*\*63 to 2\*\*64-1 \(JSON itself sets no limit\)") as caught:
        JSON.dumps({"n": [2**64]})
    assert caught.value.problems[0].path == ("n", 0)


def test_json_is_pretty_utf8_with_a_final_newline() -> None:
    assert JSON.dumps({"b": 1, "a": ["é😀"]}) == '{\n  "b": 1,\n  "a": [\n    "é😀"\n  ]\n}\n'.encode()
    assert JSON_COMPACT.dumps({"b": 1, "a": ["é"]}) == '{"b":1,"a":["é"]}'.encode()


@pytest.mark.parametrize(
    ("raw", "line", "column", "message"),
    [
        (b'{\n  "a": 1,\n  "b": [1, 2,]\n}', 3, 13, "trailing comma"),
        (b'{\n  "a": "\xff"\n}', 2, 9, "not UTF-8"),
        ('{\n  "é😀": "'.encode() + b'\xff"\n}', 2, 10, "not UTF-8"),  # columns count characters, not bytes
        (b"", 1, 1, "empty"),
        (b'{"a": NaN}', 1, 7, "NaN at a: JSON has no NaN or Infinity"),
    ],
)
def test_json_syntax_errors_name_line_and_column(raw: bytes, line: int, column: int, message: str) -> None:
    with pytest.raises(DocumentError, match=message) as caught:
        JSON.loads(raw, "f.json")
    assert (caught.value.source, caught.value.line, caught.value.column) == ("f.json", line, column)
    assert str(caught.value).startswith(f"f.json:{line}:{column}: invalid JSON")


def test_json_accepts_a_byte_order_mark() -> None:
    assert JSON.loads(b'\xef\xbb\xbf{"a": 1}', None) == {"a": 1}


# -- positions: JSON ------------------------------------------------------------------------

SAMPLE = {
    "agent": {
        "memory": {"content": [{"role": "user", "x": [1, 2]}, {"ro\"le": "a\\b", "content": "{[,:]} \"quoted\""}]},
        "name": "F",
    },
    "z": 1,
}


@pytest.mark.parametrize("codec", CODECS)
def test_locate_points_at_keys_items_and_nearest_ancestors(codec: Codec) -> None:
    raw = codec.dumps(SAMPLE)
    lines = raw.decode().splitlines() if codec is not JSON_COMPACT else [raw.decode()]
    found = codec.locate(raw, [("agent", "memory", "content", 1, 'ro"le'), ("agent", "nope", "x"), ("z",), ()])
    assert set(found) == {("agent", "memory", "content", 1, 'ro"le'), ("agent", "nope", "x"), ("z",), ()}
    line, column = found["agent", "memory", "content", 1, 'ro"le']
    assert lines[line - 1][column - 1 :].lstrip('"').startswith("ro")
    line, column = found["agent", "nope", "x"]  # missing: at the "agent" key
    assert lines[line - 1][column - 1 :].lstrip('"').startswith("agent")
    assert found[()] == (1, 1)


@given(data=json_data)
@settings(max_examples=examples(200), deadline=None)
def test_json_locate_finds_every_path(data: Any) -> None:
    raw = JSON.dumps(data)
    text = raw.decode()
    paths = list(_paths(data, ()))
    found = JSON.locate(raw, paths)
    lines = text.split("\n")
    for path in paths:
        line, column = found[path]
        at = lines[line - 1][column - 1 :]
        expected = json.dumps(path[-1], ensure_ascii=False) if path and isinstance(path[-1], str) else None
        if expected is not None:
            assert at.startswith(expected), (path, at)
        else:
            assert at[:1] not in ("", " ", ",", ":"), (path, at)


def _paths(data: Any, path: tuple[Any, ...]) -> Any:
    yield path
    children = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in children:
        yield from _paths(value, (*path, key))


def test_locating_a_big_document_is_one_pass() -> None:
    big = {"agent": {"memory": {"content": [{"role": "user", "content": "x " * 100} for _ in range(50_000)]}}}
    raw = JSON.dumps(big)
    started = time.perf_counter()
    found = JSON.locate(raw, [("agent", "memory", "content", 49_999, "role"), ("agent", "memory", "content", 3, "x")])
    assert found["agent", "memory", "content", 49_999, "role"][0] == raw.count(b"\n", 0, raw.rfind(b'"role"')) + 1
    assert time.perf_counter() - started < 10  # a generous bound: it runs only after a failed load


def test_with_document_positions_places_problems() -> None:
    raw = YAML.dumps({"agent": {"turns": [1, 2]}})
    error = StateLoadError([Problem(("agent", "turns"), "expected int"), Problem(("agent", "missing"), "required")])
    placed = with_document_positions(error, raw, "a.yaml", YAML)
    assert [(p.source, p.line, p.column) for p in placed.problems] == [("a.yaml", 2, 3), ("a.yaml", 1, 1)]
    assert "a.yaml:2:3: agent.turns: expected int" in str(placed)


# -- YAML safety ------------------------------------------------------------------------------


def test_yaml_python_tags_are_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    raw = f'!!python/object/apply:pathlib.Path.touch [!!python/object/apply:pathlib.Path ["{marker}"]]'.encode()
    with pytest.raises(DocumentError, match="could not determine a constructor"):
        YAML.loads(raw, "evil.yaml")
    assert not marker.exists()


def test_yaml_alias_bombs_are_refused_quickly() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    started = time.perf_counter()
    with pytest.raises(DocumentError, match=r"bomb\.yaml:1:5: invalid YAML: aliases are not allowed: this anchored node is reused"):
        YAML.loads("\n".join(lines).encode(), "bomb.yaml")
    assert time.perf_counter() - started < 1


def test_yaml_merge_keys_are_refused_and_unused_anchors_change_nothing() -> None:
    with pytest.raises(DocumentError, match=r"a merge key \(<<\) is YAML only") as caught:
        YAML.loads(b"agent:\n  name: x\n  <<: {title: merged}\n", "m.yaml")
    assert (caught.value.line, caught.value.column) == (3, 3)
    assert YAML.loads(b'agent: &a\n  name: &n x\n  "<<": 1\n', None) == {"agent": {"name": "x", "<<": 1}}


@pytest.mark.parametrize("tag", ["!!binary aGk=", "!!timestamp 2025-01-01", "!!set {a: null}", "!!omap [a: 1]", "!!pairs [a: 1]"])
def test_yaml_tags_json_cannot_hold_are_refused(tag: str) -> None:
    with pytest.raises(DocumentError, match=r"is not JSON data") as caught:
        YAML.loads(f"a: 1\nb: {tag}\n".encode(), "t.yaml")
    assert (caught.value.line, caught.value.column) == (2, 4)


def test_yaml_plain_dates_stay_text() -> None:
    assert YAML.loads(b"when: 2025-08-15 09:50:59.264\nday: 2025-08-15\n", None) == {
        "when": "2025-08-15 09:50:59.264",
        "day": "2025-08-15",
    }


@pytest.mark.parametrize(
    ("plain", "value"),
    [
        # YAML 1.1 read these as booleans, base-60 numbers and 1000: 1.2 (editors, the schema) as text
        ("no", "no"), ("Yes", "Yes"), ("on", "on"), ("OFF", "OFF"), ("10:30", "10:30"), ("1:30:00.5", "1:30:00.5"),
        ("1_000", "1_000"), ("0b101", "0b101"), ("=", "="),
        # and these as text where 1.2 reads numbers
        ("0o17", 15), ("1e3", 1000.0), ("+.5", 0.5), ("2.5E-3", 0.0025),
        # the same in both
        ("017", 17), ("0x1F", 31), ("-12", -12), ("1.", 1.0), ("-.INF", -math.inf), ("TRUE", True), ("false", False),
        ("~", None), ("Null", None), ("", None), ("09:50", "09:50"),
    ],
)
def test_yaml_reads_plain_scalars_as_the_1_2_core_schema_does(plain: str, value: Any) -> None:
    loaded = YAML.loads(f"k: {plain}\n".encode(), None)["k"]
    assert (loaded, type(loaded)) == (value, type(value))


@pytest.mark.parametrize(
    ("scalar", "column", "message"),
    [
        ("!!float abc", 6, r"the tag !!float needs a number \(like 1.5, 1e-3 or .inf\), not 'abc'"),
        ("!!float _", 6, r"the tag !!float needs a number .*, not '_'"),
        ("!!float " + "1:" * 200 + "1.5", 6, r"the tag !!float needs a number .*, not '1:1:1:.*\.\.\.'"),
        ("!!int abc", 6, r"the tag !!int needs an integer \(like 42, 0x2a or 0o52\), not 'abc'"),
        ("!!int", 6, r"the tag !!int needs an integer .*, not ''"),
        ("!!int +", 6, r"the tag !!int needs an integer .*, not '\+'"),
        ("!!int 10:30", 6, r"the tag !!int needs an integer .*, not '10:30'"),
        ("!!bool maybe", 6, r"the tag !!bool needs true or false, not 'maybe'"),
        ("!!bool", 6, r"the tag !!bool needs true or false, not ''"),
        ("!!bool yes", 6, r"the tag !!bool needs true or false, not 'yes'"),
        ("!!null abc", 6, r"the tag !!null needs null, not 'abc'"),
        ("!!int [1]", 6, r"expected a scalar node, but found sequence"),
    ],
)
def test_yaml_a_tagged_scalar_that_does_not_fit_its_tag_names_file_line_and_column(scalar: str, column: int, message: str) -> None:
    with pytest.raises(DocumentError, match=f"invalid YAML: {message}") as caught:
        YAML.loads(f"a: 1\nb:   {scalar}\n".encode(), "t.yaml")
    assert (caught.value.source, caught.value.line, caught.value.column) == ("t.yaml", 2, column)


def test_yaml_tagged_scalars_that_fit_their_tag_are_read() -> None:
    raw = b"a: !!int 0x10\nb: !!float 3\nc: !!bool True\nd: !!null\ne: !!str 5\nf: !!float .nan\n"
    data = YAML.loads(raw, None)
    assert math.isnan(data.pop("f"))
    assert data == {"a": 16, "b": 3.0, "c": True, "d": None, "e": "5"}


@pytest.mark.parametrize(
    "text", ["no", "Yes", "on", "10:30", "1:30:00.5", "1_000", "0b101", "=", "0o17", "1e3", "+.5", "017", "0x1F", "1.", "TRUE", "~", ""]
)
def test_yaml_text_that_any_reader_could_take_for_a_number_or_boolean_is_quoted(text: str) -> None:
    """Written so that YAML 1.1 readers (PyYAML's safe_load here) and 1.2 readers both read text back."""
    raw = YAML.dumps({"k": text})
    assert raw == b"k: '" + text.encode() + b"'\n"
    assert YAML.loads(raw, None) == yaml.safe_load(raw) == {"k": text}


@pytest.mark.parametrize(
    ("raw", "line", "column", "message"),
    [
        (b"a: [1, 2\nb: 3\n", 1, 4, "a '\\[' list that is never closed"),
        (b"a: 1\n  b: 2\n", 2, 3, "bad indentation: this line starts in column 3, line 1 in column 1"),
        (b"a: 1\n---\nb: 2\n", 2, 1, "expected a single document"),
        (b"a: 'open\n", 1, 4, "a quoted string that is never closed"),
        (b"a:\n\tb: 1\n", 2, 1, "a tab character; YAML indents with spaces"),
        # A key one space short is only noticed on the next line, where a ':'
        # cannot be: the report goes to the line with the mistake.
        (b"agent:\n  name: Friday\n sys_prompt: hi\n  memory: {}\n", 3, 2, "bad indentation: this line starts in column 2"),
        (b"agent:\n name: Friday\n  sys_prompt: hi\n  memory: {}\n", 2, 2, "bad indentation: this line starts in column 2"),
        (b"agent:\n   name: Friday\n  sys_prompt: hi\n  memory: {}\n", 2, 4, "bad indentation: this line starts in column 4"),
    ],
)
def test_yaml_syntax_errors_name_file_line_and_column(raw: bytes, line: int, column: int, message: str) -> None:
    with pytest.raises(DocumentError, match=message) as caught:
        YAML.loads(raw, "s.yaml")
    assert (caught.value.source, caught.value.line, caught.value.column) == ("s.yaml", line, column)


@pytest.mark.parametrize(
    ("raw", "line", "column"),
    [
        (b"a: 1\nb: \xff\n", 2, 4),
        ("a: 'é😀".encode() + b"\xff'\n", 1, 7),  # columns count characters, not bytes
        ("a: 'é😀\x07'\n".encode(), 1, 7),
        (b"a: 1\r\nb: \x00\r\n", 2, 4),
        (b"a: 1\rb: \x07\r", 2, 4),  # a lone CR ends a line, for libyaml as for editors
        (b"\xef\xbb\xbfa: \x07\n", 1, 4),  # after a byte order mark
        ("a: 1\nb: é\x1b\n".encode("utf-16"), 2, 5),
    ],
)
def test_yaml_bytes_it_cannot_read_name_line_and_column(raw: bytes, line: int, column: int) -> None:
    with pytest.raises(DocumentError, match="invalid YAML") as caught:
        YAML.loads(raw, "u.yaml")
    assert (caught.value.source, caught.value.line, caught.value.column) == ("u.yaml", line, column)


def test_yaml_special_floats_round_trip() -> None:
    data = YAML.loads(YAML.dumps({"nan": math.nan, "inf": math.inf, "neg": -math.inf}), None)
    assert math.isnan(data["nan"]) and data["inf"] == math.inf and data["neg"] == -math.inf


def test_the_fast_libyaml_classes_are_used() -> None:
    assert yaml_codec.WITH_LIBYAML, "PyYAML was built without libyaml: YAML sessions are 4-6x slower"


PURE_YAML_CHILD = """
import yaml
del yaml.CSafeDumper, yaml.CSafeLoader  # as on a PyYAML built without libyaml
from statekit.codecs import yaml as codec
from statekit.testing import TRICKY_TEXTS
assert not codec.WITH_LIBYAML
for text in TRICKY_TEXTS + ("a\\nb", "é😀\\n空"):
    data = {"k": text, text: [text]}
    raw = codec.dumps(data)
    assert codec.loads(raw) == data and codec.dumps(codec.loads(raw)) == raw, (text, raw)
try:
    codec.loads(b"a: &x [1]\\nb: *x")
except Exception as err:
    print(type(err).__name__)
"""


def test_the_pure_python_yaml_fallback_keeps_every_promise() -> None:
    out = subprocess.run([sys.executable, "-c", PURE_YAML_CHILD], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "DocumentError", out.stderr
