"""YAML a person can read and edit (issue 4): the style statekit writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import yaml

from statekit.codecs import YAML
from statekit.codecs._yaml_schema import CORE
from statekit.session import YAMLSession
from statekit.testing import TRICKY_TEXTS, Chat, Message
from strategies import examples


def test_a_session_file_reads_like_hand_written_yaml(tmp_path: Path) -> None:
    chat = Chat(
        name="Friday 😀",
        messages=[
            Message("user", "Hello, agent!"),
            Message("assistant", "Two lines:\nfirst\nsecond\n"),
            Message("assistant", [{"type": "tool_use", "id": "call-1", "input": {"query": "café", "top_k": 3}}]),
            Message("user", ""),
        ],
    )
    session = YAMLSession(tmp_path)
    session.save("s", chat=chat)
    assert session.session_path("s").read_text(encoding="utf-8") == (
        "__statekit__:\n"
        "  format: 1\n"
        "chat:\n"
        "  name: Friday 😀\n"
        "  messages:\n"
        "  - role: user\n"
        "    content: Hello, agent!\n"
        "  - role: assistant\n"
        "    content: |\n"
        "      Two lines:\n"
        "      first\n"
        "      second\n"
        "  - role: assistant\n"
        "    content:\n"
        "    - type: tool_use\n"
        "      id: call-1\n"
        "      input:\n"
        "        query: café\n"
        "        top_k: 3\n"
        "  - role: user\n"
        "    content: ''\n"
    )


def test_keys_keep_their_order() -> None:
    assert YAML.dumps({"zebra": 1, "apple": 2, "mango": {"z": 1, "a": 2}}) == b"zebra: 1\napple: 2\nmango:\n  z: 1\n  a: 2\n"


def test_shared_containers_are_written_out_without_anchors() -> None:
    shared = ["a", "b"]
    raw = YAML.dumps({"one": shared, "two": shared})
    assert raw == b"one:\n- a\n- b\ntwo:\n- a\n- b\n"
    assert b"&" not in raw and b"*" not in raw


def test_no_tags_are_written() -> None:
    raw = YAML.dumps({"n": None, "b": True, "i": 10**30, "f": 1.5, "s": "123", "t": "yes", "l": (1, 2)})
    assert b"!!" not in raw
    assert raw == b"n: null\nb: true\ni: 1000000000000000000000000000000\nf: 1.5\ns: '123'\nt: 'yes'\nl:\n- 1\n- 2\n"


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("a\nb", "k: |-\n  a\n  b\n"),
        ("a\nb\n", "k: |\n  a\n  b\n"),
        ("  indented\nnext", "k: |2-\n    indented\n  next\n"),
        ("é😀\n空", "k: |-\n  é😀\n  空\n"),
        ("trailing space \nx", 'k: "trailing space \\nx"\n'),
        ("tab\there\nx", 'k: "tab\\there\\nx"\n'),
        ("cr\r\nlf", 'k: "cr\\r\\nlf"\n'),
    ],
)
def test_multi_line_text_is_a_literal_block_where_yaml_allows(text: str, written: str) -> None:
    assert YAML.dumps({"k": text}).decode("utf-8") == written
    assert YAML.loads(written.encode("utf-8"), None) == {"k": text}


def test_long_lines_are_never_folded() -> None:
    text = "word " * 100
    assert YAML.dumps({"k": text.strip()}).count(b"\n") == 1


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_tricky_text_survives_save_load_save(text: str) -> None:
    raw = YAML.dumps({"k": text, text: [text]})
    assert YAML.loads(raw, None) == {"k": text, text: [text]}
    assert YAML.dumps(YAML.loads(raw, None)) == raw


def test_non_ascii_is_written_as_itself() -> None:
    raw = YAML.dumps({"k": "é 😀 👩‍👩‍👧 空 \U0010fffd \ue000"})
    assert b"\\u" not in raw and b"\\U" not in raw
    assert raw.decode("utf-8") == "k: é 😀 👩‍👩‍👧 空 \U0010fffd \ue000\n"


texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
multi_line = st.lists(texts, min_size=2, max_size=4).map("\n".join)


@given(st.dictionaries(texts, texts | multi_line | st.lists(multi_line, max_size=3), max_size=5))
@settings(max_examples=examples(300), deadline=None)
def test_save_load_save_is_byte_identical(data: dict[str, Any]) -> None:
    raw = YAML.dumps(data)
    assert YAML.loads(raw, None) == data
    assert YAML.dumps(YAML.loads(raw, None)) == raw


# Text a YAML 1.1 or 1.2 reader could take for a number, a boolean or null.
scalar_like = st.from_regex(r"[-+]?[0-9.:_xobeEaf]{0,8}|[yYnNoOtTfF][a-zA-Z]{0,4}|[~=<.]{1,3}[a-zA-Z]{0,3}", fullmatch=True)


@given(st.dictionaries(scalar_like, scalar_like, max_size=5))
@settings(max_examples=examples(500), deadline=None)
def test_text_that_looks_like_a_number_is_written_as_text_for_every_reader(data: dict[str, str]) -> None:
    raw = YAML.dumps(data)
    assert YAML.loads(raw, None) == data
    assert YAML.dumps(YAML.loads(raw, None)) == raw
    assert yaml.safe_load(raw) == data  # a YAML 1.1 reader
    plain = [event.value for event in yaml.parse(raw) if isinstance(event, yaml.ScalarEvent) and event.style is None]
    assert not [text for text in plain for _, pattern, _ in CORE if pattern.match(text)]  # what YAML 1.2 reads as text


def test_a_hand_edit_is_loaded(tmp_path: Path) -> None:
    session = YAMLSession(tmp_path)
    session.save("s", chat=Chat(messages=[Message("assistant", "")]))
    path = session.session_path("s")
    edited = path.read_text().replace("content: ''", "content: |\n      Fixed by hand,\n      on two lines.")
    path.write_text("# a comment is fine\n" + edited)
    chat = Chat()
    session.load("s", chat=chat)
    assert chat.messages == [Message("assistant", "Fixed by hand,\non two lines.\n")]
