"""Revisions: what a stored session document is, and what a session object remembers of it.

A revision is the SHA-1 hex digest of the stored bytes: nothing extra is
stored (a re-save of unchanged state writes the same bytes, so the same
revision), and a Redis script can compute it server-side with
``redis.sha1hex``.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from statekit._module import StateModule, dump_many, load_many

if TYPE_CHECKING:
    from statekit.session._base import SessionKey

MISSING_REVISION: Final = ""
"""The revision of a session that is not stored: ``expected_revision=MISSING_REVISION``
means "write only if the session does not exist yet"."""

BACKOFF_BASE = 0.01
"""Seconds: the first retry of :meth:`~statekit.session.SessionBase.aupdate` waits up to this."""

BACKOFF_CAP = 1.0
"""Seconds: no retry of ``aupdate`` waits longer than this."""


def revision_of(raw: bytes) -> str:
    """The revision of stored bytes: their SHA-1, as 40 lower-case hex digits."""
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest()


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): full jitter, capped exponential.

    Random, so that workers that collided once spread out instead of colliding again.
    """
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))  # noqa: S311 - not cryptography


@attrs.frozen
class StoredDocument:
    """A stored session document, as read: the decoded data and the bytes behind it.

    Attributes:
        data: The decoded document (module names to states, statekit's
            metadata key included).
        raw: The stored bytes.
        source: Where it is stored: a file path, or ``redis://host:port/db key``.
        revision: The revision of ``raw`` (see :func:`revision_of`).
    """

    data: dict[str, Any]
    raw: bytes = attrs.field(repr=lambda raw: f"<{len(raw)} bytes>")
    source: str
    revision: str


class RevisionMemory:
    """The revision a session object last loaded or saved, per session (thread-safe)."""

    def __init__(self) -> None:
        self._known: dict[SessionKey, str] = {}
        self._lock = threading.Lock()

    def get(self, key: SessionKey) -> str | None:
        """The remembered revision (:data:`MISSING_REVISION` when seen missing), or ``None``."""
        with self._lock:
            return self._known.get(key)

    def remember(self, key: SessionKey, revision: str) -> None:
        """Remember the revision just read or written."""
        with self._lock:
            self._known[key] = revision

    def forget(self, key: SessionKey) -> None:
        """Forget the session (after a delete): the next save is blind."""
        with self._lock:
            self._known.pop(key, None)


def conflict_message(source: str, expected: str) -> str:
    """The message of a :class:`~statekit.errors.ConflictError`."""
    what = "was created" if expected == MISSING_REVISION else "was changed (or deleted)"
    return (
        f"{source} {what} by another writer since this session object last loaded or saved it; "
        "nothing was written. Load it again and redo the change (update() does this), "
        "or save with overwrite=True to replace it"
    )


def restart_missing(modules: Mapping[str, StateModule], fresh: dict[str, Any] | None) -> dict[str, Any]:
    """Snapshot the modules on the first miss; put them back to it on later ones."""
    if fresh is None:
        return dump_many(modules)
    load_many(modules, fresh, strict=True)
    return fresh
