"""Writes that finish even when the caller is cancelled.

A file write runs in a worker thread, and a command sent to Redis runs on the
server: cancelling the awaiting task (``task.cancel()``, ``asyncio.timeout``)
does not stop them. Raising ``CancelledError`` at once would let such a write
land after a later save of the same session (a lost update), and would leave
the object's revision memory behind what is stored (its next save a false
conflict). So a write, and what the session remembers of it, run to their
end; then the cancellation is raised.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def finished_despite_cancel(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Run the coroutine ``method`` to its end, then raise a cancellation that came meanwhile."""

    @functools.wraps(method)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return await to_the_end(method(*args, **kwargs))

    return run


async def to_the_end(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` until it is done, whatever cancels the caller; then raise that cancellation.

    Raises:
        asyncio.CancelledError: The caller was cancelled (``work`` still finished).
    """
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is None:
        return task.result()
    if not task.cancelled():
        task.exception()  # retrieved: the caller is cancelled, which is what it is told
    raise cancelled
