"""What the commands that go over many sessions (``compact``, ``migrate``) share.

Each session is reported as soon as it is done, so that what was already
rewritten is on the terminal even if the run stops later; a session that fails
is reported on standard error and the others go on; the last line counts them.
"""

from __future__ import annotations

from typing import TextIO

import attrs

from statekit.errors import StatekitError
from statekit.session import SessionBase

FAILED = "failed"


@attrs.define
class Tally:
    """Sessions counted by what became of them, each reported as it is counted.

    Attributes:
        labels: The summary's label of each status, in the summary's order
            (``{"migrated": "would migrate", ...}``); one of them is :data:`FAILED`.
        out: Where sessions done or left alone are reported.
        err: Where failures are reported.
        counts: Sessions per status so far.
    """

    labels: dict[str, str]
    out: TextIO
    err: TextIO
    counts: dict[str, int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.counts = dict.fromkeys(self.labels, 0)

    def report(self, status: str, line: str) -> None:
        """Count one session under ``status`` and print its ``line``."""
        self.counts[status] += 1
        print(line, file=self.err if status == FAILED else self.out, flush=True)

    def summary(self) -> bool:
        """Print the counts (``migrated 2, unchanged 1, failed 1``); whether none failed."""
        print(", ".join(f"{self.labels[status]} {count}" for status, count in self.counts.items()), file=self.out)
        return not self.counts[FAILED]


def where(store: SessionBase, session_id: str, user_id: str | None) -> str:
    """Where a session is stored, or ``session '<id>'`` for ids the store refuses."""
    try:
        return store.location(session_id, user_id)
    except StatekitError:
        return f"session {session_id!r}"


def reason(exc: StatekitError | OSError) -> str:
    """Why a session failed, in one message (an ``OSError`` names its file)."""
    if isinstance(exc, OSError):
        return f"{exc.filename}: {exc.strerror or exc}" if exc.filename else str(exc.strerror or exc)
    return str(exc)
