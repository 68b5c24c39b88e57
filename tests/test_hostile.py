"""Hostile and careless input: limits, odd files, symlinks, duplicate keys.

Each test feeds statekit something an attacker or a hurried person could
produce and checks that a clear :class:`~statekit.errors.StatekitError` comes
out, naming what and where, and that nothing was changed.
"""

from __future__ import annotations

import hashlib
import os
import runpy
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import redis
from fuzz import Agent as FuzzAgent
from fuzz import sample_agent

from statekit import StateModule, state_field, stateful
from statekit._limits import MAX_DEPTH, path_too_deep, shallow_indented, too_deep
from statekit.state.config import from_config
from statekit.codecs import JSON, YAML, Codec
from statekit.cli import main as cli_main
from statekit.errors import DocumentError, SessionError, StateDumpError, StatekitError, StateLoadError
from statekit.session import JSONSession, SessionBase, YAMLSession
from statekit.session._files import FileSession
from statekit.session._leftovers import temp_path
from statekit.session._safe_files import digest_regular
from statekit.session.redis import RedisSession
from statekit.session.sqlite import SQLiteSession
from statekit.testing import RedisServer, SessionFactory


def nested(levels: int, leaf: Any = 1) -> Any:
    """``levels`` lists inside one another around ``leaf``."""
    for _ in range(levels):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize("levels", [1, MAX_DEPTH - 1, MAX_DEPTH])
def test_data_within_the_depth_limit_passes(levels: int) -> None:
    assert not too_deep(nested(levels))
    assert path_too_deep(nested(levels)) is None


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 254, 255, 5_000])
def test_data_past_the_depth_limit_is_found_with_its_path(levels: int) -> None:
    assert too_deep(nested(levels))
    assert path_too_deep(nested(levels)) == (0,) * MAX_DEPTH


def test_depth_check_walks_data_orjson_cannot_write() -> None:
    deep = {"big": 1 << 70, "deep": nested(MAX_DEPTH)}
    assert too_deep(deep)
    assert path_too_deep(deep) == ("deep", *(0,) * (MAX_DEPTH - 1))
    assert not too_deep({"big": 1 << 70, "shallow": nested(3)})


PAD = "x" * 70_000  # past the size below which brackets are simply counted


