"""The blocking side of a session: one private event loop in a helper thread.

:class:`BlockingTwins` gives :class:`~statekit.session.SessionBase` a blocking
twin of every async method (``save`` for ``asave``...).

Synchronous twins (``save``, ``load``...) hand their coroutine to this loop and
wait. One loop for the session's whole life matters for clients that bind
their connections to the loop that opened them (``redis.asyncio``).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar, cast, overload

from statekit.errors import SessionError
from statekit.session._backend import Backend
from statekit.session._ids import SessionKey
from statekit.session._update import start_update, update_blocking

if TYPE_CHECKING:
    from statekit.state.foreign import SupportsState
    from statekit.state.module import LoadResult, StateModule
    from statekit.session._revisions import StoredDocument

T = TypeVar("T")

_PORTAL_LOCK = threading.Lock()


def loop_running() -> bool:
    """Whether this thread is running an event loop (where blocking is a mistake)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def refuse_inside_loop(name: str) -> None:
    """Raise when called from a thread whose event loop is running.

    Blocking there would freeze every other task of that loop (and deadlock
    when the awaited work needs that loop).

    Args:
        name: The blocking method, for the message (``"save"``).

    Raises:
        SessionError: An event loop is running in this thread.
    """
    if not loop_running():
        return
    raise SessionError(
        f"session.{name}() blocks, so it cannot be called inside a running event loop; "
        f"use `await session.a{name}(...)` in async code"
    )


