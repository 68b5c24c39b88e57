"""Data AgentScope 1.0.21 wrote opens unchanged: its JSON file names and format
(``layout="agentscope"``) and its Redis values (issue 10)."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from agentscope_like import InMemoryMemory, Msg, ReActAgent, Toolkit
from agentscope_like import DashScopeChatFormatter, DashScopeChatModel
from statekit import JSONSession, StateModule
from statekit.errors import DocumentError, InvalidSessionIdError, SessionError
from statekit.session.redis import RedisSession

TEXT = "héllo 😀 — 你好"


def _agent() -> ReActAgent:
    return ReActAgent("Friday", "You are helpful.", DashScopeChatModel("qwen-max"), DashScopeChatFormatter(), Toolkit())


def _agentscope_document() -> dict[str, Any]:
    """What AgentScope 1.0.21's ReActAgent.state_dict() holds after one message."""
    message = {"id": "m1", "name": "user", "role": "user", "content": TEXT, "metadata": {}, "timestamp": "2025-01-01 10:00:00.000"}
    return {
        "agent": {
            "memory": {"_compressed_summary": "", "content": [[message, ["hint"]]]},
            "toolkit": {"active_groups": []},
            "name": "Friday",
            "_sys_prompt": "You are helpful.",
        }
    }


def _write_as_agentscope(folder: Path, name: str, states: dict[str, Any]) -> Path:
    """AgentScope's JSONSession.save_session_state: json.dumps(ensure_ascii=False), UTF-8."""
    path = folder / name
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as file:
        file.write(json.dumps(states, ensure_ascii=False))
    return path


def _read_as_agentscope(path: Path, **modules: StateModule) -> None:
    """AgentScope's JSONSession.load_session_state."""
    with open(path, encoding="utf-8", errors="surrogatepass") as file:
        states = json.loads(file.read())
    for name, module in modules.items():
        if name in states:
            module.load_state_dict(states[name])


@pytest.mark.parametrize(("user_id", "session_id", "name"), [("Alice", "Chat_1", "Alice_Chat_1.json"), ("", "Chat 1", "Chat 1.json")])
def test_agentscope_files_round_trip_under_their_own_names(tmp_path: Path, user_id: str, session_id: str, name: str) -> None:
    old = _write_as_agentscope(tmp_path, name, _agentscope_document())
    session = JSONSession(tmp_path, layout="agentscope")
    assert session.session_path(session_id, user_id) == old

    agent = _agent()
    session.load(session_id, user_id, allow_not_exist=False, agent=agent)
    assert [(m.content, marks) for m, marks in agent.memory.content] == [(TEXT, ["hint"])]
    assert agent.name == "Friday"

    agent.name = "Saturday"
    session.save(session_id, user_id, agent=agent)
    assert sorted(os.listdir(tmp_path)) == [name]  # same file, no temporary left behind
    assert TEXT in old.read_text(encoding="utf-8")  # non-ASCII kept as is, as AgentScope writes it

    back = _agent()
    _read_as_agentscope(old, agent=back)  # AgentScope reads statekit's file
    assert back.name == "Saturday"
    assert [(m.content, marks) for m, marks in back.memory.content] == [(TEXT, ["hint"])]


@pytest.mark.parametrize(("user_id", "session_id", "name"), [("Alice", "Chat_1", "Alice_Chat_1.json"), ("", "Chat", "Chat.json")])
def test_the_statekit_layout_names_an_agentscope_file_instead_of_starting_fresh(
    tmp_path: Path, user_id: str, session_id: str, name: str
) -> None:
    _write_as_agentscope(tmp_path, name, _agentscope_document())
    session = JSONSession(tmp_path)
    assert not session.exists(session_id, user_id)
    with pytest.raises(SessionError, match=f"{name} looks like AgentScope 1.x's file of this session"):
        session.load(session_id, user_id, allow_not_exist=True, agent=_agent())
    assert JSONSession(tmp_path, layout="agentscope").exists(session_id, user_id)


def test_a_statekit_session_under_the_legacy_name_is_not_taken_for_agentscope_s(tmp_path: Path) -> None:
    session = JSONSession(tmp_path)
    session.save("alice_chat_1", "", agent=_agent())  # statekit's session of no user, file alice_chat_1.json
    assert session.load("chat_1", "alice", agent=_agent()) == {}


