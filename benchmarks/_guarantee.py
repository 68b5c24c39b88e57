"""The guarantee-equivalent floor: what statekit's JSONSession promises, written out by hand for the benchmark agent.

The no-copy floor (:func:`_agents.floor_document`) checks nothing. This one does
the same work as a JSON session save and load of :class:`_agents.Agent` and keeps
every promise of it, with nothing general about it:

- **save**: the document built from the live objects (no copy), each typed field
  checked by its exact type (``type(x) is str``: no subclass, no enum), the
  values under ``Any`` (message blocks and metadata) collected and checked level
  by level in C (exact JSON types, dict keys included, finite floats, at most
  ``MAX_DEPTH`` levels), then ``orjson.dumps`` with statekit's options (which
  refuses integers beyond 64 bits, non-string keys, bytes, objects): the same
  bytes as statekit. Then, in a thread (the event loop never waits on the disk):
  ``lstat`` of the file (no link, a regular file), the session's ``flock`` on
  ``.<name>.lock`` (as :mod:`statekit.session._filelock` takes it: opened with
  ``O_NOFOLLOW``, checked to still be the file locked, removed before release),
  the lease record's fence (``.<name>.lease``, absent here), the revision compare
  (the bytes last written, read whole; past 32 MiB their SHA-1, hashed a chunk
  at a time), the atomic, durable replace (temp file, ``fsync``, rename,
  ``fsync`` of the folder), and the new revision remembered.
- **load**: read in a thread (``O_NOFOLLOW``, a regular file with one link),
  decode with msgspec into mirror structs of the agent (``forbid_unknown_fields``,
  strict types: unknown or missing keys and wrong types refused), the blocks'
  depth checked, direct constructors over the fresh data (no copy); the bytes
  remembered as the revision.

It refuses the same bad values as statekit (``ValueError`` instead of
``StateDumpError``; tests/test_benchmarks.py pins both, and the bytes).
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import hashlib
import math
import os
import stat
from itertools import compress, repeat
from operator import attrgetter, is_
from pathlib import Path
from typing import Any, Literal

import msgspec
import orjson
from _agents import Agent, Msg

from statekit._limits import MAX_DEPTH

OPTIONS = (
    orjson.OPT_INDENT_2
    | orjson.OPT_APPEND_NEWLINE
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
META = {"format": 1}
MEMORY_BYTES = 32 * 2**20
"""Past this many bytes, the revision kept is the SHA-1 of the bytes, as statekit keeps it."""

_JSON: frozenset[type] = frozenset((str, int, bool, type(None), dict, list))
_WITH_FLOAT = _JSON | {float}
_SCALARS: frozenset[type] = frozenset((str, int, bool, type(None), float))
_BLOCK_LEVEL = 6
"""The level of a message's ``content`` list or ``metadata`` dict in the document (the document is level 1)."""
_MSG: frozenset[type] = frozenset((Msg,))
_STR: frozenset[type] = frozenset((str,))
_DICT: frozenset[type] = frozenset((dict,))
_BODY: frozenset[type] = frozenset((str, list))
_METADATA: frozenset[type] = frozenset((dict, type(None)))
_STR_FIELDS = tuple(map(attrgetter, ("id", "name", "role", "timestamp")))
_BODY_OF, _META_OF = attrgetter("content"), attrgetter("metadata")
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LOCK = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


def refuse(what: str) -> ValueError:
    """The floor's refusal (statekit raises ``StateDumpError`` / ``StateLoadError`` with the path)."""
    return ValueError(what)


def blocks_fine(values: list[Any]) -> bool:
    """Whether every value is JSON data statekit writes (see the module docstring); checked level by level in C,
    1,024 values at a time (a large save's levels no longer fit the CPU caches)."""
    return all(_fine(values[start : start + 1024]) for start in range(0, len(values), 1024))


