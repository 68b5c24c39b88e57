"""The history commands: ``statekit history`` (and ``--keep``), ``show --at``, ``diff``, ``rollback`` (issue 30).

The sessions are written through the public session API by a JSONSession that
keeps history, and read back through the command. Until the JSON backend keeps
history itself (``JSONSession.supports_history``), the :func:`files_keep_history`
fixture gives it blobs held in memory for the test (the contract's default
``_write_keeping`` then keeps them); once it does, the tests run on its own.
The last test runs the commands on every other store that keeps history.
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from append_models import Agent, KeyedMemory, Memory, Msg
from statekit import Revision, SessionNotFoundError, generate_secret_key
from statekit.cli import main
from statekit.session import JSONSession, SessionBase, SessionKey, YAMLSession
from statekit.session.redis import RedisSession
from statekit.session.sqlite import SQLiteSession

Blobs = dict[tuple[str, SessionKey, str], bytes]


@pytest.fixture(autouse=True)
def files_keep_history(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """JSONSession keeps history: its own once the JSON backend does, until then blobs held in this dict."""
    if JSONSession.supports_history:
        yield
        return
    blobs: Blobs = {}

    async def put_blob(self: JSONSession, key: SessionKey, name: str, data: bytes) -> None:
        blobs[(str(self.save_dir), key, name)] = data

    async def get_blob(self: JSONSession, key: SessionKey, name: str) -> bytes | None:
        return blobs.get((str(self.save_dir), key, name))

    async def drop_blobs(self: JSONSession, key: SessionKey, names: tuple[str, ...]) -> None:
        for name in names:
            blobs.pop((str(self.save_dir), key, name), None)

    async def list_blobs(self: JSONSession, key: SessionKey) -> list[str]:
        return [name for folder, owner, name in blobs if (folder, owner) == (str(self.save_dir), key)]

    monkeypatch.setattr(JSONSession, "supports_history", True)
    for name, method in [("_put_blob", put_blob), ("_get_blob", get_blob), ("_drop_blobs", drop_blobs), ("_list_blobs", list_blobs)]:
        monkeypatch.setattr(JSONSession, name, method)
    yield


def keeping(folder: Path, keep: int | None = 10, **options: Any) -> JSONSession:
    """A JSONSession on ``folder`` keeping ``keep`` past revisions of the sessions it writes."""
    if "keep_history" in inspect.signature(JSONSession).parameters:
        return JSONSession(folder, **{**options, "keep_history": keep})
    session = JSONSession(folder, **options)
    session.keep_history = keep  # the contract's attribute, until the constructor takes keep_history=
    return session


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def turns(tmp_path: Path, count: int = 3, *, keep: int | None = 10) -> tuple[list[Revision], list[Agent]]:
    """Session chat-1 saved ``count`` times, one message more each time; its history and each saved state."""
    session = keeping(tmp_path, keep)
    agent, states = Agent(), []
    for turn in range(count):
        agent.memory.content.append(Msg("user", f"message {turn}"))
        agent.memory.note = f"after turn {turn}"
        session.save("chat-1", agent=agent)
        states.append(Agent(memory=Memory(content=list(agent.memory.content), note=agent.memory.note)))
    return session.history("chat-1"), states


def documents(tmp_path: Path, *docs: dict[str, Any], keep: int | None = 10) -> list[str]:
    """Session doc-1 written as each plain document in turn; the revisions written, oldest first."""
    session = keeping(tmp_path, keep)
    return [session.write_document("doc-1", doc) for doc in docs]


# -- statekit history --------------------------------------------------------------------------------------


def test_history_lists_every_revision_newest_first_in_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, _ = turns(tmp_path)
    status, out, err = run(capsys, "history", "--dir", str(tmp_path), "chat-1")
    assert (status, err) == (0, "")
    header, *lines = out.splitlines()
    assert header.split() == ["revision", "saved", "at", "(UTC)", "size", "parent", "modules"]
    assert len(lines) == len(revisions) == 3
    head_size = (tmp_path / "chat-1.json").stat().st_size
    for line, revision in zip(lines, revisions):
        shown, saved_at, size, parent, modules = line.split()
        assert shown == revision.revision[:12]
        assert revision.saved_at is not None
        assert saved_at == revision.saved_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert int(size) == revision.size
        assert parent == ("-" if revision.parent is None else revision.parent[:12])
        assert modules == "agent"
    assert int(lines[0].split()[2]) == head_size  # the head's size is its file's
    assert [line.split()[3] for line in lines[:-1]] == [line.split()[0] for line in lines[1:]]  # each saved over the next
    assert lines[-1].split()[3] == "-"  # the first revision has no parent
    assert {line.rindex("agent") for line in lines} == {header.index("modules")}  # the columns line up


def test_history_limit_and_json_print_whole_revisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, _ = turns(tmp_path)
    status, out, _ = run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--limit", "2", "--json")
    assert status == 0
    listed = orjson.loads(out)
    assert [entry["revision"] for entry in listed] == [revision.revision for revision in revisions[:2]]
    for entry, revision in zip(listed, revisions):
        assert entry == {
            "revision": revision.revision,
            "parent": revision.parent,
            "saved_at": entry["saved_at"],
            "size": revision.size,
            "modules": ["agent"],
            "forked_from": None,
        }
        assert datetime.fromisoformat(entry["saved_at"]) == revision.saved_at  # whole, with its offset
    assert run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--limit", "1")[1].count("\n") == 2  # header + head


def test_history_shows_where_a_fork_came_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, _ = turns(tmp_path)
    session = keeping(tmp_path)
    session.fork("chat-1", "chat-2", at=revisions[1].revision)
    session.fork("chat-1", "chat-3", new_user_id="alice")
    status, out, _ = run(capsys, "history", "--dir", str(tmp_path), "chat-2")
    assert status == 0
    assert out.splitlines()[1].endswith(f"  agent  forked from chat-1@{revisions[1].revision[:12]}")
    out = run(capsys, "history", "--dir", str(tmp_path), "--user", "alice", "chat-3")[1]
    assert out.splitlines()[1].endswith(f"  agent  forked from chat-1@{revisions[0].revision[:12]}")  # user '' is not named
    listed = orjson.loads(run(capsys, "history", "--dir", str(tmp_path), "--user", "alice", "chat-3", "--json")[1])
    assert listed[0]["forked_from"] == {"user_id": "", "session_id": "chat-1", "revision": revisions[0].revision}


def test_a_fork_from_another_users_session_names_the_user(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = keeping(tmp_path)
    session.write_document("chat-1", {"agent": {"turns": 1}}, "alice")
    forked = session.fork("chat-1", "chat-9", user_id="alice", new_user_id="bob")
    head = session.history("chat-1", "alice")[0].revision
    out = run(capsys, "history", "--dir", str(tmp_path), "--user", "bob", "chat-9")[1]
    assert out.splitlines()[1].startswith(forked[:12])
    assert out.splitlines()[1].endswith(f"forked from alice/chat-1@{head[:12]}")


def test_history_of_a_session_that_keeps_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revision = JSONSession(tmp_path).write_document("chat-1", {"agent": {"turns": 1}, "notes": {}})
    status, out, err = run(capsys, "history", "--dir", str(tmp_path), "chat-1")
    assert status == 0
    assert out.splitlines()[1].split() == [revision[:12], "-", str((tmp_path / "chat-1.json").stat().st_size), "-", "agent,notes"]
    assert err == (
        "statekit history: session 'chat-1' keeps no history (its head alone): "
        "keep it with statekit history --keep N, or keep_history=N in the application\n"
    )


def test_history_of_a_missing_session_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "history", "--dir", str(tmp_path), "--user", "bob", "chat-1")
    assert (status, out) == (1, "")
    assert err == f"no session 'chat-1' of user 'bob' in {JSONSession(tmp_path).session_path('chat-1', 'bob')}\n"


def test_history_takes_a_store_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, _ = turns(tmp_path, 2)
    status, out, _ = run(capsys, "history", "--store", tmp_path.as_uri(), "chat-1")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == [revision.revision[:12] for revision in revisions]


# -- statekit history --keep -------------------------------------------------------------------------------


def test_keep_lowers_and_raises_what_the_session_keeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, _ = turns(tmp_path, 4)
    status, out, _ = run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--keep", "1")
    plain = JSONSession(tmp_path)  # keep_history=0: the session's own retention rules its writes
    after = plain.history("chat-1")
    assert (status, out) == (0, f"chat-1: keeps at most 1 past revision(s) now (head {after[0].revision[:12]})\n")
    assert [revision.revision for revision in after] == [after[0].revision, revisions[0].revision]
    with pytest.raises(SessionNotFoundError, match="holds no revision"):
        plain.read_document("chat-1", at=revisions[1].revision)  # pruned now
    plain.read_document("chat-1")  # the head, which the writes below go over
    plain.write_document("chat-1", {"agent": {}})
    assert len(plain.history("chat-1")) == 2  # still one past revision kept, by a writer that keeps none itself

    assert run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--keep", "all")[0] == 0
    plain.read_document("chat-1")  # --keep wrote a new head (the same modules, the new retention)
    for turn in range(3):
        plain.write_document("chat-1", {"agent": {"turn": turn}})
    assert len(plain.history("chat-1")) == 6  # every one kept from now on

    status, out, _ = run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--keep", "0")
    assert status == 0 and out.startswith("chat-1: keeps no history now (head ")
    assert len(plain.history("chat-1")) == 1
    head = plain.read_document("chat-1")
    assert head is not None and head.data["agent"] == {"turn": 2}


def test_keep_refuses_bad_counts_and_missing_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turns(tmp_path, 2)
    before = (tmp_path / "chat-1.json").read_bytes()
    for value in ("-1", "x", "2.5"):
        status, _, err = run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--keep", value)
        assert status == 2
        assert f"argument --keep: '{value}': give how many past revisions to keep (an integer >= 0), or all" in err
    status, _, err = run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--keep", "1", "--json")
    assert (status, err) == (
        2,
        "statekit history: error: --keep sets how many revisions the session keeps; list them without it (--limit, --json)\n",
    )
    status, _, err = run(capsys, "history", "--dir", str(tmp_path), "chat-2", "--keep", "3")
    assert (status, err) == (1, f"no session 'chat-2' of user '' in {tmp_path / 'chat-2.json'}\n")
    assert (tmp_path / "chat-1.json").read_bytes() == before
    assert not (tmp_path / "chat-2.json").exists()


def test_keep_on_a_store_that_keeps_no_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(JSONSession, "supports_history", False)  # as a backend without history's storage
    JSONSession(tmp_path).write_document("chat-1", {"agent": {"turns": 1}})
    before = (tmp_path / "chat-1.json").read_bytes()
    status, out, err = run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--keep", "all")
    assert (status, out) == (1, "")
    assert err == "--keep all: JSONSession stores keep no history (supports_history is false); nothing was changed\n"
    assert run(capsys, "history", "--dir", str(tmp_path), "chat-1", "--keep", "0")[0] == 0  # keeps none: nothing to do
    assert (tmp_path / "chat-1.json").read_bytes() == before
    assert len(run(capsys, "history", "--dir", str(tmp_path), "chat-1")[1].splitlines()) == 2  # header + the head


# -- naming revisions ------------------------------------------------------------------------------------------


def test_revisions_are_named_by_prefix_head_or_head_n(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, _ = turns(tmp_path)
    first = revisions[2].revision
    for name in (first, first[:4], first[:12].upper(), "head~2", "HEAD~2"):
        status, out, _ = run(capsys, "show", "--dir", str(tmp_path), "chat-1", "--at", name, "--json")
        assert status == 0, name
        assert orjson.loads(out)["agent"]["memory"]["note"] == "after turn 0"
    assert orjson.loads(run(capsys, "show", "--dir", str(tmp_path), "chat-1", "--at", "head", "--json")[1])["agent"]["memory"][
        "note"
    ] == "after turn 2"


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("head~3", 1, "head~3: session 'chat-1' lists 3 revision(s), head to head~2 (statekit history lists them)\n"),
        ("0000000000", 1, "session 'chat-1' holds no revision '0000000000': it was never kept, or was pruned (statekit history lists them)\n"),
        ("abc", 2, "statekit show: error: revision prefix 'abc' is too short: give at least 4 characters\n"),
        ("last", 2, "statekit show: error: 'last' is not a revision: give one statekit history lists (or a prefix of it), head or head~N\n"),
        ("head~-1", 2, "statekit show: error: 'head~-1' is not a revision"),
    ],
)
def test_a_revision_name_that_names_none_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, status: int, message: str
) -> None:
    turns(tmp_path)
    got, out, err = run(capsys, "show", "--dir", str(tmp_path), "chat-1", "--at", name)
    assert (got, out) == (status, "")
    assert err.startswith(message)


@pytest.mark.slow
def test_a_prefix_of_several_revisions_is_refused_naming_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = keeping(tmp_path, None)
    seen: dict[str, tuple[str, int]] = {}
    for turn in range(5000):  # about 300 revisions until two share their first 4 characters
        revision = session.write_document("chat-1", {"agent": {"turn": turn}})
        if revision[:4] in seen:
            break
        seen[revision[:4]] = (revision, turn)
    else:
        pytest.fail("no two revisions of 5000 share 4 characters")
    other, other_turn = seen[revision[:4]]
    before = session.history("chat-1")
    status, out, err = run(capsys, "rollback", "--dir", str(tmp_path), "chat-1", revision[:4])
    assert (status, out) == (2, "")
    assert err == (
        f"statekit rollback: error: revision prefix {revision[:4]!r} names 2 revisions of session 'chat-1' "
        f"({revision[:12]}, {other[:12]}): give more characters\n"
    )
    assert session.history("chat-1") == before  # nothing rolled back
    assert run(capsys, "diff", "--dir", str(tmp_path), "chat-1", other[:12]) == (1, f"agent.turn: {other_turn} -> {turn}\n", "")


# -- statekit show --at ------------------------------------------------------------------------------------------


def test_show_at_prints_a_kept_revision_as_show_prints_the_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, states = turns(tmp_path)
    status, out, _ = run(capsys, "show", "--dir", str(tmp_path), "chat-1", "--at", revisions[1].revision[:12])
    assert status == 0
    assert yaml.safe_load(out) == {"agent": states[1].state_dict()}
    assert "__statekit__" not in out
    status, out, _ = run(capsys, "show", "--dir", str(tmp_path), "chat-1", "--at", "head~1", "--module", "agent", "--json")
    assert (status, orjson.loads(out)) == (0, states[1].state_dict())
    assert run(capsys, "show", "--dir", str(tmp_path), "chat-1", "--at", "head")[1] == run(
        capsys, "show", "--dir", str(tmp_path), "chat-1"
    )[1]


def test_show_at_masks_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = keeping(tmp_path, secret_key=generate_secret_key())
    session.save("chat-1", memory=KeyedMemory(api_key="sk-first"))
    session.save("chat-1", memory=KeyedMemory(api_key="sk-second"))
    status, out, _ = run(capsys, "show", "--dir", str(tmp_path), "chat-1", "--at", "head~1")
    assert status == 0
    assert yaml.safe_load(out)["memory"]["api_key"] == "<secret>"
    assert "sk-" not in out


def test_show_at_needs_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turns(tmp_path, 1)
    status, out, err = run(capsys, "show", str(tmp_path / "chat-1.json"), "--at", "head")
    assert (status, out) == (2, "")
    assert err == (
        "statekit show: error: --at reads a revision of a stored session: "
        "name its store (--dir DIR, --store URL, --redis-url URL)\n"
    )


# -- statekit diff ------------------------------------------------------------------------------------------------


def test_diff_prints_the_paths_that_changed_in_document_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = keeping(tmp_path)
    agent = Agent()
    agent.memory.content += [Msg("user", "hi"), Msg("assistant", "hello")]
    agent.memory.note = "greeted"
    session.save("chat-1", agent=agent)
    agent.memory.content.append(Msg("user", "weather?"))
    agent.memory.note = "asked"
    agent.events += [7, 8]
    session.save("chat-1", agent=agent, notes=Memory(note="new"))
    status, out, err = run(capsys, "diff", "--dir", str(tmp_path), "chat-1", "head~1")
    assert (status, err) == (1, "")
    assert out.splitlines() == [
        'agent.memory.content[2]: added {"role": "user", "text": "weather?"}',
        'agent.memory.note: "greeted" -> "asked"',
        "agent.events[0]: added 7",
        "agent.events[1]: added 8",
        "notes: module added",
    ]
    status, out, _ = run(capsys, "diff", "--dir", str(tmp_path), "chat-1", "head", "head~1")
    assert status == 1
    assert out.splitlines() == [
        'agent.memory.content[2]: removed {"role": "user", "text": "weather?"}',
        'agent.memory.note: "asked" -> "greeted"',
        "agent.events[0]: removed 7",
        "agent.events[1]: removed 8",
        "notes: module removed",
    ]


def test_diff_of_equal_revisions_prints_nothing_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions = documents(tmp_path, {"agent": {"turns": 1, "tags": ["a"]}}, {"agent": {"tags": ["a"], "turns": 1}})
    assert revisions[0] != revisions[1]  # two revisions (the second saved over the first) ...
    assert run(capsys, "diff", "--dir", str(tmp_path), "doc-1", revisions[0][:8]) == (0, "", "")  # ... of equal values
    assert run(capsys, "diff", "--dir", str(tmp_path), "doc-1", "head", "head") == (0, "", "")


@pytest.mark.parametrize(
    ("old", "new", "lines"),
    [
        ({"m": {"n": 1}}, {"m": {"n": True}}, ["m.n: 1 -> true"]),
        ({"m": {"n": 1}}, {"m": {"n": 1.0}}, ["m.n: 1 -> 1.0"]),
        ({"m": {"n": None}}, {"m": {"n": "x"}}, ['m.n: null -> "x"']),
        ({"m": {"n": [1]}}, {"m": {"n": {"a": 1}}}, ['m.n: [1] -> {"a": 1}']),
        ({"m": {"a": 1}}, {"m": {"a": 1, "b": {"c": [2]}}}, ['m.b: added {"c": [2]}']),
        ({"m": {"a": 1, "b": 2}}, {"m": {"b": 2}}, ["m.a: removed 1"]),
        ({"m": {"a.b": 1, "new\nline": 1}}, {"m": {"a.b": 2, "new\nline": 2}}, ['m["a.b"]: 1 -> 2', 'm["new\\nline"]: 1 -> 2']),
        ({"m": {"l": ["a", "b", "c", "d"]}}, {"m": {"l": ["a", "c", "d"]}}, ['m.l[1]: removed "b"']),
        ({"m": {"l": ["a", "c"]}}, {"m": {"l": ["x", "a", "b", "c"]}}, ['m.l[0]: added "x"', 'm.l[2]: added "b"']),
        (
            {"m": {"l": [{"role": "user", "text": "a"}, {"role": "user", "text": "b"}]}},
            {"m": {"l": [{"role": "user", "text": "a"}, {"role": "user", "text": "B"}]}},
            ['m.l[1].text: "b" -> "B"'],
        ),
        ({"m": {"s": "é\u202ex\x1b"}}, {"m": {"s": ""}}, ['m.s: "é\\u202ex\\u001b" -> ""']),
        ({"m": {"n": 1}, "x": {}}, {"x": {}, "m": {"n": 1}}, []),
    ],
)
def test_diff_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: dict[str, Any], new: dict[str, Any], lines: list[str]
) -> None:
    first, _ = documents(tmp_path, old, new)
    status, out, err = run(capsys, "diff", "--dir", str(tmp_path), "doc-1", first)
    assert (status, out.splitlines(), err) == (1 if lines else 0, lines, "")


def test_diff_cuts_long_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, _ = documents(tmp_path, {"m": {"text": "short"}}, {"m": {"text": "x" * 500}})
    out = run(capsys, "diff", "--dir", str(tmp_path), "doc-1", first)[1]
    assert out == f'm.text: "short" -> "{"x" * 76}...\n'


def test_diff_shows_secrets_masked_never_decrypted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = keeping(tmp_path, secret_key=generate_secret_key())
    memory = KeyedMemory(api_key="sk-first")
    session.save("chat-1", memory=memory)
    memory.content.append(Msg("user", "hi"))
    session.save("chat-1", memory=memory)  # the same secret: the same sealed token
    memory.api_key = "sk-second"
    session.save("chat-1", memory=memory)
    assert run(capsys, "diff", "--dir", str(tmp_path), "chat-1", "head~2", "head~1") == (
        1,
        'memory.content[0]: added {"role": "user", "text": "hi"}\n',
        "",
    )
    status, out, _ = run(capsys, "diff", "--dir", str(tmp_path), "chat-1", "head~1")
    assert (status, out) == (1, "memory.api_key: <secret> -> <secret>\n")
    sealed = session.read_document("chat-1")
    assert sealed is not None
    documents(tmp_path, {"memory": {}}, {"memory": {"api_key": sealed.data["memory"]["api_key"], "more": [sealed.data["memory"]["api_key"]]}})
    out = run(capsys, "diff", "--dir", str(tmp_path), "doc-1", "head~1")[1]
    assert out == 'memory.api_key: added <secret>\nmemory.more: added ["<secret>"]\n'


def test_diff_finds_an_item_appended_to_a_long_list_quickly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [{"role": "user", "text": f"message {index}"} for index in range(50_000)]
    first, _ = documents(tmp_path, {"m": {"l": items}}, {"m": {"l": [*items[:20_000], *items[20_001:], {"role": "x", "text": "y"}]}})
    status, out, _ = run(capsys, "diff", "--dir", str(tmp_path), "doc-1", first)
    assert (status, out.splitlines()) == (
        1,
        ['m.l[20000]: removed {"role": "user", "text": "message 20000"}', 'm.l[49999]: added {"role": "x", "text": "y"}'],
    )


def test_diff_of_deeply_nested_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def nested(leaf: int) -> Any:
        value: Any = leaf
        for _ in range(190):
            value = [value]
        return value

    first, _ = documents(tmp_path, {"m": {"deep": nested(1)}}, {"m": {"deep": nested(2)}})
    status, out, _ = run(capsys, "diff", "--dir", str(tmp_path), "doc-1", first)
    assert (status, out) == (1, "m.deep" + "[0]" * 190 + ": 1 -> 2\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chat-2", "head"], "no session 'chat-2' of user '' in "),
        (["chat-1", "0000000000"], "session 'chat-1' holds no revision '0000000000'"),
        (["chat-1", "head~9"], "head~9: session 'chat-1' lists 3 revision(s)"),
        (["chat-1", "zz"], "statekit diff: error: 'zz' is not a revision"),
    ],
)
def test_diff_trouble_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    turns(tmp_path)
    status, out, err = run(capsys, "diff", "--dir", str(tmp_path), *argv)
    assert (status, out) == (2, "")
    assert err.startswith(message)
    status, _, err = run(capsys, "diff", "--dir", str(tmp_path / "nowhere"), "chat-1", "head")
    assert status == 2 and "there is no such folder" in err


def test_diff_help_says_its_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "diff", "--help")
    assert status == 0
    assert "exit status (as diff(1)): 0 the revisions are equal (nothing printed),\n1 they differ, 2 trouble" in out
    assert "diff's, as diff(1)'s: 0 equal, 1 different, 2 trouble." in run(capsys, "--help")[1]


# -- statekit rollback --------------------------------------------------------------------------------------------


def test_rollback_makes_a_new_head_equal_to_the_revision_and_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revisions, states = turns(tmp_path)
    status, out, err = run(capsys, "rollback", "--dir", str(tmp_path), "chat-1", revisions[2].revision[:12])
    assert (status, err) == (0, "")
    after = JSONSession(tmp_path).history("chat-1")
    assert out == f"{after[0].revision}\n"
    assert after[0].parent == revisions[0].revision
    assert [revision.revision for revision in after[1:]] == [revision.revision for revision in revisions]  # nothing destroyed
    agent = Agent()
    JSONSession(tmp_path).load("chat-1", agent=agent)
    assert agent.state_dict() == states[0].state_dict()
    assert run(capsys, "diff", "--dir", str(tmp_path), "chat-1", revisions[2].revision) == (0, "", "")


def test_rollback_to_a_revision_not_kept_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turns(tmp_path)
    before = (tmp_path / "chat-1.json").read_bytes()
    for name, status in (("0123456789ab", 1), ("head~5", 1), ("12", 2)):
        got, out, _ = run(capsys, "rollback", "--dir", str(tmp_path), "chat-1", name)
        assert (got, out) == (status, "")
    assert run(capsys, "rollback", "--dir", str(tmp_path), "chat-9", "head")[0] == 1
    assert (tmp_path / "chat-1.json").read_bytes() == before
    assert not (tmp_path / "chat-9.json").exists()


# -- every store that keeps history ------------------------------------------------------------------------------


@pytest.fixture(params=["yaml", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def other_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Callable[..., SessionBase], list[str]]:
    """A store that is not a JSON folder: a factory of its sessions (given keep_history=), and the options naming it."""
    if request.param == "yaml":
        cls: type[SessionBase] = YAMLSession
        factory: Callable[..., SessionBase] = functools.partial(YAMLSession, tmp_path)
        where = ["--dir", str(tmp_path), "--yaml"]
    elif request.param == "sqlite":
        cls, factory = SQLiteSession, functools.partial(SQLiteSession, tmp_path / "sessions.db")
        where = ["--store", f"sqlite:///{tmp_path / 'sessions.db'}"]
    else:
        server = request.getfixturevalue("redis_server")
        prefix = f"test-{uuid.uuid4().hex}:"
        cls, factory = RedisSession, functools.partial(RedisSession, server.host, server.port, key_prefix=prefix)
        where = ["--redis-url", f"redis://{server.host}:{server.port}/0", "--key-prefix", prefix]
    if not cls.supports_history:
        pytest.skip(f"{cls.__name__} keeps no history yet (issue 30: its backend's part)")
    return factory, where


def test_the_history_commands_on_every_store(
    other_store: tuple[Callable[..., SessionBase], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    factory, where = other_store
    with factory(keep_history=5) as session:
        for turn in range(3):
            session.write_document("chat-1", {"agent": {"turns": turn}}, "alice")
        revisions = session.history("chat-1", "alice")
    user = ["--user", "alice"]
    out = run(capsys, "history", *where, *user, "chat-1")[1]
    assert [line.split()[0] for line in out.splitlines()[1:]] == [revision.revision[:12] for revision in revisions]
    assert orjson.loads(run(capsys, "show", *where, *user, "chat-1", "--at", "head~2", "--json")[1]) == {"agent": {"turns": 0}}
    assert run(capsys, "diff", *where, *user, "chat-1", "head~2") == (1, "agent.turns: 0 -> 2\n", "")
    assert run(capsys, "rollback", *where, *user, "chat-1", revisions[2].revision[:12])[0] == 0
    assert run(capsys, "diff", *where, *user, "chat-1", revisions[2].revision) == (0, "", "")
    assert run(capsys, "history", *where, *user, "chat-1", "--keep", "1")[0] == 0
    assert len(orjson.loads(run(capsys, "history", *where, *user, "chat-1", "--json")[1])) == 2
