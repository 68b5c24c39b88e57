"""One timer for the deadlines of many Redis operations, instead of a timer per operation."""

from __future__ import annotations

import asyncio
import math
from typing import Protocol


class Expiring(Protocol):
    """An operation with a deadline: told when it passes."""

    def expire(self) -> None:
        """The deadline passed while the operation was still running."""


class Deadlines:
    """The deadlines of the operations in flight on one event loop, and one timer armed for the earliest.

    A ``loop.call_later`` per operation costs a ``TimerHandle``, a heap push that compares
    handles in Python, and a cancel; here an operation costs a dict entry. The operations
    of one session share one timeout, so their deadlines come in the order they start: the
    timer fires about once per timeout, expires the operations whose deadline passed, and
    is armed again for the earliest of those left. An operation that ends is dropped, so
    nothing can expire it after its end.
    """

    __slots__ = ("_at", "_loop", "_pending", "_timer")

    def __init__(self) -> None:
        self._pending: dict[Expiring, float] = {}  # the operations in flight, with their deadlines
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the timer
        self._timer: asyncio.TimerHandle | None = None
        self._at = math.inf  # when the timer fires

    def start(self, operation: Expiring, timeout: float) -> asyncio.TimerHandle | None:
        """Expire ``operation`` in ``timeout`` seconds unless :meth:`stop` comes first.

        Returns:
            ``None``, or a timer of the operation's own for the caller to cancel, when the
            shared timer serves another event loop that still has operations in flight.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if loop is not self._loop:
            if self._pending and self._loop is not None and not self._loop.is_closed():
                return loop.call_at(deadline, operation.expire)
            self._loop, self._timer, self._at = loop, None, math.inf  # a stale timer finds itself replaced
            self._pending.clear()  # the operations of a closed loop never end
        self._pending[operation] = deadline
        if deadline < self._at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._at = loop.call_at(deadline, self._sweep), deadline
        return None

    def stop(self, operation: Expiring) -> None:
        """The operation ended: no deadline of its own may expire it any more."""
        self._pending.pop(operation, None)

    def close(self) -> None:
        """Cancel the timer (its loop running here: the session closes) and forget every deadline."""
        if self._timer is not None and self._loop is asyncio.get_running_loop():
            self._timer.cancel()
        self._pending.clear()
        self._loop, self._timer, self._at = None, None, math.inf

    def _sweep(self) -> None:
        loop = self._loop
        if loop is None or asyncio.get_running_loop() is not loop:
            return  # armed before the deadlines moved to another loop
        due = max(loop.time(), self._at)  # a timer may fire up to the clock's resolution early
        self._timer, self._at = None, math.inf
        earliest = math.inf
        for operation, deadline in list(self._pending.items()):
            if deadline <= due:
                del self._pending[operation]
                operation.expire()
            elif deadline < earliest:
                earliest = deadline
        if earliest < math.inf:
            self._timer, self._at = loop.call_at(earliest, self._sweep), earliest
