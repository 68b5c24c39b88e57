"""Pausing the garbage collector while a load or save builds many objects.

Building a large session makes CPython's cyclic collector run again and again
over objects that are all alive (20-65% of a large load's time), for nothing.
:func:`paused_gc` switches it off for the duration and back on afterwards, if
it was on. Pauses may overlap (threads, nested calls): the collector comes
back on when the last one ends, and stays off if the program had switched it
off itself.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off."""
    global _pauses, _was_enabled  # noqa: PLW0603 - one process-wide collector
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()


def without_gc(work: Callable[P, R]) -> Callable[P, R]:
    """``work`` wrapped in :func:`paused_gc`."""

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with paused_gc():
            return work(*args, **kwargs)

    return run
