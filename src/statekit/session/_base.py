"""``SessionBase``: the semantics every backend shares, on a few storage primitives.

A backend stores opaque bytes under a :class:`SessionKey` and implements five
async primitives (``_read``, ``_write``, ``_delete``, ``_list`` and, optionally,
``_exists``). Everything else lives here, once: id checks, the document format,
dumping and loading the modules all or nothing, error positions, the
synchronous twins and closing.
"""

from __future__ import annotations

import abc
import asyncio
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

import attrs

from statekit._module import LoadResult, StateModule, check_modules, dump_many, load_many
from statekit.codecs import JSON, Codec, with_document_positions
from statekit.errors import (
    DocumentError,
    InvalidSessionIdError,
    SessionError,
    SessionNotFoundError,
    StateLoadError,
)
from statekit.session._sync import Portal, loop_running, refuse_inside_loop

T = TypeVar("T")

META_KEY = "__statekit__"
"""The reserved top-level key of a session document; no module may use it."""

FORMAT_VERSION = 1
"""The version of the session document this statekit writes (and reads up to)."""

MAX_ID_LENGTH = 200
"""The longest ``session_id`` or ``user_id``, in characters."""

_PORTAL_LOCK = threading.Lock()


@attrs.frozen
class SessionKey:
    """Which session: checked ids, ready for a backend to map to its storage.

    Attributes:
        user_id: The owner; ``""`` for "no particular user".
        session_id: The session, never empty.
    """

    user_id: str
    session_id: str


