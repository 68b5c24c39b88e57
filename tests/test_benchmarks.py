"""The guarantee-equivalent floor of benchmarks/_guarantee.py does what statekit does (issue 27).

Its figures are only a floor if it keeps statekit's promises: it must write the
same bytes as ``JSONSession``, refuse every bad value statekit refuses (leaving
the file as it was), refuse unknown keys on load, and refuse a file another
writer changed.
"""

from __future__ import annotations

import asyncio
import enum
import math
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _agents import Agent, Msg, make_agent  # noqa: E402
from _guarantee import GuaranteeFloor  # noqa: E402

from statekit.errors import StateDumpError  # noqa: E402
from statekit.session import JSONSession  # noqa: E402


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    pass


class Mapping(dict[str, Any]):
    pass


def _nested(levels: int, inner: Any = 0) -> Any:
    value: Any = inner
    for _ in range(levels):
        value = [value]
    return value


def _blocks(value: Any) -> Callable[[Agent], None]:
    """Put ``value`` deep in a message's content blocks."""

    def put(agent: Agent) -> None:
        agent.memory.content[1].content = [{"type": "text", "text": "x", "extra": {"deep": [value]}}]

    return put


def _metadata(value: Any) -> Callable[[Agent], None]:
    def put(agent: Agent) -> None:
        agent.memory.content[2].metadata = {"turn": value}

    return put


def _set(field: str, value: Any, index: int = 3) -> Callable[[Agent], None]:
    def put(agent: Agent) -> None:
        setattr(agent.memory.content[index], field, value)

    return put


def _groups(value: Any) -> Callable[[Agent], None]:
    def put(agent: Agent) -> None:
        agent.active_groups = value

    return put


BAD: dict[str, Callable[[Agent], None]] = {
    "tuple under Any": _metadata((1, 2)),
    "NaN": _metadata(math.nan),
    "deep inf": _blocks({"a": [{"b": -math.inf}]}),
    "IntEnum": _metadata(Color.RED),
    "UUID": _blocks(uuid.UUID(int=7)),
    "str subclass under Any": _blocks(Text("x")),
    "str subclass in a str field": _set("role", Text("user")),
    "dict subclass": _metadata(Mapping(a=1)),
    "int key": _blocks({1: "one"}),
    "2**70": _metadata(2**70),
    "too deep": _metadata(_nested(200)),
    "one level too deep": _metadata(_nested(195)),
    "an empty list one level too deep": _metadata(_nested(194, [])),
    "bytes": _blocks(b"raw"),
    "set": _metadata({1, 2}),
    "tuple of groups": _groups(("web", "files")),
    "int in a str field": _set("id", 7),
    "None in a str field": _set("timestamp", None),
    "object under Any": _blocks(object()),
    "str key subclass": _metadata({Text("k"): 1}),
}


def _save_both(tmp_path: Path, agent: Agent) -> tuple[bytes, bytes]:
    floor = GuaranteeFloor(tmp_path / "floor" / "bench.json")
    session = JSONSession(tmp_path / "statekit")
    asyncio.run(floor.asave(agent))
    asyncio.run(session.asave("bench", agent=agent))
    return (tmp_path / "floor" / "bench.json").read_bytes(), (tmp_path / "statekit" / "bench.json").read_bytes()


@pytest.mark.parametrize("messages", [0, 1, 50])
def test_the_floor_writes_statekits_bytes(tmp_path: Path, messages: int) -> None:
    floor, statekit = _save_both(tmp_path, make_agent(messages))
    assert floor == statekit


def test_the_floor_keeps_the_depth_statekit_allows(tmp_path: Path) -> None:
    agent = make_agent(3)
    agent.memory.content[2].metadata = {"turn": _nested(194)}  # the deepest a message's metadata may nest
    floor, statekit = _save_both(tmp_path, agent)
    assert floor == statekit


@pytest.mark.parametrize("name", list(BAD))
def test_the_floor_refuses_what_statekit_refuses(tmp_path: Path, name: str) -> None:
    agent = make_agent(5)
    floor = GuaranteeFloor(tmp_path / "floor.json")
    session = JSONSession(tmp_path)
    asyncio.run(floor.asave(agent))
    asyncio.run(session.asave("bench", agent=agent))
    before = (tmp_path / "floor.json").read_bytes(), (tmp_path / "bench.json").read_bytes()
    BAD[name](agent)
    with pytest.raises(ValueError, match=r"."):
        asyncio.run(floor.asave(agent))
    with pytest.raises(StateDumpError):
        asyncio.run(session.asave("bench", agent=agent))
    assert ((tmp_path / "floor.json").read_bytes(), (tmp_path / "bench.json").read_bytes()) == before


def test_the_floor_refuses_unknown_keys_on_load(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    asyncio.run(GuaranteeFloor(path).asave(make_agent(3)))
    path.write_bytes(path.read_bytes().replace(b'"role"', b'"rolle"', 1))
    with pytest.raises(ValueError, match="unknown field"):
        asyncio.run(GuaranteeFloor(path).aload(make_agent(0)))


def test_the_floor_loads_what_it_saved(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    asyncio.run(GuaranteeFloor(path).asave(make_agent(20)))
    agent = make_agent(0)
    asyncio.run(GuaranteeFloor(path).aload(agent))
    assert agent.memory.content == make_agent(20).memory.content
    assert all(type(m) is Msg for m in agent.memory.content)


def test_the_floor_refuses_a_file_another_writer_changed(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    floor = GuaranteeFloor(path)
    asyncio.run(floor.asave(make_agent(3)))
    path.write_bytes(path.read_bytes().replace(b"Friday", b"Monday", 1))
    changed = path.read_bytes()
    with pytest.raises(ValueError, match="changed by another writer"):
        asyncio.run(floor.asave(make_agent(3)))
    assert path.read_bytes() == changed
