"""Pausing the garbage collector while a load or save builds many objects.

Building a large session makes CPython's cyclic collector run again and again
over objects that are all alive (20-65% of a large load's time), for nothing.
:func:`paused_gc` switches it off for the duration and back on afterwards, if
it was on. Pauses may overlap (threads, nested calls): the collector comes
back on when the last one ends, and stays off if the program had switched it
off itself.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


class _Paused:
    """The context manager :func:`paused_gc` returns (a class: cheaper than a generator)."""

    def __enter__(self) -> None:
        global _pauses, _was_enabled  # noqa: PLW0603 - one process-wide collector
        with _lock:
            if _pauses == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _pauses += 1

    def __exit__(self, *exc: object) -> None:
        global _pauses  # noqa: PLW0603
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()


_PAUSED = _Paused()


def paused_gc() -> _Paused:
    """Run the ``with`` block with the cyclic garbage collector off."""
    return _PAUSED


def without_gc(work: Callable[P, R]) -> Callable[P, R]:
    """``work`` wrapped in :func:`paused_gc`."""

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with paused_gc():
            return work(*args, **kwargs)

    return run
