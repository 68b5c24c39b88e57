"""Writes that finish even when the caller is cancelled.

A file write runs in a worker thread, which cancelling the awaiting task
(``task.cancel()``, ``asyncio.timeout``) does not stop. Raising
``CancelledError`` at once would let that write land after a later save of the
same session (a lost update), and would leave the object's revision memory
behind what is stored (its next save a false conflict). So on backends whose
writes run in threads, a write and what the session remembers of it run to
their end; then the cancellation is raised.
"""
from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar


class Writer(Protocol):
    """What says whether writes run in worker threads: a session, or the backend its pipelines use."""

    @property
    def writes_in_threads(self) -> bool:
        """Whether a cancel lets a write run to its end."""
        ...


P = ParamSpec("P")
S = TypeVar("S", bound=Writer)
T = TypeVar("T")


def finished_despite_cancel(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """Run ``method`` (of a session, or taking one first) to its end, then raise a
    cancellation that came meanwhile, on backends whose writes run in worker threads.

    Elsewhere (Redis) a cancelled write is not reordered after a later one; the
    object's memory of it may lag, and its next save then conflicts: safe, and
    the extra task per save would cost about 15% of small-session throughput.
    """

    @functools.wraps(method)
    def run(session: S, /, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, T]:
        # A plain function handing back the coroutine to await: no coroutine of its own per write.
        work = method(session, *args, **kwargs)
        return to_the_end(work) if session.writes_in_threads else work

    return run


async def finished(session: Writer, work: Coroutine[Any, Any, T]) -> T:
    """``work`` (a write of ``session``), run to its end despite a cancel where the backend writes in threads."""
    return await (to_the_end(work) if session.writes_in_threads else work)


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
