"""What sessions tell the ``statekit`` logger: where, how big, how long; never state.

- DEBUG: each save and load, with the place (file or Redis key), the size in
  bytes and the time taken.
- INFO: a load skipped because the session does not exist and
  ``allow_not_exist`` is true, so that a silent fresh start shows in the logs
  (AgentScope logs the same words); WARNING instead when stored sessions are
  near the one asked for (see :mod:`._near`).
- WARNING: keys a non-strict load ignored (logged by the state layer); kept
  revisions a turn pushed past the retention that could not be removed.

Values never reach the log: they may hold secrets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger("statekit")

__all__ = ["log_missing", "log_timed", "log_unpruned", "logger"]


def log_timed(what: str, names: list[str], source: Callable[[], str], size: int, started: float) -> None:
    """DEBUG ``saved agent, notes (1234 bytes) to sessions/chat.json in 2.1 ms``.

    Module names only (never their state); ``source`` is built only when logged.
    """
    if logger.isEnabledFor(logging.DEBUG):
        elapsed = (time.perf_counter() - started) * 1000
        where = "to" if what == "saved" else "from"
        logger.debug("%s %s (%d bytes) %s %s in %.1f ms", what, ", ".join(names), size, where, source(), elapsed)


def log_missing(source: str) -> None:
    """INFO: the session does not exist, so the load changed nothing."""
    logger.info("session %s does not exist; nothing was loaded (allow_not_exist=True)", source)


def log_unpruned(source: str, count: int, error: Exception) -> None:
    """WARNING: a turn was saved, but the kept revisions it pushed past the retention were not removed."""
    logger.warning(
        "the turn was saved to %s, but %d kept revision(s) past its retention could not be removed (%s); "
        "no revision lists them, and deleting the session removes them",
        source,
        count,
        error,
    )