@pytest.mark.parametrize("leaf", [1, [], {}, [1], {"a": 1}])
@pytest.mark.parametrize("levels", [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
def test_pretty_json_depth_check_by_indentation_agrees_with_the_walk(levels: int, leaf: Any) -> None:
    data = {"pad": PAD, "deep": nested(levels - 1, leaf)}  # levels containers, and the leaf if it is one
    raw = orjson.dumps(data, option=orjson.OPT_INDENT_2)
    if shallow_indented(raw):
        assert not too_deep(data)
    if too_deep(data):
        with pytest.raises(StateDumpError, match="MAX_DEPTH"):
            JSON.dumps(data)
    else:
        assert orjson.loads(JSON.dumps(data)) == data


def test_pretty_json_depth_check_spares_the_walk_of_shallow_documents() -> None:
    def pretty(lists: int) -> bytes:
        return orjson.dumps({"pad": PAD, "deep": nested(lists)}, option=orjson.OPT_INDENT_2)

    assert shallow_indented(pretty(MAX_DEPTH - 2))  # MAX_DEPTH - 1 levels: no second encoding
    assert not shallow_indented(pretty(MAX_DEPTH - 1))  # at the limit: the walk decides (it passes)
    assert not shallow_indented(pretty(MAX_DEPTH))


# --- files: odd file types, symlinks, temporary files -------------------------------------------


@stateful
class Note(StateModule):
    """A small module to save and load."""

    text: str = state_field(default="")
    count: int = state_field(default=0)


@stateful
class Holder(StateModule):
    """A config holding a note."""

    note: Note = state_field(factory=Note)


FILE_SESSIONS = [JSONSession, YAMLSession]


def _make_fifo(path: Path) -> None:
    os.mkfifo(path)


def _make_socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


def _make_folder(path: Path) -> None:
    path.mkdir()


def _make_device(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null


ODD_FILES = [
    pytest.param(_make_fifo, "a FIFO", id="fifo"),
    pytest.param(_make_socket, "a socket", id="socket"),
    pytest.param(_make_folder, "a folder", id="folder"),
    pytest.param(
        _make_device,
        "a character device",
        id="device",
        marks=pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root"),
    ),
]


@pytest.mark.parametrize("kind", FILE_SESSIONS)
@pytest.mark.parametrize(("make", "what"), ODD_FILES)
def test_a_session_path_that_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, kind: type[FileSession], make: Callable[[Path], None], what: str
) -> None:
    session = kind(tmp_path)
    path = session.session_path("s1")
    make(path)
    note = Note(text="kept")
    for call in (
        lambda: session.load("s1", note=note),
        lambda: session.exists("s1"),
        lambda: session.save("s1", note=Note(text="new")),
        lambda: session.delete("s1"),
        lambda: session.read_document("s1"),
    ):
        started = time.monotonic()
        with pytest.raises(SessionError, match=f"is {what}\\b.*, not a session file"):
            call()
        assert time.monotonic() - started < 5  # refused, not blocked
    assert note.text == "kept"
    assert stat.S_IFMT(os.lstat(path).st_mode) != stat.S_IFREG  # left as it was
    assert session.list_sessions() == []
    session.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the open files in /proc")
@pytest.mark.parametrize(("make", "what"), ODD_FILES)
def test_a_config_path_that_is_not_a_regular_file_leaks_no_file_descriptor(
    tmp_path: Path, make: Callable[[Path], None], what: str
) -> None:
    path = tmp_path / "agent.yaml"
    make(path)
    before = _open_fds()
    for _ in range(20):
        with pytest.raises(DocumentError, match="cannot read the file"):
            from_config(Holder, path)
    assert _open_fds() == before


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the open files in /proc")
def test_reading_a_stored_file_that_is_a_folder_leaks_no_file_descriptor(tmp_path: Path) -> None:
    before = _open_fds()
    for _ in range(20):
        with pytest.raises(SessionError, match="is a folder"):
            digest_regular(tmp_path)
    assert _open_fds() == before


@pytest.mark.parametrize("kind", FILE_SESSIONS)
def test_a_save_dir_with_a_nul_character_is_refused_when_the_session_is_made(kind: type[FileSession]) -> None:
    with pytest.raises(SessionError, match=r"save_dir 'sessions\\x00' contains a NUL character"):
        kind("sessions\x00")


@pytest.mark.parametrize("kind", FILE_SESSIONS)
def test_a_symlinked_user_folder_is_never_followed(tmp_path: Path, kind: type[FileSession]) -> None:
    save_dir, outside = tmp_path / "sessions", tmp_path / "outside"
    save_dir.mkdir()
    outside.mkdir()
    session = kind(save_dir)
    user_folder = session.session_path("s1", "alice").parent
    user_folder.symlink_to(outside, target_is_directory=True)
    (outside / session.session_path("s1", "alice").name).write_bytes(session.codec.dumps({"note": {"text": "outside"}}))
    note = Note(text="kept")
    for call in (
        lambda: session.save("s1", "alice", note=Note(text="escaped")),
        lambda: session.load("s1", "alice", note=note),
        lambda: session.exists("s1", "alice"),
        lambda: session.delete("s1", "alice"),
        lambda: session.list_sessions("alice"),
        lambda: session.lease("s1", "alice"),  # no lease record is written through the link either
    ):
        with pytest.raises(SessionError, match="is a symbolic link; statekit never follows links"):
            call()
    assert note.text == "kept"
    assert sorted(path.name for path in outside.iterdir()) == [session.session_path("s1", "alice").name]
    assert b"escaped" not in next(outside.iterdir()).read_bytes()
    session.close()


@pytest.mark.parametrize("kind", FILE_SESSIONS)
def test_a_symlinked_session_file_is_never_followed(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path / "sessions")
    secret = tmp_path / "secret.txt"
    secret.write_bytes(session.codec.dumps({"note": {"text": "outside content"}}))
    path = session.session_path("s1")
    path.parent.mkdir()
    path.symlink_to(secret)
    note = Note()
    with pytest.raises(SessionError, match="is a symbolic link"):
        session.load("s1", note=note)
    with pytest.raises(SessionError, match="is a symbolic link"):
        session.save("s1", note=Note(text="over"))
    with pytest.raises(SessionError, match="is a symbolic link"):
        session.exists("s1")
    assert note.text == ""
    assert path.is_symlink()
    assert b"outside content" in secret.read_bytes()
    assert session.list_sessions() == []
    session.close()


@pytest.mark.parametrize("kind", FILE_SESSIONS)
def test_save_dir_itself_may_be_a_link(tmp_path: Path, kind: type[FileSession]) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    session = kind(tmp_path / "link")
    session.save("s1", "bob", note=Note(text="hi"))
    note = Note()
    session.load("s1", "bob", note=note)
    assert note.text == "hi"
    assert session.list_sessions("bob") == ["s1"]
    session.close()


@pytest.mark.parametrize("kind", FILE_SESSIONS)
def test_a_temporary_file_left_by_a_killed_save_goes_with_the_next_save(tmp_path: Path, kind: type[FileSession]) -> None:
    session = kind(tmp_path)
    session.save("s1", note=Note(text="one"))
    path = session.session_path("s1")
    temp_path(path).write_bytes(b'{"half": ')  # what a save killed mid-write leaves
    assert session.list_sessions() == ["s1"]
    session.save("s1", note=Note(text="two"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    note = Note()
    session.load("s1", note=note)
    assert note.text == "two"
    session.close()


# --- duplicate keys -----------------------------------------------------------------------------

DUPLICATED = {
    ".yaml": ("note:\n  text: first\n  count: 1\n  text: second\n", 4, 3),
    ".json": ('{\n  "note": {\n    "text": "first",\n    "count": 1,\n    "text": "second"\n  }\n}\n', 5, 5),
}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_config_file_with_a_duplicate_key_is_refused_at_the_second_key(tmp_path: Path, suffix: str) -> None:
    text, line, column = DUPLICATED[suffix]
    path = tmp_path / f"agent{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DocumentError, match="the key 'text' appears twice") as caught:
        from_config(Holder, path)
    assert (caught.value.source, caught.value.line, caught.value.column) == (str(path), line, column)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_convert_and_validate_refuse_a_duplicate_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    monkeypatch.chdir(tmp_path)
    text, line, column = DUPLICATED[suffix]
    source = tmp_path / f"chat{suffix}"
    source.write_text(text, encoding="utf-8")
    target = ".json" if suffix == ".yaml" else ".yaml"
    assert cli_main(["convert", str(source), str(tmp_path / f"out{target}")]) == 1
    assert f"{source}:{line}:{column}: invalid" in capsys.readouterr().err
    assert not (tmp_path / f"out{target}").exists()
    assert cli_main(["validate", str(source), "--module", "note=tests.test_hostile:Note"]) == 1
    assert f"{source}:{line}:{column}: invalid" in capsys.readouterr().err


def test_a_yaml_session_with_a_duplicate_key_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    session = YAMLSession(tmp_path)
    session.session_path("s1").write_text(DUPLICATED[".yaml"][0], encoding="utf-8")
    note = Note(text="kept")
    with pytest.raises(DocumentError, match=r"s1\.yaml:4:3: invalid YAML: the key 'text' appears twice"):
        session.load("s1", note=note)
    assert note.text == "kept"
    session.close()


def test_a_json_session_load_keeps_the_last_duplicate_as_documented(tmp_path: Path) -> None:
    """Refusing duplicates costs a second parse (docs/sessions.md); ``validate`` catches them."""
    session = JSONSession(tmp_path)
    session.session_path("s1").write_text(DUPLICATED[".json"][0], encoding="utf-8")
    note = Note()
    session.load("s1", note=note)
    assert note.text == "second"
    session.close()


def test_a_problem_in_a_duplicated_json_key_is_placed_at_the_value_kept(tmp_path: Path) -> None:
    """The load keeps the last of two equal keys; the error must point there, not at the first."""
    session = JSONSession(tmp_path)
    document = '{\n  "note": {\n    "text": "ok",\n    "text": 5,\n    "count": 0\n  }\n}\n'
    session.session_path("s1").write_text(document, encoding="utf-8")
    with pytest.raises(StateLoadError) as caught:
        session.load("s1", note=Note())
    assert [(p.line, p.column, p.dotted) for p in caught.value.problems] == [(4, 5, "note.text")]
    session.close()


@pytest.mark.parametrize(
    ("raw", "what"),
    [
        (b"1: a\n", "'1' is read as an integer"),
        (b"a: {b: 1, 0.25}\n", "'0.25' is read as a number"),
        (b"null: 1\n", "'null' is read as null"),
        (b"? [a]\n: 1\n", "here is a list"),
        (b"? !!str [a]\n: 1\n", "here is a list"),  # a collection tagged !!str broke the duplicate check
        (b"? !!str {a: 1}\n: 1\n", "here is a mapping"),
    ],
)
def test_a_yaml_key_that_is_not_a_string_is_refused_with_its_line(raw: bytes, what: str) -> None:
    """Found by the fuzz test: a float key reached the state layer and broke its error message."""
    with pytest.raises(DocumentError, match=f"the key {what}.*keys must be strings") as caught:
        YAML.loads(raw, "k.yaml")
    assert caught.value.line == 1


def test_base_60_numbers_are_text_read_in_linear_time() -> None:
    """YAML 1.1 built "1:1:...:1" digit group by digit group: quadratic, past the digit limit, or an OverflowError."""
    assert YAML.loads(b"x: " + b"1:" * 200 + b"1.5\n", "x.yaml") == {"x": "1:" * 200 + "1.5"}
    raw = b"x: " + b"1:" * 200_000 + b"1\n"
    started = time.perf_counter()
    assert YAML.loads(raw, "x.yaml") == {"x": "1:" * 200_000 + "1"}
    assert time.perf_counter() - started < 1


@pytest.mark.parametrize("digits", [b"f" * 3_600, b"f" * 3_000_000])
def test_a_hexadecimal_integer_past_the_digit_limit_is_refused_with_its_line(digits: bytes) -> None:
    """Python reads it without a limit, but saving writes it in decimal, past the limit: refused on load, as decimal is."""
    with pytest.raises(DocumentError, match=r"an integer of more than \d+ digits") as caught:
        YAML.loads(b"a: 1\nx: 0x" + digits + b"\n", "x.yaml")
    assert (caught.value.line, caught.value.column) == (2, 4)


# --- the hostile-input corpus, through every codec and backend ----------------------------------

CORPUS = Path(__file__).resolve().parent / "corpus"
LARGE: dict[str, bytes] = runpy.run_path(str(CORPUS / "make_corpus.py"))["LARGE"]
CORPUS_NAMES = sorted(path.name for path in CORPUS.iterdir() if path.suffix != ".py") + sorted(LARGE)


def corpus_bytes(name: str) -> bytes:
    """A corpus file's bytes (the large ones are made on the spot)."""
    return LARGE[name] if name in LARGE else (CORPUS / name).read_bytes()


def test_the_corpus_is_all_there() -> None:
    assert len(CORPUS_NAMES) >= 50
    assert {"deep-flow-25000.yaml", "alias-bomb.yaml", "tag-python-object.yaml", "invalid-utf8.yaml"} <= set(CORPUS_NAMES)


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_every_codec_decodes_the_corpus_or_says_where_it_fails(name: str) -> None:
    raw = corpus_bytes(name)
    for codec in (JSON, YAML):
        for read in (codec.loads, codec.loads_strict):
            try:
                data = read(raw, name)
            except DocumentError as err:
                assert err.source == name and err.reason
            else:
                _check_round_trip(codec, data)


def _check_round_trip(codec: Codec, data: Any) -> None:
    try:
        raw = codec.dumps(data)
    except StateDumpError as err:  # read, but not writable in this format (an integer beyond 64 bits in JSON)
        assert err.problems and err.problems[0].path
        return
    again = codec.loads(raw, None)
    assert again == data or "nan" in raw.decode().lower()  # NaN is not equal to itself


def _put(session: SessionBase, raw: bytes, request: pytest.FixtureRequest) -> None:
    if isinstance(session, FileSession):
        session.session_path("hostile").write_bytes(raw)
        return
    if isinstance(session, SQLiteSession):  # the bytes as the document of a row, as an operator's INSERT would put them
        session.exists("hostile")  # the schema is made on first use
        with sqlite3.connect(session.path) as database:
            database.execute(
                "INSERT INTO statekit_sessions (user_id, session_id, revision, saved_at, document) "
                "VALUES ('', 'hostile', ?, '', CAST(? AS TEXT))",
                (hashlib.sha1(raw, usedforsecurity=False).hexdigest(), raw),
            )
        database.close()
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    client = redis.Redis(host=server.host, port=server.port)
    try:
        client.set(cast("RedisSession", session).session_key("hostile"), raw)
    finally:
        client.close()


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_every_backend_loads_the_corpus_or_refuses_it_changing_nothing(
    name: str, backend: SessionFactory, request: pytest.FixtureRequest
) -> None:
    with backend() as session:
        _put(session, corpus_bytes(name), request)
        agent = sample_agent()
        before = agent.state_dict()
        try:
            session.load("hostile", agent=agent)
        except StatekitError as err:
            assert str(err)
            assert agent.state_dict() == before
            return
        loaded = agent.state_dict()
        try:
            session.save("again", agent=agent)
        except StateDumpError as err:  # read, but not writable in this format: refused, naming the path
            assert err.problems[0].path
            return
        again = FuzzAgent()
        session.load("again", agent=again)
        assert again.state_dict() == loaded
    assert not Path("/tmp/statekit-pwned").exists()  # noqa: S108 - what tag-python-object.yaml would write


@pytest.mark.parametrize(
    "name",
    ["deep-flow-25000.yaml", "deep-block-25000.yaml", "alias-bomb.yaml", "tag-python-object.yaml", "invalid-utf8.yaml"],
)
def test_the_worst_of_the_corpus_is_refused_by_the_yaml_session(name: str, tmp_path: Path) -> None:
    with YAMLSession(tmp_path) as session:
        session.session_path("hostile").write_bytes(corpus_bytes(name))
        with pytest.raises(DocumentError):
            session.load("hostile", agent=FuzzAgent())


def test_a_25000_level_yaml_file_is_refused_without_libyaml_too() -> None:
    """Run in a child: without the C extension the pure-Python composer would raise RecursionError."""
    code = (
        "import yaml\n"
        "del yaml.CSafeDumper, yaml.CSafeLoader\n"  # as on a PyYAML built without libyaml
        "import statekit.codecs.yaml as y\n"
        "assert not y.WITH_LIBYAML\n"
        "from statekit.errors import DocumentError\n"
        f"raw = open({str(CORPUS / 'deep-block-25000.yaml')!r}, 'rb').read()\n"
        "try:\n    y.loads(raw, 'deep.yaml')\nexcept DocumentError as err:\n    print(err)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "deep.yaml:2:399: nested deeper than 200 levels" in done.stdout


@pytest.mark.parametrize(
    ("value", "message"),
    [(10**5000, "integer"), (2**64, "integer"), (-(2**63) - 1, "integer")],
    ids=["5001-digits", "2**64", "below-int64"],
)
def test_saving_an_integer_a_format_cannot_hold_names_its_path(backend: SessionFactory, value: int, message: str) -> None:
    with backend() as session:
        note = Note(text="t", count=value)
        if session.codec.name == "yaml" and abs(value) < 10**4300:
            session.save("big", note=note)  # YAML holds any integer Python can print
            loaded = Note()
            session.load("big", note=loaded)
            assert loaded.count == value
            return
        with pytest.raises(StateDumpError, match=message) as caught:
            session.save("big", note=note)
        assert caught.value.problems[0].path == ("note", "count")
        assert not session.exists("big")


@stateful
class Tagged(StateModule):
    tags: dict[str, int] = state_field(factory=dict)


def test_keys_in_problem_paths_are_quoted_so_they_cannot_forge_lines_or_reach_the_terminal() -> None:
    """A key holding a dot, a newline or an escape code is written quoted and escaped."""
    keys = ["plain", "a.b", "evil\nname: forged", "\x1b[2J\x1b[31mred", "\x9bcsi", "2024"]
    with pytest.raises(StateLoadError) as caught:
        from_config(Tagged, {"tags": dict.fromkeys(keys, "x")})
    assert [p.dotted for p in caught.value.problems] == [
        "tags.plain",
        'tags["a.b"]',
        'tags["evil\\nname: forged"]',
        'tags["\\u001b[2J\\u001b[31mred"]',
        'tags["\\u009bcsi"]',
        'tags["2024"]',
    ]
    text = str(caught.value)
    assert len(text.splitlines()) == 1 + len(keys) and all(char.isprintable() for char in text.replace("\n", ""))
