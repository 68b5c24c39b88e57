"""``SessionBase``: the public API every backend shares, on the storage primitives of :mod:`._storage`.

Each method checks its arguments (ids, modules by name, options) and hands the
work to a pipeline on the session's :class:`~._backend.Backend`: loading
(:mod:`._loading`), saving (:mod:`._saving`), ``update()`` (:mod:`._update`);
the blocking twins come from :mod:`._sync`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

from statekit.state.flags import check_flag
from statekit.state.foreign import SupportsState
from statekit.values.secrets import SecretBox, SecretKeys
from statekit.state.module import LoadResult, StateModule
from statekit.errors import SessionError, SessionNotFoundError
from statekit.session._revisions import MISSING, Expected, StoredDocument, revision_of
from statekit.session._arguments import check_modules_by_name, check_write_options, require_modules
from statekit.session._cancel import finished
from statekit.session._delta_load import is_joined
from statekit.session._kept import check_removed
from statekit.session._faults import listed_ids
from statekit.session._ids import SessionKey, check_id
from statekit.session._loading import decode_stored, load_modules
from statekit.session._near import NEAR_LIMIT, log_missing_load
from statekit.session._saving import remove_modules, save_modules, write_document
from statekit.session._history_api import HistoryMethods, checked_revision
from statekit.session._history_ops import stored_at, sweep
from statekit.session._lease import LeaseMethods
from statekit.session._sync import AsyncSession, BlockingTwins
from statekit.session._update import start_update, update_async
from statekit.session.document import without_token

T = TypeVar("T")


SAVE_OPTIONS = ("user_id", "overwrite")
LOAD_OPTIONS = ("user_id", "allow_not_exist", "strict")


class SessionBase(HistoryMethods, LeaseMethods, BlockingTwins):
    """A place where sessions (named sets of state modules) are saved and loaded.

    Every method has an async form (``asave``...) and a blocking twin
    (``save``...) for plain scripts; ``save_session_state`` and
    ``load_session_state`` are the async forms under their reference names.

    Backend authors implement ``_read``, ``_write``, ``_delete`` and ``_list``
    (and may override ``_write_if``, ``_exists``, ``_close``, ``_source`` and
    ``_check_key``); ``statekit.testing`` checks that a backend keeps the contract.

    A session object can hold a session's lease (:meth:`alease` / :meth:`lease`,
    docs/leases.md): then it alone may write that session until the lease ends.

    Every stored session has a revision (a hash of its bytes). The object
    remembers, per session, the revision it last loaded or saved; a save through
    it then succeeds only if the stored revision is still that one, else it
    raises :class:`~statekit.errors.ConflictError` and writes nothing.

    Attributes:
        codec: How documents become bytes (pretty JSON unless a backend says otherwise).
        offload_codec: Encode and decode in a worker thread, so that big
            sessions do not block the event loop (file backends).
        default_user_id: The ``user_id`` of every method called with
            ``user_id=None`` (``""`` here and for files, ``"default_user"``
            for Redis, as in the reference).
    """

    def use_secret_key(self, secret_key: SecretKeys | None) -> None:
        """Encrypt ``state_field(secret=True)`` values with this key (``None``: no key, see ``omit_secrets``).

        The built-in backends take it as ``secret_key=`` in their constructor;
        an own backend may call this. See docs/secrets.md.

        Args:
            secret_key: 32 bytes or their URL-safe base64 (:func:`statekit.generate_secret_key`),
                or a list or tuple of such keys to rotate them: the first encrypts,
                every one decrypts (docs/key-rotation.md).

        Raises:
            SecretError: A key is malformed, or the list is empty (the message never shows a key).
            MissingExtraError: ``cryptography`` is missing (``statekit[crypto]``).
        """
        self._secret_box = None if secret_key is None else SecretBox(secret_key)

    async def _listed_some(self, user_id: str) -> tuple[list[str], bool]:
        with self._faults("_list", lambda: f"sessions of user {user_id!r}"):
            return await self._list_some(user_id, NEAR_LIMIT)

    async def _owned_some(self, session_id: str) -> tuple[list[str], bool]:
        with self._faults("_list", lambda: f"owners of session {session_id!r}"):
            return await self._owners(session_id, NEAR_LIMIT)

    # -- async API -------------------------------------------------------------------

    async def asave(
        self, session_id: str, user_id: str | None = None, *, overwrite: bool = False, **modules: StateModule | SupportsState
    ) -> None:
        """Save modules as one session document, replacing what was stored.

        When this object has loaded or saved the session before, the save
        succeeds only if nobody changed it since; otherwise (a blind save) it
        replaces whatever is stored.

        Args:
            session_id: The session.
            user_id: Its owner (``None``: the backend's default user).
            overwrite: Replace whatever is stored, without the revision check.
            **modules: The modules, by the names they are saved (and loaded) under.

        Raises:
            InvalidSessionIdError: An id is empty, too long or holds NUL.
            StateDumpError: A module's state is not JSON data; nothing was written.
            ConflictError: The session changed since this object last loaded or
                saved it; nothing was written.
            SessionError: ``overwrite`` is not ``True`` or ``False``.
        """
        check_modules_by_name("save", {"session_id": session_id, "user_id": user_id}, modules, SAVE_OPTIONS)
        require_modules("save", session_id, modules)
        key = self.key(session_id, user_id)
        await save_modules(self._backend(), key, modules, overwrite=check_flag(overwrite, "overwrite", SessionError))

    async def aload(
        self,
        session_id: str,
        user_id: str | None = None,
        allow_not_exist: bool = True,
        strict: bool = True,
        **modules: StateModule | SupportsState,
    ) -> dict[str, LoadResult]:
        """Load modules from a saved session, all or nothing.

        Args:
            session_id: The session.
            user_id: Its owner (``None``: the backend's default user).
            allow_not_exist: When the session does not exist, do nothing (else raise).
            strict: Require every state key and reject unknown ones.
            **modules: The modules to load, by the names they were saved under.

        Returns:
            What each module's load left alone (empty when the session is missing).

        Raises:
            SessionNotFoundError: No such session and ``allow_not_exist`` is false.
            DocumentError: The stored bytes are not a session document.
            StateLoadError: Every problem, with its line in the document; no
                module was changed.
            SessionError: ``allow_not_exist`` or ``strict`` is not ``True`` or ``False``.
        """
        positional = {"session_id": session_id, "user_id": user_id, "allow_not_exist": allow_not_exist, "strict": strict}
        check_modules_by_name("load", positional, modules, LOAD_OPTIONS)
        key = self.key(session_id, user_id)
        check_flag(allow_not_exist, "allow_not_exist", SessionError)
        results, _ = await load_modules(self._backend(), key, modules, check_flag(strict, "strict", SessionError))
        if results is None:
            if not allow_not_exist:
                raise SessionNotFoundError(f"no {self._source(key)}")
            await log_missing_load(
                self._source(key),
                key.session_id,
                key.user_id,
                lambda: self._listed_some(key.user_id),
                lambda: self._owned_some(key.session_id),
            )
        return results or {}

    save_session_state = asave
    """The reference name of :meth:`asave`."""

    load_session_state = aload
    """The reference name of :meth:`aload`."""

    @overload
    async def aupdate(
        self,
        session_id: str,
        mutate: Callable[[], Awaitable[T]],
        *,
        user_id: str | None = None,
        retries: int = 10,
        **modules: StateModule | SupportsState,
    ) -> T: ...
    @overload
    async def aupdate(
        self,
        session_id: str,
        mutate: Callable[[], T],
        *,
        user_id: str | None = None,
        retries: int = 10,
        **modules: StateModule | SupportsState,
    ) -> T: ...
    async def aupdate(
        self,
        session_id: str,
        mutate: Callable[[], Any],
        *,
        user_id: str | None = None,
        retries: int = 10,
        **modules: StateModule | SupportsState,
    ) -> Any:
        """Load, change and save modules, retrying when another writer got there first.

        Loads the modules (a missing session starts from the modules as they
        are), calls ``mutate()`` (sync or async; it closes over the modules) and
        saves. When the save raises ``ConflictError``, waits a short random
        backoff, reloads and calls ``mutate()`` again, up to ``retries`` times.
        Returns what the last (saved) ``mutate()`` returned (awaited, when async).

        Args:
            session_id: The session.
            mutate: Changes the modules; called once per attempt, without arguments.
            user_id: Its owner (``None``: the backend's default user).
            retries: How many times to retry after a conflict.
            **modules: The modules, by the names they are saved under.

        Raises:
            ConflictError: Still conflicting after ``retries`` retries, saying so.
            SessionError: No module, ``retries`` is not a whole number >= 0, or
                ``mutate`` cannot be called without arguments (checked before anything is loaded).
            StateLoadError: A retry found the session deleted and could not put
                back what an earlier attempt loaded (a property's setter or an
                override's ``load_state_dict()`` refused).
        """
        return await update_async(start_update(self.key, self._backend(), session_id, mutate, user_id, retries, modules), mutate)

    async def aremove_modules(self, session_id: str, *names: str, user_id: str | None = None) -> None:
        """Remove modules from a stored session, keeping the others as stored.

        A save keeps the stored modules it does not name; this is how a module
        leaves a session. Like a save, it checks the revision this object
        remembers (else it reads the stored document and writes only over that).

        Args:
            session_id: The session.
            *names: The modules to remove (at least one; the session must hold each).
            user_id: Its owner (``None``: the backend's default user).

        Raises:
            SessionNotFoundError: No such session.
            SessionError: No name, a name the session does not hold (nothing was
                written), or every module of the session (delete it instead).
            ConflictError: The session changed since this object last loaded or
                saved it; nothing was written.
        """
        key = self.key(session_id, user_id)
        await remove_modules(self._backend(), key, check_removed(names))

    async def arevision(self, session_id: str, user_id: str | None = None) -> str | None:
        """The stored session's revision, or ``None`` when it does not exist."""
        raw = await self._fetch(self.key(session_id, user_id))
        return None if raw is None else revision_of(raw)

    async def aread_document(
        self, session_id: str, user_id: str | None = None, *, at: str | None = None
    ) -> StoredDocument | None:
        """Read a stored session's document as plain data, whatever modules it holds.

        The object remembers the revision read, as a load does. With ``at``: read that revision
        of the session (its head or a kept one, see :meth:`ahistory`), remembering nothing.

        Returns:
            The document, its bytes, where it is and its revision; ``None`` when
            the session does not exist (with ``at``: ``SessionNotFoundError``).

        Raises:
            DocumentError: The stored bytes are not a session document.
            SessionNotFoundError: With ``at``: no such session, or it holds no such revision.
        """
        key = self.key(session_id, user_id)
        backend = self._backend()
        if at is not None:
            return await stored_at(backend, key, checked_revision(at, "at"))
        raw = await backend.fetch(key)
        if raw is None:
            backend.revisions.remember(key, MISSING)
            return None
        data = without_token(await decode_stored(backend, raw, key))
        shown = raw if not is_joined(raw) else await backend.run_codec(self.codec.dumps, data)
        stored = StoredDocument(data, shown, self._source(key), revision_of(raw))
        backend.revisions.remember(key, Expected(raw=raw, revision=stored.revision))
        return stored

    async def awrite_document(
        self,
        session_id: str,
        data: Mapping[str, Any],
        user_id: str | None = None,
        *,
        expected_revision: str | None = None,
        overwrite: bool = False,
    ) -> str:
        """Store a plain session document, as a save would.

        Args:
            session_id: The session.
            data: Module names to plain states; statekit's metadata key is
                added when missing.
            user_id: Its owner (``None``: the backend's default user).
            expected_revision: Write only if the stored revision is this one
                (:data:`~statekit.session.MISSING_REVISION`: only if nothing is
                stored); ``None``: the revision this object remembers, as ``save``.
            overwrite: Replace whatever is stored, without any check.

        Returns:
            The revision written.

        Raises:
            ConflictError: The stored revision is not the expected one; nothing was written.
            DocumentError: ``data`` is not a session document.
            SessionError: Both ``expected_revision`` and ``overwrite``, an
                ``expected_revision`` that is not a string, or an ``overwrite``
                that is not ``True`` or ``False``.
            StateDumpError: ``data`` is not plain JSON data (NaN, a tuple...),
                or nests past ``MAX_DEPTH``; nothing was written.
        """
        key = self.key(session_id, user_id)
        check_write_options(expected_revision, overwrite)
        return await write_document(self._backend(), key, data, expected_revision, overwrite=overwrite)

    def location(self, session_id: str, user_id: str | None = None) -> str:
        """Where the session is (or would be) stored: a file path, a Redis key."""
        return self._source(self.key(session_id, user_id))

    async def alist_sessions(self, user_id: str | None = None) -> list[str]:
        """The ids of ``user_id``'s sessions, sorted."""
        user = check_id(self._user(user_id), "user_id", allow_empty=True)
        where = lambda: f"sessions of user {user!r}"  # noqa: E731
        with self._faults("_list", where):
            ids = await self._list(user)
        return listed_ids(ids, self, where)

    async def alist_users(self) -> list[str]:
        """The ids of the users that have sessions, sorted (``""``: sessions saved with no user on files).

        Raises:
            SessionError: The backend cannot list its users.
        """
        where = lambda: "the users"  # noqa: E731
        with self._faults("_list_users", where):
            users = await self._list_users()
        return listed_ids(users, self, where)

    async def aexists(self, session_id: str, user_id: str | None = None) -> bool:
        """Whether the session exists."""
        key = self.key(session_id, user_id)
        with self._faults("_exists", key):
            return await self._exists(key)

    async def adelete(self, session_id: str, user_id: str | None = None) -> bool:
        """Delete the session, and its kept revisions; ``True`` when there was one. The object forgets its revision."""
        key = self.key(session_id, user_id)
        self._revisions.forget(key)
        with self._faults("_delete", key):
            existed = await finished(self, self._delete(key))
        if self.supports_history:  # erasure erases the history too (also what a crash left behind)
            await finished(self, sweep(self._backend(), key))
        return existed

    async def aclose(self) -> None:
        """Release connections and the like (a session is not usable afterwards)."""
        with self._faults("_close", lambda: f"closing {type(self).__name__}"):
            await self._close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- helpers ---------------------------------------------------------------------

    def key(self, session_id: str, user_id: str | None = None) -> SessionKey:
        """Check both ids and return the key a backend stores the session under.

        Raises:
            InvalidSessionIdError: An id this backend cannot hold.
        """
        user = check_id(self._user(user_id), "user_id", allow_empty=True)
        key = SessionKey(user, check_id(session_id, "session_id"))
        self._check_key(key)
        return key

    def _user(self, user_id: str | None) -> str:
        return self.default_user_id if user_id is None else user_id


if TYPE_CHECKING:

    def _twins_call(session: SessionBase) -> AsyncSession:
        """Never run: mypy checks here that SessionBase has the async methods its blocking twins call."""
        return session