@pytest.mark.parametrize(
    ("user_id", "session_id", "words"),
    [
        ("", "../escape", "holds a path separator"),
        ("a/b", "s", "holds a path separator"),
        ("a", "b\\c", "holds a path separator"),
        ("", "..", "holds '..'"),
        ("", "C:evil", "starts with a drive"),
        ("", ".hidden", "hidden file"),
        ("", "x\x00y", "NUL"),
        ("x" * 60, "é" * 100, "over 246 bytes"),
        ("", "é" * 121, "over 246 bytes"),  # 247 bytes with .json: .NAME.log.old would not fit in 255
    ],
)
def test_unsafe_ids_are_refused_and_nothing_is_written(tmp_path: Path, user_id: str, session_id: str, words: str) -> None:
    session = JSONSession(tmp_path / "sessions", layout="agentscope")
    with pytest.raises(InvalidSessionIdError, match=words):
        session.save(session_id, user_id, agent=_agent())
    with pytest.raises(InvalidSessionIdError):
        session.load(session_id, user_id, agent=_agent())
    assert list(tmp_path.rglob("*")) == []


def test_the_longest_file_name_leaves_room_for_the_files_beside_it(tmp_path: Path) -> None:
    session = JSONSession(tmp_path, layout="agentscope")
    session_id = "a" + "é" * 120  # 241 bytes, 246 with .json
    agent = _agent()
    session.save(session_id, "", agent=agent)
    session.save(session_id, "", agent=agent)  # a conditional save: the lock and temporary files
    assert session.load(session_id, "", allow_not_exist=False, agent=_agent())
    assert len(session.session_path(session_id, "").name.encode()) == 246


@pytest.mark.parametrize("allow_not_exist", [True, False])
def test_another_case_of_the_name_is_an_error_not_a_fresh_start(tmp_path: Path, allow_not_exist: bool) -> None:
    _write_as_agentscope(tmp_path, "Alice_s.json", _agentscope_document())
    session = JSONSession(tmp_path, layout="agentscope")
    with pytest.raises(SessionError, match="Alice_s.json exists: ids are case-sensitive"):
        session.load("s", "alice", allow_not_exist=allow_not_exist, agent=_agent())


def test_listing_goes_by_name(tmp_path: Path) -> None:
    for name in ("alice_s1.json", "alice_s_2.json", "bob_s1.json", "solo.json", "notes.txt", ".alice_s9.json"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    session = JSONSession(tmp_path, layout="agentscope")
    assert session.list_sessions("alice") == ["s1", "s_2"]
    assert session.list_sessions() == ["alice_s1", "alice_s_2", "bob_s1", "solo"]


def test_legacy_names_collide_as_in_agentscope(tmp_path: Path) -> None:
    session = JSONSession(tmp_path, layout="agentscope")
    assert session.session_path("c", "a_b") == session.session_path("b_c", "a") == tmp_path / "a_b_c.json"


def test_an_unknown_layout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="layout must be one of 'statekit', 'agentscope'"):
        JSONSession(tmp_path, layout="flat")  # type: ignore[arg-type]


async def test_a_redis_value_agentscope_wrote_loads_with_the_defaults() -> None:
    server = fakeredis.FakeServer()
    client = fakeredis.aioredis.FakeRedis(server=server)
    value = json.dumps(_agentscope_document(), ensure_ascii=False)
    await client.set("myapp:user_id:default_user:session:chat-1:state", value)
    async with RedisSession(client=client, key_prefix="myapp:") as session:
        agent = _agent()
        await session.aload("chat-1", allow_not_exist=False, agent=agent)
        assert session.session_key("a:b", "u:v") == "myapp:user_id:u%3Av:session:a%3Ab:state"
    assert [(m.content, marks) for m, marks in agent.memory.content] == [(TEXT, ["hint"])]
    await client.aclose()


def test_memory_written_by_agentscope_keeps_its_pairs(tmp_path: Path) -> None:
    memory = InMemoryMemory()
    _write_as_agentscope(tmp_path, "m.json", {"memory": {"_compressed_summary": "sum", "content": [[Msg("a", "x", "user").to_dict(), []]]}})
    JSONSession(tmp_path, layout="agentscope").load("m", memory=memory)
    assert memory._compressed_summary == "sum" and len(memory.content) == 1


