"""``history()``, ``load_at()``, ``rollback()``, ``fork()`` and ``prune_history()`` of SessionBase, and their blocking twins.

See docs/history.md. The work is done by :mod:`._history_ops` on the session's
:class:`~._backend.Backend`; these methods check their arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar, cast

from statekit.errors import SessionError
from statekit.state.flags import check_flag
from statekit.state.foreign import SupportsState
from statekit.state.module import LoadResult, StateModule
from statekit.values.plain import describe
from statekit.session._archive import checked_keep
from statekit.session._arguments import check_modules_by_name
from statekit.session._history_records import Revision
from statekit.session._history_ops import fork, list_history, prune, read_at, rollback
from statekit.session._ids import SessionKey
from statekit.session._loading import load_bytes
from statekit.session._storage import Storage

T = TypeVar("T")

LOAD_AT_OPTIONS = ("user_id", "strict")


class _Session(Protocol):
    def key(self, session_id: str, user_id: str | None = None) -> SessionKey: ...
    def _block(self, name: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T: ...


def checked_revision(revision: object, what: str = "revision") -> str:
    """A revision argument, checked.

    Raises:
        SessionError: Not a non-empty string.
    """
    if not isinstance(revision, str) or not revision:
        raise SessionError(f"{what} should be a revision string (as revision() or history() gives), got {describe(revision)}")
    return revision


def _limit(limit: object) -> int | None:
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise SessionError(f"limit should be an integer >= 0 or None, got {describe(limit)}")
    return limit


class HistoryMethods(Storage):
    """The history methods of :class:`~statekit.session.SessionBase` (which gives ``key`` and ``_block``)."""

    async def ahistory(self, session_id: str, user_id: str | None = None, *, limit: int | None = None) -> list[Revision]:
        """The session's revisions, newest first: the head, then the kept past revisions.

        A session that keeps no history lists its head alone; a missing one gives ``[]``.
        Only the head is read (never a kept revision's document).

        Raises:
            SessionError: ``limit`` is not an integer >= 0 or ``None``.
            DocumentError: The head's history index is malformed.
        """
        key = cast("_Session", self).key(session_id, user_id)
        return await list_history(self._backend(), key, _limit(limit))

    def history(self, session_id: str, user_id: str | None = None, *, limit: int | None = None) -> list[Revision]:
        """Blocking :meth:`ahistory`."""
        return cast("_Session", self)._block("history", lambda: self.ahistory(session_id, user_id, limit=limit))

    async def aload_at(
        self,
        session_id: str,
        revision: str,
        /,
        *,
        user_id: str | None = None,
        strict: bool = True,
        **modules: StateModule | SupportsState,
    ) -> dict[str, LoadResult]:
        """Load modules from a revision the session holds (the head or a kept one), all or nothing.

        Migrations run as in any load. The object does not remember the revision: a later save
        goes over what it last loaded or saved (``rollback()`` makes an old revision the head).

        Raises:
            SessionNotFoundError: No such session, or it holds no such revision (never kept, or pruned).
            StateLoadError: Every problem; no module was changed.
        """
        check_modules_by_name("load_at", {"session_id": session_id}, modules, LOAD_AT_OPTIONS)
        key = cast("_Session", self).key(session_id, user_id)
        revision = checked_revision(revision)
        checked_strict = check_flag(strict, "strict", SessionError)
        backend = self._backend()
        raw, _, _ = await read_at(backend, key, revision)
        where = f"{backend.source(key)} at revision {revision}"
        results = (await load_bytes(backend, key, raw, modules, checked_strict, (where, f"{where} (appended items)")))[0]
        return results

    def load_at(
        self,
        session_id: str,
        revision: str,
        /,
        *,
        user_id: str | None = None,
        strict: bool = True,
        **modules: StateModule | SupportsState,
    ) -> dict[str, LoadResult]:
        """Blocking :meth:`aload_at`."""
        return cast("_Session", self)._block(
            "load_at", lambda: self.aload_at(session_id, revision, user_id=user_id, strict=strict, **modules)
        )

    async def arollback(self, session_id: str, revision: str, /, *, user_id: str | None = None) -> str:
        """Make a new head whose modules equal ``revision``'s; the new revision.

        A compare-and-set against the head this call reads: a concurrent write is never erased
        (then ``ConflictError``, and nothing changes). The revisions rolled back stay in the
        history. Objects holding the state loaded before must load again: their next save conflicts.

        Raises:
            SessionNotFoundError: No such session or revision.
            ConflictError: The head changed meanwhile; nothing was written.
        """
        key = cast("_Session", self).key(session_id, user_id)
        return await rollback(self._backend(), key, checked_revision(revision))

    def rollback(self, session_id: str, revision: str, /, *, user_id: str | None = None) -> str:
        """Blocking :meth:`arollback`."""
        return cast("_Session", self)._block("rollback", lambda: self.arollback(session_id, revision, user_id=user_id))

    async def afork(
        self,
        session_id: str,
        new_session_id: str,
        /,
        *,
        user_id: str | None = None,
        new_user_id: str | None = None,
        at: str | None = None,
    ) -> str:
        """Write a new session whose first revision holds this one's head (or revision ``at``); its revision.

        The fork records where it came from (``Revision.forked_from``) and keeps history as its
        source does (at least); from then on the two are independent.

        Raises:
            SessionNotFoundError: No such session or revision.
            ConflictError: The new session exists; nothing was written.
        """
        session = cast("_Session", self)
        source = session.key(session_id, user_id)
        target = session.key(new_session_id, user_id if new_user_id is None else new_user_id)
        if target == source:
            raise SessionError(f"fork() needs another session id (or user) than {self._source(source)}")
        return await fork(self._backend(), source, target, None if at is None else checked_revision(at, "at"))

    def fork(
        self,
        session_id: str,
        new_session_id: str,
        /,
        *,
        user_id: str | None = None,
        new_user_id: str | None = None,
        at: str | None = None,
    ) -> str:
        """Blocking :meth:`afork`."""
        return cast("_Session", self)._block(
            "fork",
            lambda: self.afork(session_id, new_session_id, user_id=user_id, new_user_id=new_user_id, at=at),
        )

    async def aprune_history(self, session_id: str, user_id: str | None = None, *, keep: int | None) -> str | None:
        """Set how many past revisions the session keeps, lowering it too, and drop what it no longer keeps.

        A session's retention is recorded with it, and an object's ``keep_history`` only raises it:
        lowering it is this call. It writes the head again with the new retention (a new revision
        with the same modules, over the head read). ``keep=0`` stops keeping history.

        Returns:
            The head's revision afterwards (``None``: no such session).

        Raises:
            SessionError: ``keep`` is not an integer >= 0 or ``None``.
            ConflictError: The head changed meanwhile; nothing was written.
        """
        key = cast("_Session", self).key(session_id, user_id)
        retention = checked_keep(keep, type(self), supports=self.supports_history or keep == 0)
        return await prune(self._backend(), key, retention)

    def prune_history(self, session_id: str, user_id: str | None = None, *, keep: int | None) -> str | None:
        """Blocking :meth:`aprune_history`."""
        return cast("_Session", self)._block(
            "prune_history", lambda: self.aprune_history(session_id, user_id, keep=keep)
        )

