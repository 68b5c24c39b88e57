"""Revisions: what a stored session document is, and what a session object remembers of it.

A revision is the SHA-1 hex digest of the stored bytes: nothing extra is
stored (a re-save of unchanged state writes the same bytes, so the same
revision), and a Redis script can compute it server-side with
``redis.sha1hex``. Deltas that name their revisions (a session that keeps
history, see :mod:`._proofs`) chain: the last line names the revision before
it, so its SHA-1 alone names the stored session.
"""

from __future__ import annotations

import enum
import hashlib
import random
import threading
from typing import TYPE_CHECKING, Any, Final

import attrs

from statekit.session._history_index import HeadHistory
from statekit.session._proofs import chained_line

class Unknown(enum.Enum):
    """The type of :data:`UNKNOWN`."""

    UNKNOWN = "unknown"


UNKNOWN: Final = Unknown.UNKNOWN
"""What an :class:`Expected` knows of the stored head's history before anyone read its metadata."""

if TYPE_CHECKING:
    from statekit.session._appends import DeltaBase
    from statekit.session._ids import SessionKey

MISSING_REVISION: Final = ""
"""The revision of a session that is not stored: ``expected_revision=MISSING_REVISION``
means "write only if the session does not exist yet"."""

BACKOFF_BASE = 0.01
"""Seconds: the first retry of :meth:`~statekit.session.SessionBase.aupdate` waits up to this."""

BACKOFF_CAP = 1.0
"""Seconds: no retry of ``aupdate`` waits longer than this."""


def revision_of(raw: bytes) -> str:
    """The revision of stored bytes: their SHA-1, as 40 lower-case hex digits.

    Bytes that carry deltas (``raw.log``, see ``_companion.Stored``) are hashed
    as the document followed by them; when the last delta line names its parent
    revision (see :mod:`._proofs`), that line alone is hashed.
    """
    log = getattr(raw, "log", b"")
    if log and (line := chained_line(log)) is not None:
        return line_revision(line)
    digest = hashlib.sha1(raw, usedforsecurity=False)
    digest.update(log)
    return digest.hexdigest()


def line_revision(line: bytes) -> str:
    """The revision of stored bytes whose last delta line, ``line`` (its newline included), names its parent."""
    return hashlib.sha1(line, usedforsecurity=False).hexdigest()


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


class Expected:
    """What a conditional write expects to find stored: the bytes last seen, or their revision.

    Holding the bytes lets a backend that reads the stored bytes anyway (files)
    compare them directly, which costs far less than hashing them; the revision
    is computed only when asked for (Redis sends it to its script).

    A session with append-only lists also has a ``base`` (see
    :class:`~statekit.session._appends.DeltaBase`): its document's token and how
    many bytes of deltas follow it. After a delta save only the base is known,
    and the backend checks that instead of bytes.

    ``names`` are the module names the document holds, when known: a hint that
    lets a load that asks for other modules skip the typed decode, which would
    fail on them (see :mod:`statekit.state.typed`).
    """

    __slots__ = ("_revision", "base", "history", "names", "raw")

    def __init__(
        self,
        *,
        raw: bytes | None = None,
        revision: str | None = None,
        base: DeltaBase | None = None,
        names: frozenset[str] | None = None,
        history: HeadHistory | None | Unknown = UNKNOWN,
    ) -> None:
        if raw is None and revision is None and base is None:
            raise TypeError("Expected needs the raw bytes, their revision, or a delta base")
        self.raw = raw
        self._revision = revision
        self.base = base
        self.names = names
        self.history = history
        """The stored head's history index (``None``: it keeps no history; :data:`UNKNOWN`: not read yet)."""

    @property
    def only_base(self) -> bool:
        """Whether only the delta base is known (after a delta save): check it, not bytes."""
        return self.raw is None and self._revision is None

    @property
    def revision(self) -> str:
        """The expected revision (:data:`MISSING_REVISION`: nothing stored)."""
        if self._revision is None:
            if self.raw is None:
                if self.base is not None and self.base.revision is not None:
                    return self.base.revision  # named by the delta save that stored it (history)
                raise TypeError("only the delta base is known: check it with the backend's delta check")
            self._revision = revision_of(self.raw)
        return self._revision

    def matches(self, current: bytes | None) -> bool:
        """Whether ``current`` (the stored bytes, ``None`` if none) is what is expected."""
        if self.only_base:
            return False  # a backend with deltas checks the base itself; this is for "was it created?"
        if current is None or self.raw is None:
            return (MISSING_REVISION if current is None else revision_of(current)) == self.revision
        return current == self.raw

    def without_bytes(self) -> Expected:
        """The same expectation, keeping only the revision (to free memory)."""
        if self.raw is None:
            return self
        return Expected(revision=self.revision, base=self.base, names=self.names, history=self.history)


MISSING: Final = Expected(revision=MISSING_REVISION, history=None)
"""The expectation "nothing is stored"."""

MEMORY_BYTES = 32 * 2**20
"""Stored bytes a session object keeps to compare cheaply; past this, older sessions keep only a hash."""


class RevisionMemory:
    """What a session object last loaded or saved, per session (thread-safe).

    The bytes of the most recent sessions are kept, up to :data:`MEMORY_BYTES`;
    older ones are reduced to their revision. Sessions are held by their ids as a
    tuple, whose hash and comparison run in C (a :class:`SessionKey`'s run in Python,
    several times per save and load).
    """

    __slots__ = ("_bytes", "_known", "_lock", "_with_bytes")

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], Expected] = {}
        self._with_bytes: dict[tuple[str, str], int] = {}  # oldest first (a dict keeps its order), with their sizes
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: SessionKey) -> Expected | None:
        """What is remembered of the session (``None``: never seen, or forgotten)."""
        return self._known.get((key.user_id, key.session_id))  # one dict read is atomic: no lock needed

    def remember(self, key: SessionKey, expected: Expected) -> None:
        """Remember what was just read or written."""
        raw, ids = expected.raw, (key.user_id, key.session_id)
        with self._lock:
            self._known[ids] = expected
            with_bytes = self._with_bytes
            self._bytes -= with_bytes.pop(ids, 0)
            if raw is None:
                return
            with_bytes[ids] = size = len(raw)  # the newest last
            self._bytes += size
            while self._bytes > MEMORY_BYTES:
                oldest = next(iter(with_bytes))
                self._bytes -= with_bytes.pop(oldest)
                self._known[oldest] = self._known[oldest].without_bytes()

    def forget(self, key: SessionKey) -> None:
        """Forget the session (after a delete): the next save is blind."""
        ids = (key.user_id, key.session_id)
        with self._lock:
            self._known.pop(ids, None)
            self._bytes -= self._with_bytes.pop(ids, 0)


def conflict_message(source: str, *, created: bool) -> str:
    """The message of a :class:`~statekit.errors.ConflictError` (``created``: it was expected missing)."""
    what = "was created" if created else "was changed (or deleted)"
    return (
        f"{source} {what} by another writer since this session object last loaded or saved it; "
        "nothing was written. Load it again and redo the change (update() does this), "
        "or save with overwrite=True to replace it"
    )
