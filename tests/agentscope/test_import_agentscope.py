"""``statekit import-agentscope``: an AgentScope 1.x folder into statekit's layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentscope_like import InMemoryMemory, Msg
from statekit import JSONSession
from statekit.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def _old_folder(tmp_path: Path) -> Path:
    old = tmp_path / "old"
    old.mkdir()
    for name, text in [("solo.json", "one"), ("alice_chat_1.json", "two"), ("bob_x.json", "three")]:
        memory = {"_compressed_summary": "", "content": [[Msg("u", text, "user").to_dict(), []]]}
        (old / name).write_text(json.dumps({"memory": memory}, ensure_ascii=False), encoding="utf-8")
    (old / "notes.txt").write_text("not a session", encoding="utf-8")
    return old


def _texts(folder: Path, session_id: str, user_id: str) -> list[str]:
    memory = InMemoryMemory()
    JSONSession(folder).load(session_id, user_id, allow_not_exist=False, memory=memory)
    return [m.content for m, _ in memory.content]  # type: ignore[misc]


def test_names_split_by_the_given_users_are_copied_and_the_rest_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_folder(tmp_path), tmp_path / "new"
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    status, out, err = run(capsys, "import-agentscope", str(old), str(new), "--user-id", "alice")
    assert status == 1
    assert f"copied {old / 'solo.json'} -> {new / 'solo.json'} (user_id '', session_id 'solo')" in out
    assert f"copied {old / 'alice_chat_1.json'} -> {new / '@alice' / 'chat_1.json'}" in out
    assert "3 session file(s)" in out
    assert err == "cannot split bob_x.json: it may be ('', 'bob_x'), ('bob', 'x'); no --user-id given fits it\n"
    assert _texts(new, "solo", "") == ["one"]
    assert _texts(new, "chat_1", "alice") == ["two"]
    assert not JSONSession(new).exists("x", "bob")
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before  # old files only read


def test_without_user_ids_every_name_with_an_underscore_asks_for_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_folder(tmp_path), tmp_path / "new"
    status, out, err = run(capsys, "import-agentscope", str(old), str(new))
    assert status == 1
    assert "copied" in out and "solo.json" in out
    assert "cannot split alice_chat_1.json: it may be ('', 'alice_chat_1'), ('alice', 'chat_1'), ('alice_chat', '1');" in err
    assert "--user-id USER (or --user-id '' if it has none)" in err


def test_an_existing_session_with_other_data_is_kept_unless_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_folder(tmp_path), tmp_path / "new"
    users = ["--user-id", "alice", "--user-id", "bob"]
    assert run(capsys, "import-agentscope", str(old), str(new), *users)[0] == 0
    memory = InMemoryMemory()
    JSONSession(new).save("solo", "", memory=memory)  # changed since the import
    status, _, err = run(capsys, "import-agentscope", str(old), str(new), *users)
    assert status == 1 and err == f"kept {new / 'solo.json'}: it exists (--overwrite replaces it)\n"
    assert _texts(new, "solo", "") == []
    assert run(capsys, "import-agentscope", str(old), str(new), *users, "--overwrite")[0] == 0
    assert _texts(new, "solo", "") == ["one"]
    assert _texts(new, "x", "bob") == ["three"]


def test_a_mixed_folder_is_imported_once_in_one_run_and_a_rerun_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_folder(tmp_path), tmp_path / "new"
    (old / "carol_notes.json").write_text(json.dumps({"memory": {"_compressed_summary": "", "content": []}}), encoding="utf-8")
    users = ["--user-id", "alice", "--user-id", "bob", "--user-id", ""]
    status, out, err = run(capsys, "import-agentscope", str(old), str(new), *users)
    assert (status, err) == (0, "")
    assert sorted(JSONSession(new).list_sessions("")) == ["carol_notes", "solo"]  # no name fits a user: no user
    assert JSONSession(new).list_sessions("alice") == ["chat_1"] and JSONSession(new).list_sessions("bob") == ["x"]
    files = sorted(str(p.relative_to(new)) for p in new.rglob("*.json"))
    assert files == ["@alice/chat_1.json", "@bob/x.json", "carol_notes.json", "solo.json"]  # each file once
    before = {p: p.read_bytes() for p in new.rglob("*") if p.is_file()}
    status, out, err = run(capsys, "import-agentscope", str(old), str(new), *users)
    assert (status, err) == (0, "")
    assert out.count("already there: ") == 4 and "copied" not in out
    assert {p: p.read_bytes() for p in new.rglob("*") if p.is_file()} == before


def test_a_users_empty_session_id_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    (old / "alice_.json").write_text(json.dumps({"memory": {"_compressed_summary": "", "content": []}}), encoding="utf-8")
    status, _, err = run(capsys, "import-agentscope", str(old), str(new), "--user-id", "alice")
    assert status == 1
    assert "as user 'alice', its session id is empty, which statekit cannot hold; --user-id '' imports it as session 'alice_'" in err
    assert run(capsys, "import-agentscope", str(old), str(new), "--user-id", "alice", "--user-id", "")[0] == 0
    assert JSONSession(new).list_sessions("") == ["alice_"]


def test_a_broken_file_is_reported_and_the_others_copied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_folder(tmp_path), tmp_path / "new"
    (old / "broken.json").write_text('{"memory": NaN}', encoding="utf-8")
    status, out, err = run(capsys, "import-agentscope", str(old), str(new), "--user-id", "alice", "--user-id", "bob")
    assert status == 1
    assert f"failed {old / 'broken.json'}:" in err
    assert _texts(new, "solo", "") == ["one"]


def test_a_missing_old_folder_fails_as_in_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "import-agentscope", str(tmp_path / "nope"), str(tmp_path / "new"))
    assert status == 1 and f"{tmp_path / 'nope'}: there is no such folder" in err
    assert status == run(capsys, "list", "--dir", str(tmp_path / "nope"))[0]
    assert not (tmp_path / "new").exists()


def test_validate_goes_through_an_overriding_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    standins = Path(__file__).parent / "agentscope_like.py"
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"memory": {"_compressed_summary": "", "content": []}}), encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"memory": {"content": [42]}}), encoding="utf-8")
    module = f"memory={standins}:InMemoryMemory"
    assert run(capsys, "validate", str(good), "--module", module)[0] == 0
    status, _, err = run(capsys, "validate", str(bad), "--module", module)
    assert status == 1
    assert "memory: InMemoryMemory.load_state_dict() raised ValueError: Invalid item format" in err


def test_a_name_whose_ids_statekit_refuses_is_reported_and_the_rest_copied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_folder(tmp_path), tmp_path / "new"
    (old / "v1..v2.json").write_text(json.dumps({"memory": {"content": []}}), encoding="utf-8")  # AgentScope writes ids as they are
    status, out, err = run(capsys, "import-agentscope", str(old), str(new), "--user-id", "alice", "--user-id", "bob")
    assert status == 1
    assert err.startswith(f"failed {old / 'v1..v2.json'}: ") and "'..'" in err
    assert f"copied {old / 'solo.json'}" in out and "4 session file(s)" in out
    assert _texts(new, "x", "bob") == ["three"]  # sorts after the refused name, copied all the same


def test_a_new_folder_that_is_a_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_folder(tmp_path), tmp_path / "new"
    new.write_text("not a folder", encoding="utf-8")
    status, out, err = run(capsys, "import-agentscope", str(old), str(new), "--user-id", "alice", "--user-id", "bob")
    assert (status, out) == (2, "")
    assert err.splitlines()[-1] == f"statekit import-agentscope: error: {new} is not a folder"
    assert new.read_text(encoding="utf-8") == "not a folder"


def test_replace_invalid_copies_what_python_wrote_and_json_cannot_hold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    message = Msg("u", "cut \ud83d", "user").to_dict()
    message["metadata"] = {"score": float("nan"), "top": float("inf"), "pair": "\ud83d\ude00"}
    with open(old / "odd.json", "w", encoding="utf-8", errors="surrogatepass") as file:  # as AgentScope's JSONSession
        file.write(json.dumps({"memory": {"_compressed_summary": "", "content": [[message, []]]}}, ensure_ascii=False))
    status, _, err = run(capsys, "import-agentscope", str(old), str(new))
    assert status == 1 and f"failed {old / 'odd.json'}: " in err and "--replace-invalid" in err
    status, out, err = run(capsys, "import-agentscope", str(old), str(new), "--replace-invalid")
    assert (status, err) == (0, "")
    assert f"replaced a lone surrogate at memory.content[0][0].content in {old / 'odd.json'} with U+FFFD" in out
    assert f"replaced NaN at memory.content[0][0].metadata.score in {old / 'odd.json'} with null" in out
    assert f"replaced Infinity at memory.content[0][0].metadata.top in {old / 'odd.json'} with null" in out
    assert f"joined a surrogate pair in halves at memory.content[0][0].metadata.pair in {old / 'odd.json'}" in out
    memory = InMemoryMemory()
    JSONSession(new).load("odd", "", allow_not_exist=False, memory=memory)
    loaded = memory.content[0][0]
    assert loaded.content == "cut \ufffd"
    assert loaded.metadata == {"score": None, "top": None, "pair": "😀"}  # a whole pair is joined, not replaced
    assert run(capsys, "import-agentscope", str(old), str(new), "--replace-invalid")[1].count("already there") == 1
