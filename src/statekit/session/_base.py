"""``SessionBase``: the semantics every backend shares, on a few storage primitives.

A backend stores opaque bytes under a :class:`SessionKey` and implements a few
async primitives (``_read``, ``_write``, ``_delete``, ``_list`` and, optionally,
``_exists`` and the compare-and-set ``_write_if``). Everything else lives here,
once: id checks, the document format, revisions and conflicts, dumping and
loading the modules all or nothing, error positions, the synchronous twins and
closing.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar, overload

from statekit._checkers import refuse_non_json
from statekit._flags import check_flag
from statekit._foreign import SupportsState
from statekit._json import describe
from statekit._secrets import SecretBox, SecretKeys
from statekit._module import LoadResult, StateModule
from statekit.codecs import JSON, Codec
from statekit.errors import SessionError, SessionNotFoundError
from statekit.session._revisions import MISSING, Expected, RevisionMemory, StoredDocument, revision_of
from statekit.session._appends import DeltaBase
from statekit.session._arguments import check_modules_by_name, require_modules
from statekit.session._backend import Backend
from statekit.session._cancel import finished
from statekit.session._delta_save import is_joined
from statekit.session._kept import check_removed
from statekit.session._faults import listed_ids
from statekit.session._ids import SessionKey, check_id
from statekit.session._loading import decode_stored, load_modules
from statekit.session._log import log_timed
from statekit.session._near import NEAR_LIMIT, log_missing_load
from statekit.session._saving import remove_modules, save_modules
from statekit.session._sync import BlockingTwins
from statekit.session._update import start_update, update_async
from statekit.session.document import META_KEY, with_meta, without_token

T = TypeVar("T")


SAVE_OPTIONS = ("user_id", "overwrite")
LOAD_OPTIONS = ("user_id", "allow_not_exist", "strict")


class SessionBase(BlockingTwins, abc.ABC):
    """A place where sessions (named sets of state modules) are saved and loaded.

    Every method has an async form (``asave``...) and a blocking twin
    (``save``...) for plain scripts; ``save_session_state`` and
    ``load_session_state`` are the async forms under their reference names.

    Backend authors implement ``_read``, ``_write``, ``_delete`` and ``_list``
    (and may override ``_write_if``, ``_exists``, ``_close``, ``_source`` and
    ``_check_key``); ``statekit.testing`` checks that a backend keeps the contract.

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

    codec: ClassVar[Codec] = JSON
    offload_codec: ClassVar[bool] = False
    default_user_id: ClassVar[str] = ""
    _secret_box: SecretBox | None = None
    omit_secrets: bool = False
    """Without a ``secret_key``: save modules holding ``state_field(secret=True)``
    without those fields (``False``: refuse such a save with ``SecretError``). See docs/secrets.md."""

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

    writes_in_threads: ClassVar[bool] = False
    """Whether the backend writes in worker threads, which a cancel does not stop: saves and
    deletes then finish (and are remembered) before ``CancelledError`` is raised."""

    supports_appends: ClassVar[bool] = False
    """Whether the backend stores deltas of append-only lists (``_append``); else every save rewrites."""

    def _saves_deltas(self) -> bool:
        """Whether a save after appends writes only the new items (see ``supports_appends``)."""
        return self.supports_appends and self.codec.fast

    # -- the storage primitives a backend implements -------------------------------

    @abc.abstractmethod
    async def _read(self, key: SessionKey) -> bytes | None:
        """The stored bytes, or ``None`` when there is no such session."""

    @abc.abstractmethod
    async def _write(self, key: SessionKey, data: bytes) -> None:
        """Replace the stored bytes, atomically: a reader sees old or new, whole."""

    @abc.abstractmethod
    async def _delete(self, key: SessionKey) -> bool:
        """Remove the session; ``True`` when there was one."""

    @abc.abstractmethod
    async def _list(self, user_id: str) -> list[str]:
        """The session ids stored for ``user_id``, in any order."""

    async def _list_users(self) -> list[str]:
        """The user ids that have sessions, in any order (a backend that can tell overrides this)."""
        raise SessionError(f"{type(self).__name__} cannot list its users")

    async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
        """Replace the stored bytes only if their revision is still ``expected``.

        The compare-and-set every conditional save goes through. This default
        reads, compares and writes, which is atomic only when nothing else writes
        the storage in between (one process, a storage without awaits inside);
        a backend overrides it with its storage's own compare-and-set.

        Args:
            key: The session.
            data: The whole new document.
            expected: What must be stored: ``expected.matches(stored_bytes)``
                says (``None`` for nothing stored), and ``expected.revision``
                is its revision (:data:`~statekit.session.MISSING_REVISION` for nothing stored),
                for storages that compare revisions themselves. After a delta save
                only ``expected.base`` is known (``expected.only_base``); a
                backend with ``supports_appends`` checks it.

        Returns:
            ``True`` when written; ``False`` when the stored revision differs
            (then nothing was written).
        """
        backend = self._backend()
        if not expected.matches(await backend.fetch(key)):
            return False
        await backend.write(key, data)
        return True

    async def _append(self, key: SessionKey, line: bytes, base: DeltaBase) -> int | None:
        """Store one delta (new items of append-only lists) if the session is still ``base``.

        Only called on backends whose ``supports_appends`` is true.

        Returns:
            How many bytes the stored deltas grew by; ``None`` when the stored
            session is not ``base`` any more (then nothing was written).
        """
        raise NotImplementedError(f"{type(self).__name__} does not store deltas")

    def _companion_source(self, key: SessionKey) -> str:
        """How error messages name the stored deltas of a session."""
        return f"{self._source(key)} (appended items)"

    async def _list_some(self, user_id: str, limit: int) -> tuple[list[str], bool]:
        """Up to ``limit`` of the user's session ids and whether there are more (for a missing load's hint).

        Lists them all by default; a backend whose stores may be huge bounds the work.
        """
        ids = await self._list(user_id)
        return ids[:limit], len(ids) > limit

    async def _owners(self, session_id: str, limit: int) -> tuple[list[str], bool]:
        """Up to ``limit`` users holding a session with this id, and whether there are more
        (for a missing load's hint; none known by default)."""
        return [], False

    async def _listed_some(self, user_id: str) -> tuple[list[str], bool]:
        with self._backend().faults("_list", lambda: f"sessions of user {user_id!r}"):
            return await self._list_some(user_id, NEAR_LIMIT)

    async def _owned_some(self, session_id: str) -> tuple[list[str], bool]:
        with self._backend().faults("_list", lambda: f"owners of session {session_id!r}"):
            return await self._owners(session_id, NEAR_LIMIT)

    async def _exists(self, key: SessionKey) -> bool:
        """Whether the session exists (override when a cheaper test exists)."""
        return await self._backend().fetch(key) is not None

    async def _close(self) -> None:
        """Release what the backend opened (nothing by default)."""

    def _source(self, key: SessionKey) -> str:
        """How error messages name the stored session (a file name, a key)."""
        return f"session {key.session_id!r} of user {key.user_id!r}"

    def _check_key(self, key: SessionKey) -> None:
        """Refuse ids the storage cannot hold (e.g. too long for a file name)."""

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
        raw = await self._backend().fetch(self.key(session_id, user_id))
        return None if raw is None else revision_of(raw)

    async def aread_document(self, session_id: str, user_id: str | None = None) -> StoredDocument | None:
        """Read a stored session's document as plain data, whatever modules it holds.

        The object remembers the revision read, as a load does.

        Returns:
            The document, its bytes, where it is and its revision; ``None`` when
            the session does not exist.

        Raises:
            DocumentError: The stored bytes are not a session document.
        """
        key = self.key(session_id, user_id)
        backend = self._backend()
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
        check_flag(overwrite, "overwrite", SessionError)
        if expected_revision is not None and overwrite:
            raise SessionError("give expected_revision or overwrite=True, not both")
        if expected_revision is not None and not isinstance(expected_revision, str):
            raise SessionError(f"expected_revision must be a revision string, got {describe(expected_revision)}")
        started = time.perf_counter()
        document = with_meta(data, self._source(key))
        refuse_non_json(document)  # orjson would write NaN as null and tuples as lists, without a word
        backend = self._backend()
        raw = await backend.run_codec(self.codec.dumps, document)
        expected = None if expected_revision is None else Expected(revision=expected_revision)
        revision = (await backend.store(key, raw, expected, overwrite=overwrite)).revision
        log_timed("saved", [name for name in document if name != META_KEY], lambda: self._source(key), len(raw), started)
        return revision

    def location(self, session_id: str, user_id: str | None = None) -> str:
        """Where the session is (or would be) stored: a file path, a Redis key."""
        return self._source(self.key(session_id, user_id))

    async def alist_sessions(self, user_id: str | None = None) -> list[str]:
        """The ids of ``user_id``'s sessions, sorted."""
        user = check_id(self._user(user_id), "user_id", allow_empty=True)
        where = lambda: f"sessions of user {user!r}"  # noqa: E731
        with self._backend().faults("_list", where):
            ids = await self._list(user)
        return listed_ids(ids, self, where)

    async def alist_users(self) -> list[str]:
        """The ids of the users that have sessions, sorted (``""``: sessions saved with no user on files).

        Raises:
            SessionError: The backend cannot list its users.
        """
        where = lambda: "the users"  # noqa: E731
        with self._backend().faults("_list_users", where):
            users = await self._list_users()
        return listed_ids(users, self, where)

    async def aexists(self, session_id: str, user_id: str | None = None) -> bool:
        """Whether the session exists."""
        key = self.key(session_id, user_id)
        with self._backend().faults("_exists", key):
            return await self._exists(key)

    async def adelete(self, session_id: str, user_id: str | None = None) -> bool:
        """Delete the session; ``True`` when there was one. The object forgets its revision."""
        key = self.key(session_id, user_id)
        self._revisions.forget(key)
        with self._backend().faults("_delete", key):
            return await finished(self, self._delete(key))

    async def aclose(self) -> None:
        """Release connections and the like (a session is not usable afterwards)."""
        with self._backend().faults("_close", lambda: f"closing {type(self).__name__}"):
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

    @property
    def _revisions(self) -> RevisionMemory:
        memory: RevisionMemory | None = self.__dict__.get("_revision_memory")
        if memory is None:  # made on first use: backends need not call an __init__ of ours
            memory = self.__dict__.setdefault("_revision_memory", RevisionMemory())
        return memory

    def _backend(self) -> Backend:
        """What the pipelines (load, save, update) use of this object: its primitives and memory."""
        return Backend(
            self,
            (self._read, self._write, self._write_if, self._append),
            (self._source, self._companion_source),
            (self.codec, self.offload_codec),
            (self._secret_box, self.omit_secrets),
            self._revisions,
            saves_deltas=self._saves_deltas(),
            writes_in_threads=self.writes_in_threads,
        )