def test_the_agentscope_layout_writes_append_only_lists_whole(tmp_path: Path) -> None:
    from append_models import Memory
    from append_models import Msg as Line

    memory = Memory()
    with JSONSession(tmp_path, layout="agentscope") as session:
        for text in ("one", "two", "three"):
            memory.content.append(Line("user", text))
            session.save("c", "alice", memory=memory)  # in statekit's layout, the later saves append deltas
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice_c.json"]  # AgentScope 1.x reads this file alone
    stored = json.loads((tmp_path / "alice_c.json").read_text(encoding="utf-8"))
    assert [m["text"] for m in stored["memory"]["content"]] == ["one", "two", "three"]


# -- files AgentScope 1.x wrote that JSON does not hold, and their modes (issue 24) ------


def _agentscope_message(**metadata: Any) -> dict[str, Any]:
    message = {"id": "m1", "name": "user", "role": "user", "content": "hi", "metadata": metadata, "timestamp": "t"}
    return {"memory": {"_compressed_summary": "", "content": [[message, []]]}}


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused_with_their_path_and_a_way_out(tmp_path: Path, number: float) -> None:
    path = _write_as_agentscope(tmp_path, "alice_s.json", _agentscope_message(score=number, other=number))
    before = path.read_bytes()
    with pytest.raises(DocumentError) as caught:
        JSONSession(tmp_path, layout="agentscope").load("s", "alice", memory=InMemoryMemory())
    what = {math.nan: "NaN", math.inf: "Infinity", -math.inf: "-Infinity"}[number]
    assert caught.value.reason.startswith(f"invalid JSON: {what} at memory.content[0][0].metadata.score: JSON has no NaN or Infinity")
    assert "(1 more such value(s) after it)" in caught.value.reason
    assert "statekit import-agentscope --replace-invalid" in caught.value.reason
    assert (caught.value.source, caught.value.line) == (str(path), 1)
    assert path.read_bytes() == before


def test_a_lone_surrogate_is_refused_with_its_path_and_a_way_out(tmp_path: Path) -> None:
    document = _agentscope_document()
    document["agent"]["memory"]["_compressed_summary"] = "cut \ud83d"
    path = _write_as_agentscope(tmp_path, "s.json", document)
    with pytest.raises(DocumentError) as caught:
        JSONSession(tmp_path, layout="agentscope").load("s", agent=_agent())
    assert caught.value.reason.startswith("invalid JSON: a lone surrogate at agent.memory._compressed_summary: UTF-8 cannot hold it")
    assert "U+FFFD" in caught.value.reason and caught.value.source == str(path)


def test_an_empty_session_id_of_a_user_says_how_to_open_its_file(tmp_path: Path) -> None:
    _write_as_agentscope(tmp_path, "alice_.json", _agentscope_document())
    session = JSONSession(tmp_path, layout="agentscope")
    with pytest.raises(InvalidSessionIdError, match="AgentScope's file alice_.json of user 'alice' opens as session 'alice_' of no user"):
        session.load("", "alice", agent=_agent())
    agent = _agent()
    session.load("alice_", "", allow_not_exist=False, agent=agent)
    assert [m.content for m, _ in agent.memory.content] == [TEXT]


def test_a_rewrite_keeps_the_files_mode_and_a_new_file_gets_the_default(tmp_path: Path) -> None:
    path = _write_as_agentscope(tmp_path, "alice_s.json", _agentscope_document())
    os.chmod(path, 0o644)
    session = JSONSession(tmp_path, layout="agentscope")
    agent = _agent()
    session.load("s", "alice", allow_not_exist=False, agent=agent)
    session.save("s", "alice", agent=agent)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert "__statekit__" in path.read_text(encoding="utf-8")  # it was rewritten
    session.save("new", "alice", agent=agent)
    assert stat.S_IMODE((tmp_path / "alice_new.json").stat().st_mode) == 0o600
    os.chmod(path, 0o640)
    session.save("s", "alice", agent=agent)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