def _fine(values: list[Any]) -> bool:
    level = values
    for _ in range(MAX_DEPTH - _BLOCK_LEVEL + 1):  # the levels containers may sit at
        if not level:
            return True
        if not _JSON.issuperset(map(type, level)) and not _finite(level, _WITH_FLOAT):
            return False
        level = gc.get_referents(*level)
    return _finite(level, _SCALARS)  # one level below MAX_DEPTH: scalars only


def _finite(level: list[Any], kinds: frozenset[type]) -> bool:
    return kinds.issuperset(map(type, level)) and all(math.isfinite(v) for v in level if type(v) is float)


def document(agent: Agent) -> tuple[dict[str, Any], list[Any]]:
    """The session document of ``agent`` (sharing its containers) and its values under ``Any``.

    Each typed field is checked over 1,024 messages at a time in C
    (``issuperset`` over the exact types; a chunk stays in the CPU caches for
    the dict literals that follow): no Python call per message.

    Raises:
        ValueError: A typed field holds a value of another type.
    """
    content = agent.memory.content
    if type(content) is not list:
        raise refuse("memory.content is not a list")
    messages: list[dict[str, Any]] = []
    blobs: list[Any] = []
    for start in range(0, len(content), 1024):
        chunk = content[start : start + 1024]
        blobs += _checked_chunk(chunk)
        messages += [
            {"id": m.id, "name": m.name, "role": m.role, "content": m.content, "metadata": m.metadata, "timestamp": m.timestamp}
            for m in chunk
        ]
    groups = agent.active_groups
    if type(agent.name) is not str or type(agent.sys_prompt) is not str or type(groups) is not list:
        raise refuse("name, sys_prompt or active_groups has the wrong type")
    if not _STR.issuperset(map(type, groups)):
        raise refuse("an active group is not a str")
    state = {"name": agent.name, "sys_prompt": agent.sys_prompt, "memory": {"content": messages}, "active_groups": groups}
    return {"__statekit__": META, "agent": state}, blobs


def _checked_chunk(chunk: list[Msg]) -> list[Any]:
    """Check the typed fields of some messages; their values under ``Any`` (content lists and metadata dicts)."""
    if not _MSG.issuperset(map(type, chunk)):
        raise refuse("a message is not a Msg")
    for field in _STR_FIELDS:
        if not _STR.issuperset(map(type, map(field, chunk))):
            raise refuse("a message's id, name, role or timestamp is not a str")
    bodies, metas = list(map(_BODY_OF, chunk)), list(map(_META_OF, chunk))
    if not _BODY.issuperset(map(type, bodies)) or not _METADATA.issuperset(map(type, metas)):
        raise refuse("a message's content or metadata has the wrong type")
    lists = list(compress(bodies, map(is_, map(type, bodies), repeat(list))))
    if not _DICT.issuperset(map(type, gc.get_referents(*lists))):
        raise refuse("a content block is not a dict")
    lists += compress(metas, metas)  # the metadata dicts (an empty one holds nothing to check)
    return lists


def encode(agent: Agent) -> bytes:
    """The bytes statekit writes for ``agent``, or ``ValueError`` for what it refuses."""
    gc.disable()  # as statekit's save: no collection over the objects it has just built
    try:
        doc, blobs = document(agent)
        if not blocks_fine(blobs):
            raise refuse("a value under Any is not JSON data (or nests too deep)")
        try:
            return orjson.dumps(doc, option=OPTIONS)
        except orjson.JSONEncodeError as err:
            raise refuse(str(err)) from None
    finally:
        gc.enable()