def check_id(value: object, what: str, *, allow_empty: bool = False) -> str:
    """Check a ``session_id`` or ``user_id``.

    Args:
        value: The id given by the caller.
        what: ``"session_id"`` or ``"user_id"``, for the message.
        allow_empty: Whether ``""`` is allowed (it is for ``user_id``).

    Returns:
        The id, unchanged.

    Raises:
        InvalidSessionIdError: Not a ``str``, empty, longer than
            :data:`MAX_ID_LENGTH`, or holding NUL or a lone surrogate.
    """
    if not isinstance(value, str):
        raise InvalidSessionIdError(f"{what} must be a str, not {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidSessionIdError(f"{what} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidSessionIdError(f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    if "\x00" in value:
        raise InvalidSessionIdError(f"{what} {value!r} contains a NUL character")
    if not value.isascii():
        _check_utf8(value, what)
    return value


def _check_utf8(value: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidSessionIdError(f"{what} {value!r} contains a lone surrogate") from None


def _check_names(modules: Mapping[str, object]) -> None:
    check_modules(modules)
    if META_KEY in modules:
        raise SessionError(f"{META_KEY!r} is reserved for statekit's own metadata; give the module another name")


class SessionBase(abc.ABC):
    """A place where sessions (named sets of state modules) are saved and loaded.

    Every method has an async form (``asave``...) and a blocking twin
    (``save``...) for plain scripts; ``save_session_state`` and
    ``load_session_state`` are the async forms under their reference names.

    Backend authors implement ``_read``, ``_write``, ``_delete`` and ``_list``
    (and may override ``_exists``, ``_close``, ``_source`` and ``_check_key``);
    ``statekit.testing`` checks that a backend keeps the contract.

    Attributes:
        codec: How documents become bytes (pretty JSON unless a backend says otherwise).
        offload_codec: Encode and decode in a worker thread, so that big
            sessions do not block the event loop (file backends).
        default_user_id: The ``user_id`` of every method called with
            ``user_id=None`` (``""`` here and for files, ``"default_user"``
            for Redis, as in the reference).
    """

    codec: ClassVar[Codec] = JSON
    offload_codec: ClassVar[bool] = False
    default_user_id: ClassVar[str] = ""
    _portal: Portal | None = None

    # -- the storage primitives a backend implements -------------------------------

    @abc.abstractmethod
    async def _read(self, key: SessionKey) -> bytes | None:
        """The stored bytes, or ``None`` when there is no such session."""

    @abc.abstractmethod
    async def _write(self, key: SessionKey, data: bytes) -> None:
        """Replace the stored bytes, atomically: a reader sees old or new, whole."""

    @abc.abstractmethod
    async def _delete(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` when there was one."""

    @abc.abstractmethod
    async def _list(self, user_id: str) -> list[str]:
        """The session ids stored for ``user_id``, in any order."""

    async def _exists(self, key: SessionKey) -> bool:
        """Whether the session exists (override when a cheaper test exists)."""
        return await self._read(key) is not None

    async def _close(self) -> None:
        """Release what the backend opened (nothing by default)."""

    def _source(self, key: SessionKey) -> str:
        """How error messages name the stored session (a file name, a key)."""
        return f"session {key.session_id!r} of user {key.user_id!r}"

    def _check_key(self, key: SessionKey) -> None:
        """Refuse ids the storage cannot hold (e.g. too long for a file name)."""

    # -- async API -------------------------------------------------------------------

    async def asave(self, session_id: str, user_id: str | None = None, **modules: StateModule) -> None:
        """Save modules as one session document, replacing what was stored.

        Args:
            session_id: The session.
            user_id: Its owner; ``None`` means :attr:`default_user_id`.
            **modules: The modules, by the names they are saved (and loaded) under.

        Raises:
            InvalidSessionIdError: An id is empty, too long or holds NUL.
            StateDumpError: A module's state is not JSON data; nothing was written.
        """
        key = self.key(session_id, user_id)
        _check_names(modules)
        document = {META_KEY: {"format": FORMAT_VERSION}, **dump_many(modules)}
        await self._write(key, await self._run_codec(self.codec.dumps, document))

    async def aload(
        self,
        session_id: str,
        user_id: str | None = None,
        allow_not_exist: bool = True,
        strict: bool = True,
        **modules: StateModule,
    ) -> dict[str, LoadResult]:
        """Load modules from a saved session, all or nothing.

        Args:
            session_id: The session.
            user_id: Its owner; ``None`` means :attr:`default_user_id`.
            allow_not_exist: When the session does not exist, do nothing (else raise).
            strict: Require every state key and reject unknown ones.
            **modules: The modules to load, by the names they were saved under.

        Returns:
            What each module's load left alone (empty when the session is missing).

        Raises:
            SessionNotFoundError: No such session and ``allow_not_exist`` is false.
            DocumentError: The stored bytes are not a session document.
            StateLoadError: Every problem, with its line in the document; no
                module was changed.
        """
        key = self.key(session_id, user_id)
        _check_names(modules)
        raw = await self._read(key)
        if raw is None:
            if allow_not_exist:
                return {}
            raise SessionNotFoundError(f"no {self._source(key)}")
        document = await self._decode(raw, key)
        try:
            return load_many(modules, document, strict=strict)
        except StateLoadError as err:
            raise with_document_positions(err, raw, self._source(key), self.codec) from None

    save_session_state = asave
    """The reference name of :meth:`asave`."""

    load_session_state = aload
    """The reference name of :meth:`aload`."""

    async def alist_sessions(self, user_id: str | None = None) -> list[str]:
        """The ids of ``user_id``'s sessions, sorted."""
        return sorted(await self._list(check_id(self._user(user_id), "user_id", allow_empty=True)))

    async def aexists(self, session_id: str, user_id: str | None = None) -> bool:
        """Whether the session exists."""
        return await self._exists(self.key(session_id, user_id))

    async def adelete(self, session_id: str, user_id: str | None = None) -> bool:
        """Delete the session; ``True`` when there was one to delete."""
        return await self._delete(self.key(session_id, user_id))

    async def aclose(self) -> None:
        """Release connections and the like (a session is not usable afterwards)."""
        await self._close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- blocking twins ----------------------------------------------------------------

    def save(self, session_id: str, user_id: str | None = None, **modules: StateModule) -> None:
        """Blocking :meth:`asave`, for code that runs no event loop."""
        self._block("save", lambda: self.asave(session_id, user_id, **modules))

    def load(
        self,
        session_id: str,
        user_id: str | None = None,
        allow_not_exist: bool = True,
        strict: bool = True,
        **modules: StateModule,
    ) -> dict[str, LoadResult]:
        """Blocking :meth:`aload`, for code that runs no event loop."""
        return self._block("load", lambda: self.aload(session_id, user_id, allow_not_exist, strict, **modules))

    def list_sessions(self, user_id: str | None = None) -> list[str]:
        """Blocking :meth:`alist_sessions`."""
        return self._block("list_sessions", lambda: self.alist_sessions(user_id))

    def exists(self, session_id: str, user_id: str | None = None) -> bool:
        """Blocking :meth:`aexists`."""
        return self._block("exists", lambda: self.aexists(session_id, user_id))

    def delete(self, session_id: str, user_id: str | None = None) -> bool:
        """Blocking :meth:`adelete`."""
        return self._block("delete", lambda: self.adelete(session_id, user_id))

    def close(self) -> None:
        """Blocking :meth:`aclose`; also stops the helper thread of the blocking twins."""
        self._block("close", self.aclose)
        if self._portal is not None:
            self._portal.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if error is not None and loop_running():
            return  # close() cannot block here either: let the first misuse be the error reported
        self.close()

    # -- helpers ---------------------------------------------------------------------

    def key(self, session_id: str, user_id: str | None = None) -> SessionKey:
        """Check both ids and return the key a backend stores the session under.

        Raises:
            InvalidSessionIdError: An id this backend cannot hold.
        """
        user = check_id(self._user(user_id), "user_id", allow_empty=True)
        key = SessionKey(user, check_id(session_id, "session_id"))
        self._check_key(key)
        return key

    def _user(self, user_id: str | None) -> str:
        return self.default_user_id if user_id is None else user_id

    async def _run_codec(self, work: Callable[..., T], *args: Any) -> T:
        if self.offload_codec:
            return await asyncio.to_thread(work, *args)
        return work(*args)

    async def _decode(self, raw: bytes, key: SessionKey) -> Mapping[str, Any]:
        try:
            document = await self._run_codec(self.codec.loads, raw, None)
        except DocumentError as err:  # named here, so that a good load never builds the name
            raise DocumentError(err.reason, source=self._source(key), line=err.line, column=err.column) from None
        if not isinstance(document, dict):
            kind = "empty" if document is None else type(document).__name__
            message = f"a session document maps module names to states; this one is {kind}"
            raise DocumentError(message, source=self._source(key))
        if META_KEY in document:
            _check_meta(document[META_KEY], self._source(key))
        return document

    def _block(self, name: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        refuse_inside_loop(name)
        with _PORTAL_LOCK:
            if self._portal is None:
                self._portal = Portal()
                weakref.finalize(self, self._portal.stop)
            portal = self._portal
        return portal.call(make)


def _check_meta(meta: object, source: str) -> None:
    version = meta.get("format") if isinstance(meta, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        raise DocumentError(f"{META_KEY}.format should be an integer, got {version!r}", source=source)
    if version > FORMAT_VERSION:
        raise DocumentError(
            f"written in session format {version} by a newer statekit; this one reads up to {FORMAT_VERSION}",
            source=source,
        )
