"""File reads off the event loop on statekit's own threads: a hop that costs less CPU than ``asyncio.to_thread``.

A file session's load reads its file in a worker thread, so that a slow disk
never blocks the event loop. ``asyncio.to_thread`` pays for generality on
every call: a context copy, a ``concurrent.futures`` future (a condition and
its lock, taken four times), the executor's idle semaphore (a Python
condition) and a second future chained to the first; on a small session that
hop costs more CPU than the read and the decode together (measured
2026-11-27: ~55-95 us of process CPU per hop against ~35 us here). :func:`off_loop`
hands the work to a small pool of daemon threads over one ``SimpleQueue``;
the result comes back with one ``call_soon_threadsafe``.

Only reads run here: a read that the caller stops waiting for (a cancelled
task, a closed loop) changes nothing, so nothing has to finish before the
interpreter exits. Writes keep ``asyncio.to_thread``, whose threads the
interpreter waits for.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

MAX_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""How many reads may wait for the disk at once (as many as asyncio's default executor runs)."""

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class _Readers:
    """The pool: threads started as reads find none idle, up to :data:`MAX_THREADS`, kept for the next."""

    def __init__(self) -> None:
        self.jobs: SimpleQueue[_Job] = SimpleQueue()
        self.lock = threading.Lock()
        self.idle = 0
        self.threads = 0

    def submit(self, job: _Job) -> None:
        with self.lock:
            if self.idle:
                self.idle -= 1
            elif self.threads < MAX_THREADS:
                threading.Thread(target=self._serve, name="statekit-read", daemon=True).start()  # raises: none counted
                self.threads += 1
        self.jobs.put(job)

    def _serve(self) -> None:
        while True:
            loop, future, work, args = self.jobs.get()
            try:
                outcome: tuple[bool, Any] = (True, work(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, as to_thread does
                outcome = (False, exc)
            del work, args
            with self.lock:
                self.idle += 1
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:  # the loop was closed meanwhile: no one waits for this read
                pass
            del loop, future, outcome


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.cancelled():
        return
    if outcome[0]:
        future.set_result(outcome[1])
    else:
        future.set_exception(outcome[1])


_readers = _Readers()


def _after_fork() -> None:
    global _readers  # noqa: PLW0603 - a forked child has none of its parent's threads
    _readers = _Readers()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


async def off_loop(work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` in a reader thread; its result or its exception, in the calling task.

    Only for work that changes nothing (reads, checks): when the caller is
    cancelled the work still runs to its end, and its result is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    _readers.submit((loop, future, work, args))
    return await future