class GuaranteeFloor:
    """One session file saved and loaded with statekit's guarantees, by hand.

    Args:
        path: The session file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = path.with_name(f".{path.name}.lock")
        self.lease = path.with_name(f".{path.name}.lease")
        self.temp = path.with_name(f".{path.name}.tmp")
        self.revision: bytes | str | None = None  # the bytes last seen, or their SHA-1 past MEMORY_BYTES

    async def asave(self, agent: Agent) -> None:
        """Encode on the loop, write in a thread.

        Raises:
            ValueError: A value statekit refuses; or another writer changed the file.
        """
        data = encode(agent)
        await asyncio.to_thread(self._write, data)

    def _write(self, data: bytes) -> None:
        self._check_path()
        fd = self._locked()
        try:
            self._fence()
            if not self._holds():
                raise refuse(f"{self.path} was changed by another writer")
            self._replace(data)
        finally:
            os.unlink(self.lock)
            os.close(fd)
        self.revision = data if len(data) <= MEMORY_BYTES else hashlib.sha1(data, usedforsecurity=False).hexdigest()

    def _check_path(self) -> None:
        try:
            status = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
            raise refuse(f"{self.path} is a link or not a regular file")

    def _locked(self) -> int:
        while True:
            try:
                fd = os.open(self.lock, _LOCK, 0o600)
            except FileNotFoundError:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                continue
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.path.samestat(os.fstat(fd), os.stat(self.lock, follow_symlinks=False)):
                    return fd
            except FileNotFoundError:
                pass
            os.close(fd)

    def _fence(self) -> None:
        try:
            fd = os.open(self.lease, _READ)
        except FileNotFoundError:
            return  # never leased: any writer may write
        os.close(fd)
        raise refuse("the benchmark's sessions are not leased")

    def _holds(self) -> bool:
        try:
            fd = os.open(self.path, _READ)
        except FileNotFoundError:
            return self.revision is None
        with open(fd, "rb") as file:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
                raise refuse(f"{self.path} is not a regular file")
            if type(self.revision) is bytes:
                return status.st_size == len(self.revision) and file.read() == self.revision
            if self.revision is None:
                return False
            digest = hashlib.sha1(usedforsecurity=False)
            buffer = bytearray(1 << 18)
            view = memoryview(buffer)
            while count := file.readinto(buffer):
                digest.update(view[:count])
            return digest.hexdigest() == self.revision

    def _replace(self, data: bytes) -> None:
        fd = os.open(self.temp, _TEMP, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self.temp, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    async def aload(self, agent: Agent) -> None:
        """Read in a thread, decode and check on the loop, set the fields.

        Raises:
            ValueError: The file is not a session of this agent (unknown or missing keys, wrong types, too deep).
        """
        raw = await asyncio.to_thread(self._read)
        gc.disable()
        try:
            state = _checked(raw)
            agent.memory.content = [
                Msg(m.id, m.name, m.role, m.content, m.metadata, m.timestamp) for m in state.memory.content
            ]
        finally:
            gc.enable()
        agent.name, agent.sys_prompt, agent.active_groups = state.name, state.sys_prompt, state.active_groups
        self.revision = raw if len(raw) <= MEMORY_BYTES else hashlib.sha1(raw, usedforsecurity=False).hexdigest()

    def _read(self) -> bytes:
        fd = os.open(self.path, _READ)
        with open(fd, "rb") as file:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
                raise refuse(f"{self.path} is not a regular file")
            return file.read()


class _Msg(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    name: str
    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] | None
    timestamp: str


class _Memory(msgspec.Struct, forbid_unknown_fields=True):
    content: list[_Msg]


class _State(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    sys_prompt: str
    memory: _Memory
    active_groups: list[str]


class _Meta(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal[1]


class _Document(msgspec.Struct, forbid_unknown_fields=True):
    meta: _Meta = msgspec.field(name="__statekit__")
    agent: _State | None = None


_DECODER = msgspec.json.Decoder(_Document)


def _checked(raw: bytes) -> _State:
    """The agent's state of a session file: every key and type checked by msgspec, the blocks' depth by hand."""
    try:
        doc = _DECODER.decode(raw)
    except msgspec.ValidationError as err:
        raise refuse(f"not a session of the agent: {err}") from None
    if doc.agent is None:
        raise refuse("no agent in the session")
    blobs: list[Any] = [m.content for m in doc.agent.memory.content if type(m.content) is list]
    blobs += [m.metadata for m in doc.agent.memory.content if m.metadata is not None]
    if not blocks_fine(blobs):
        raise refuse("a value nests too deep")
    return doc.agent
