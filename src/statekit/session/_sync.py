"""The blocking side of a session: one private event loop in a helper thread.

Synchronous twins (``save``, ``load``...) hand their coroutine to this loop and
wait. One loop for the session's whole life matters for clients that bind
their connections to the loop that opened them (``redis.asyncio``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from statekit.errors import SessionError

T = TypeVar("T")


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
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` on the private loop and wait for its result.

        Args:
            make: Builds the coroutine; called only once the loop is ready.

        Returns:
            What the coroutine returned (its exception is raised here).
        """
        loop = self._started()
        return asyncio.run_coroutine_threadsafe(make(), loop).result()

    def stop(self) -> None:
        """Stop the loop and its thread (a no-op when never started)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="statekit-session", daemon=True
                )
                self._thread.start()
            return self._loop