class Portal:
    """A private event loop running in a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._calls = 0  # in flight: stop() waits for them (a loop stopped under one never resolves it)
        self._stopping = False  # new calls wait until the stop is done (then start a new loop)

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` on the private loop and wait for its result.

        Args:
            make: Builds the coroutine; called only once the loop is ready.

        Returns:
            What the coroutine returned (its exception is raised here).
        """
        with self._lock:
            self._lock.wait_for(lambda: not self._stopping)
            loop = self._started()
            self._calls += 1
        try:
            return asyncio.run_coroutine_threadsafe(make(), loop).result()
        finally:
            with self._lock:
                self._calls -= 1
                self._lock.notify_all()

    def stop(self) -> None:
        """Stop the loop and its thread once the calls in flight are done (a no-op when never started).

        Calls made meanwhile wait for the stop, then start a new loop.
        """
        with self._lock:
            self._lock.wait_for(lambda: not self._stopping)
            self._stopping = True  # calls arriving now wait: a steady stream would starve the stop
            self._lock.wait_for(lambda: self._calls == 0)
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        try:
            if loop is not None and thread is not None:
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()
        finally:
            with self._lock:
                self._stopping = False
                self._lock.notify_all()

    def _started(self) -> asyncio.AbstractEventLoop:
        """The loop, started if needed (the lock is held)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="statekit-session", daemon=True)
            self._thread.start()
        return self._loop


class AsyncSession(Protocol):
    """The async methods of :class:`~statekit.session.SessionBase` that have a blocking twin."""

    def key(self, session_id: str, user_id: str | None = None) -> SessionKey: ...
    async def asave(
        self, session_id: str, user_id: str | None = None, *, overwrite: bool = False, **modules: StateModule | SupportsState
    ) -> None: ...
    async def aload(
        self,
        session_id: str,
        user_id: str | None = None,
        allow_not_exist: bool = True,
        strict: bool = True,
        **modules: StateModule | SupportsState,
    ) -> dict[str, LoadResult]: ...
    async def aremove_modules(self, session_id: str, *names: str, user_id: str | None = None) -> None: ...
    async def arevision(self, session_id: str, user_id: str | None = None) -> str | None: ...
    async def aread_document(
        self, session_id: str, user_id: str | None = None, *, at: str | None = None
    ) -> StoredDocument | None: ...
    async def awrite_document(
        self,
        session_id: str,
        data: Mapping[str, Any],
        user_id: str | None = None,
        *,
        expected_revision: str | None = None,
        overwrite: bool = False,
    ) -> str: ...
    async def alist_sessions(self, user_id: str | None = None) -> list[str]: ...
    async def alist_users(self) -> list[str]: ...
    async def aexists(self, session_id: str, user_id: str | None = None) -> bool: ...
    async def adelete(self, session_id: str, user_id: str | None = None) -> bool: ...
    async def aclose(self) -> None: ...


class BlockingTwins:
    """The blocking twins of :class:`~statekit.session.SessionBase`'s async methods."""

    _portal: Portal | None = None

    @property
    def _async(self) -> AsyncSession:
        return cast("AsyncSession", self)

    def _backend(self) -> Backend:
        """The session's storage, as its pipelines use it (:class:`~._storage.Storage` makes it:
        it comes before this class among ``SessionBase``'s bases)."""
        raise NotImplementedError

    def save(
        self, session_id: str, user_id: str | None = None, *, overwrite: bool = False, **modules: StateModule | SupportsState
    ) -> None:
        """Blocking :meth:`asave`, for code that runs no event loop."""
        self._block("save", lambda: self._async.asave(session_id, user_id, overwrite=overwrite, **modules))

    def load(
        self,
        session_id: str,
        user_id: str | None = None,
        allow_not_exist: bool = True,
        strict: bool = True,
        **modules: StateModule | SupportsState,
    ) -> dict[str, LoadResult]:
        """Blocking :meth:`aload`, for code that runs no event loop."""
        return self._block("load", lambda: self._async.aload(session_id, user_id, allow_not_exist, strict, **modules))

    @overload
    def update(
        self,
        session_id: str,
        mutate: Callable[[], Awaitable[T]],
        *,
        user_id: str | None = None,
        retries: int = 10,
        **modules: StateModule | SupportsState,
    ) -> T: ...
    @overload
    def update(
        self,
        session_id: str,
        mutate: Callable[[], T],
        *,
        user_id: str | None = None,
        retries: int = 10,
        **modules: StateModule | SupportsState,
    ) -> T: ...
    def update(
        self,
        session_id: str,
        mutate: Callable[[], Any],
        *,
        user_id: str | None = None,
        retries: int = 10,
        **modules: StateModule | SupportsState,
    ) -> Any:
        """Blocking :meth:`aupdate`: ``mutate`` runs on this thread (it may call the blocking methods)."""
        refuse_inside_loop("update")
        attempts = start_update(self._async.key, self._backend(), session_id, mutate, user_id, retries, modules)
        return update_blocking(attempts, mutate, lambda make: self._block("update", make))

    def remove_modules(self, session_id: str, *names: str, user_id: str | None = None) -> None:
        """Blocking :meth:`aremove_modules`."""
        self._block("remove_modules", lambda: self._async.aremove_modules(session_id, *names, user_id=user_id))

    def revision(self, session_id: str, user_id: str | None = None) -> str | None:
        """Blocking :meth:`arevision`."""
        return self._block("revision", lambda: self._async.arevision(session_id, user_id))

    def read_document(self, session_id: str, user_id: str | None = None, *, at: str | None = None) -> StoredDocument | None:
        """Blocking :meth:`aread_document`."""
        return self._block("read_document", lambda: self._async.aread_document(session_id, user_id, at=at))

    def write_document(
        self,
        session_id: str,
        data: Mapping[str, Any],
        user_id: str | None = None,
        *,
        expected_revision: str | None = None,
        overwrite: bool = False,
    ) -> str:
        """Blocking :meth:`awrite_document`."""
        return self._block(
            "write_document",
            lambda: self._async.awrite_document(
                session_id, data, user_id, expected_revision=expected_revision, overwrite=overwrite
            ),
        )

    def list_sessions(self, user_id: str | None = None) -> list[str]:
        """Blocking :meth:`alist_sessions`."""
        return self._block("list_sessions", lambda: self._async.alist_sessions(user_id))

    def list_users(self) -> list[str]:
        """Blocking :meth:`alist_users`."""
        return self._block("list_users", lambda: self._async.alist_users())

    def exists(self, session_id: str, user_id: str | None = None) -> bool:
        """Blocking :meth:`aexists`."""
        return self._block("exists", lambda: self._async.aexists(session_id, user_id))

    def delete(self, session_id: str, user_id: str | None = None) -> bool:
        """Blocking :meth:`adelete`."""
        return self._block("delete", lambda: self._async.adelete(session_id, user_id))

    def close(self) -> Awaitable[None]:
        """Close the session, from plain code or (awaited) from async code.

        Outside an event loop it blocks, like the other twins, and also stops
        the helper thread of the blocking twins, once the blocking calls other
        threads have in flight are done. Inside a running loop it
        returns a coroutine to await: ``await session.close()`` is what
        AgentScope code writes.
        """
        if loop_running():
            return self._close_in_loop()
        self._block("close", self._async.aclose)
        if self._portal is not None:
            self._portal.stop()
        return _Done()

    async def _close_in_loop(self) -> None:
        await self._async.aclose()
        if self._portal is not None:
            await asyncio.to_thread(self._portal.stop)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if loop_running():
            if error is None:
                refuse_inside_loop("close")  # `with` cannot await: `async with` can
            return  # close() cannot block here either: let the first misuse be the error reported
        self.close()

    def _block(self, name: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        refuse_inside_loop(name)
        with _PORTAL_LOCK:
            if self._portal is None:
                self._portal = Portal()
                weakref.finalize(self, self._portal.stop)
            portal = self._portal
        return portal.call(make)


class _Done:
    """What a blocking :meth:`BlockingTwins.close` returns: already done, awaitable anyway."""

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()
