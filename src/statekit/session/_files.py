"""File backends: one file per (user_id, session_id), written atomically and durably.

Layout under ``save_dir``::

    <session>.json             sessions of user_id ""
    @<user>/<session>.json     sessions of any other user

Ids are percent-encoded: every character outside ``a-z 0-9 - _ .`` becomes
``%XX`` (UTF-8 bytes, upper-case hex), and so do a leading or trailing dot and
the first letter of a Windows device name (``con``, ``nul``...). So no id can
climb out of ``save_dir`` or reach another id's file, even on case-insensitive
file systems, and listing gives the ids back exactly.

A save writes a temporary file in the same folder (``.<name>.json.tmp``, a fixed
name, so that one left by a killed save is replaced by the next save instead of
piling up), fsyncs it, renames it over the old file and fsyncs the folder: a
reader sees the old document or the new one, whole (:mod:`._atomic`), and a save that fails at
any point leaves the old file as it was.

Before every open the path is checked (:mod:`statekit.session._safe_files`): no
symbolic link below ``save_dir`` is followed, a hard-linked session file is
refused, and a session path that is a FIFO, socket, device or folder is refused at once.

Writers (saves and deletes) of one session take turns through an exclusive
``flock`` on a hidden lock file beside it (``.<name>.json.lock``, removed by
its holder; what a killed writer leaves is swept, see :mod:`._leftovers`), so that a
conditional save compares and replaces as one step, between threads and
processes alike; the kernel releases the lock when its holder dies. Under the
same lock every write first checks the session's lease record
(``.<name>.json.lease``, :mod:`._file_leases`) against the lease the writing
object holds.

A session that keeps history (``keep_history``) has its past revisions in a
hidden folder beside it (``.<name>.json.history``, :mod:`._file_history`): a save
hard-links the document it replaces into it under the same lock, before the rename.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from collections.abc import Callable
from typing import ClassVar, TypeVar

from statekit.state.flags import check_flag
from statekit.values.secrets import SecretKeys
from statekit.errors import SessionError
from statekit.session._agentscope import (
    Layout,
    check_layout,
    check_legacy_key,
    refuse_empty_session_id,
    legacy_name,
    list_legacy,
    refuse_agentscope_file,
    refuse_case_twin,
)
from statekit.session._base import SessionBase
from statekit.session._ids import SessionKey
from statekit.session._file_names import USER_MARK, decode_id, encode_id, list_folder, some_ids, some_owners
from statekit.session._file_names import history_folder, lease_path, session_file, user_folder
from statekit.session._filelock import LOCK_TIMEOUT, session_lock
from statekit.session._appends import DeltaBase
from statekit.session._archive import Archive, checked_keep
from statekit.session._companion import base_holds, companion, drop_retired, read_session, retire
from statekit.session._atomic import atomic_write
from statekit.session._fence import LeaseBusy, LeaseGrant
from statekit.session._file_history import drop_blobs, get_blob, keep_head, list_blobs, put_blob
from statekit.session._file_leases import fence, release_lease, renew_lease, take_lease
from statekit.session._file_writes import append_if, delete_locked, fenced, refuse_odd_beside
from statekit.session._leftovers import sweep, sweep_due
from statekit.session._read_threads import off_loop
from statekit.session._revisions import MISSING_REVISION, Expected
from statekit.session._safe_files import check_path, check_save_dir, digest_regular, holds_exactly
from statekit.session.document import doc_token

R = TypeVar("R")


def _read_file(path: Path) -> bytes | None:
    return read_session(path)


def _replace_if(
    path: Path, data: bytes, expected: Expected | None, timeout: float, carried: int | None, archive: Archive | None = None
) -> bool:
    """Under the session's lock: write ``data`` if the lease allows it (``carried``: the writer's token)
    and what is stored is ``expected`` (``None``: always); with an ``archive``, keep the old head as
    its blob first (hard links) and drop the pruned blobs after (:mod:`._file_history`)."""
    with session_lock(path, timeout):
        deltas, put_aside = refuse_odd_beside(path)  # under the lock: none can appear before the write
        fence(path, carried)
        if expected is not None and not _holds(path, expected):
            return False
        if archive is not None and archive.keep_as is not None and os.path.lexists(path):
            keep_head(path, archive.keep_as)
        if deltas:
            retire(path)
        atomic_write(path, data, locked=True)
        if deltas or put_aside:
            drop_retired(path)
        if archive is not None and archive.drop:
            drop_blobs(path, archive.drop)
        return True


def _holds(path: Path, expected: Expected) -> bool:
    if expected.only_base:
        assert expected.base is not None
        return base_holds(path, expected.base)
    if type(expected.raw) is bytes and doc_token(expected.raw) is None:
        return holds_exactly(path, expected.raw)  # no deltas can belong to it: the document alone decides
    if expected.raw is None and expected.revision != MISSING_REVISION:
        digest = digest_regular(path)  # a large document whose bytes were not kept: hash it as it is read
        if digest is None or doc_token(digest[1]) is None:
            return digest is not None and digest[0] == expected.revision
    return expected.matches(_read_file(path))


class FileSession(SessionBase):
    """Sessions as files under ``save_dir``; subclasses choose the codec.

    Args:
        save_dir: The folder (created on the first save).
        layout: ``"statekit"`` (the layout above) or ``"agentscope"``:
            AgentScope 1.x's ``{user_id}_{session_id}.json`` names, to open and
            keep writing its session folders (see
            :mod:`statekit.session._agentscope`).
        secret_key: Encrypt ``state_field(secret=True)`` values with this key, or
            with the first of a list of keys, each of which decrypts (see
            :meth:`SessionBase.use_secret_key`).
        omit_secrets: Without a key, leave secret fields out of what is saved;
            ``False`` (the default): such a save is refused with ``SecretError``.
        keep_history: How many past revisions of each session to keep besides it
            (``None``: all; ``0``, the default: none, the files are as without history),
            as blobs in a hidden folder beside it (``.chat-1.json.history``; docs/history.md).

    Raises:
        SessionError: An unknown layout, a ``save_dir`` holding a NUL character or
            naming an existing file that is not a folder, or a bad ``keep_history``.
    """

    offload_codec: ClassVar[bool] = True
    writes_in_threads: ClassVar[bool] = True
    lock_timeout: ClassVar[float] = LOCK_TIMEOUT
    """Seconds a save waits for another writer of the same session before giving up."""

    def __init__(
        self,
        save_dir: str | os.PathLike[str] = "./",
        layout: Layout = "statekit",
        *,
        secret_key: SecretKeys | None = None,
        omit_secrets: bool = False,
        keep_history: int | None = 0,
    ) -> None:
        self.save_dir = check_save_dir(save_dir)
        self.layout = check_layout(layout)
        self.use_secret_key(secret_key)
        self.omit_secrets = check_flag(omit_secrets, "omit_secrets", SessionError)
        self.keep_history = checked_keep(keep_history, type(self), supports=self.supports_history)

    def _saves_deltas(self) -> bool:
        # AgentScope 1.x reads only the document: in its layout every save writes the whole state
        return super()._saves_deltas() and self.layout == "statekit"

    def __repr__(self) -> str:
        layout = "" if self.layout == "statekit" else f", layout={self.layout!r}"
        return f"{type(self).__name__}(save_dir={str(self.save_dir)!r}{layout})"

    def session_path(self, session_id: str, user_id: str | None = None) -> Path:
        """The file a session is stored in (whether or not it exists yet).

        Raises:
            InvalidSessionIdError: An id that cannot be stored.
        """
        return self._path(self.key(session_id, user_id))

    def _folder(self, user_id: str) -> Path:
        return user_folder(self.save_dir, user_id) if self.layout == "statekit" else self.save_dir

    def _path(self, key: SessionKey) -> Path:
        if self.layout == "agentscope":
            return self.save_dir / legacy_name(key, self.codec.suffix)
        return session_file(self.save_dir, key.user_id, key.session_id, self.codec.suffix)

    def key(self, session_id: str, user_id: str | None = None) -> SessionKey:
        """As :meth:`SessionBase.key`; in AgentScope's layout, an empty session id of a user says how to open its file."""
        if self.layout == "agentscope":
            refuse_empty_session_id(session_id, self._user(user_id), self.codec.suffix)
        return super().key(session_id, user_id)

    def _check_key(self, key: SessionKey) -> None:
        if self.layout == "agentscope":
            check_legacy_key(key, self.codec.suffix)
        else:
            self._path(key)  # refuses an id too long for a file name

    def _source(self, key: SessionKey) -> str:
        return str(self._path(key))

    async def _read(self, key: SessionKey) -> bytes | None:
        data = await self._io(key, _read_file, reads=True)
        if data is None and self.layout == "agentscope":
            await asyncio.to_thread(refuse_case_twin, self.save_dir, key, self.codec.suffix)
        elif data is None:
            await asyncio.to_thread(refuse_agentscope_file, self.save_dir, key, self.codec.suffix, self._path(key))
        return data

    async def _write(self, key: SessionKey, data: bytes) -> None:
        await self._write_if_locked(key, data, None)

    async def _write_if(self, key: SessionKey, data: bytes, expected: Expected) -> bool:
        return await self._write_if_locked(key, data, expected)

    async def _write_if_locked(self, key: SessionKey, data: bytes, expected: Expected | None) -> bool:
        carried = self._fence(key)
        return await self._locked_write(
            key, lambda path: _replace_if(path, data, expected, self.lock_timeout, carried), odd_checked=True
        )

    supports_history: ClassVar[bool] = True

    async def _write_keeping(self, key: SessionKey, data: bytes, expected: Expected, archive: Archive) -> bool:
        carried = self._fence(key)
        write = lambda path: _replace_if(path, data, expected, self.lock_timeout, carried, archive)  # noqa: E731
        return await self._locked_write(key, write, odd_checked=True)

    async def _put_blob(self, key: SessionKey, name: str, data: bytes) -> None:
        carried = self._fence(key)
        put = lambda path: fenced(path, self.lock_timeout, carried, lambda: put_blob(path, name, data))  # noqa: E731
        await self._locked_write(key, put)

    async def _drop_blobs(self, key: SessionKey, names: tuple[str, ...]) -> None:
        carried = self._fence(key)
        drop = lambda path: fenced(path, self.lock_timeout, carried, lambda: drop_blobs(path, names))  # noqa: E731
        await self._locked_write(key, drop)

    async def _get_blob(self, key: SessionKey, name: str) -> bytes | None:
        return await self._history(key, lambda path: get_blob(path, name))

    async def _list_blobs(self, key: SessionKey) -> list[str]:
        return await self._history(key, list_blobs) or []

    async def _history(self, key: SessionKey, work: Callable[[Path], R]) -> R | None:
        """Run ``work`` on the session's file in a thread, once its folder is checked (``None``: there is none)."""
        path = self._path(key)

        def checked() -> R | None:
            return work(path) if check_path(self.save_dir, path.parent, folder=True) else None

        try:
            return await asyncio.to_thread(checked)
        except OSError as err:
            raise SessionError(f"cannot read the history of {path} in {history_folder(path)}: {err.strerror or err}") from err

    async def _append(self, key: SessionKey, line: bytes, base: DeltaBase) -> int | None:
        carried = self._fence(key)
        return await self._locked_write(key, lambda path: append_if(path, line, base, self.lock_timeout, carried))

    def _companion_source(self, key: SessionKey) -> str:
        return str(companion(self._path(key)))

    async def _locked_write(self, key: SessionKey, write: Callable[[Path], R], *, odd_checked: bool = False) -> R:
        """Run ``write`` on the session's file in a thread, once its path is checked (and,
        unless ``write`` does it under the lock, ``odd_checked``, the files beside it)."""
        path = self._path(key)

        def work() -> R:
            check_path(self.save_dir, path)
            if not odd_checked:
                refuse_odd_beside(path)
            self._sweep(path.parent)
            return write(path)

        try:
            return await asyncio.to_thread(work)
        except OSError as err:
            raise SessionError(f"cannot save {path}: {err.strerror or err}") from err

    async def _delete(self, key: SessionKey) -> bool:
        carried = self._fence(key)

        def delete(path: Path) -> bool:
            self._sweep(path.parent)
            return delete_locked(path, self.lock_timeout, carried)

        return await self._io(key, delete, leased_too=True) is True

    supports_leases: ClassVar[bool] = True

    async def _take_lease(self, key: SessionKey, ttl: float) -> LeaseGrant | LeaseBusy:
        return await self._leasing(key, lambda path: take_lease(path, ttl, self.lock_timeout))

    async def _renew_lease(self, key: SessionKey, token: int, ttl: float) -> LeaseGrant | None:
        return await self._leasing(key, lambda path: renew_lease(path, token, ttl, self.lock_timeout))

    async def _release_lease(self, key: SessionKey, token: int) -> None:
        await self._leasing(key, lambda path: release_lease(path, token, self.lock_timeout))

    async def _leasing(self, key: SessionKey, work: Callable[[Path], R]) -> R:
        """Run a lease primitive of :mod:`._file_leases` on the session's file in a thread, once its path is checked."""
        path = self._path(key)

        def checked() -> R:
            check_path(self.save_dir, path)
            return work(path)

        try:
            return await asyncio.to_thread(checked)
        except OSError as err:
            raise SessionError(f"cannot keep the lease of {path} in {lease_path(path)}: {err.strerror or err}") from err

    def _sweep(self, folder: Path) -> None:
        """Now and then: clean up after the killed writers of the folder's sessions (see _leftovers.py)."""
        if sweep_due(folder):
            sweep(folder, self.codec.suffix)

    async def _exists(self, key: SessionKey) -> bool:
        return await self._io(key, lambda path: True, reads=True) is True

    async def _list(self, user_id: str) -> list[str]:
        self._check_key(SessionKey(user_id, "s"))  # a user id too long for a folder name, as the other methods say
        folder = self._folder(user_id)

        def work() -> list[str]:
            if not check_path(self.save_dir, folder, folder=True):
                return []
            if self.layout == "agentscope":
                return list_legacy(folder, user_id, self.codec.suffix)
            return list_folder(folder, self.codec.suffix)

        try:
            return await asyncio.to_thread(work)
        except OSError as err:  # save_dir is a file, unreadable...
            raise SessionError(f"cannot list the sessions in {folder}: {err.strerror or err}") from err

    async def _list_some(self, user_id: str, limit: int) -> tuple[list[str], bool]:
        if self.layout == "agentscope":
            return await super()._list_some(user_id, limit)
        folder = self._folder(user_id)
        if not await asyncio.to_thread(check_path, self.save_dir, folder, folder=True):
            return [], False
        return await asyncio.to_thread(some_ids, folder, self.codec.suffix, limit)

    async def _owners(self, session_id: str, limit: int) -> tuple[list[str], bool]:
        if self.layout == "agentscope":
            return [], False
        return await asyncio.to_thread(some_owners, self.save_dir, encode_id(session_id) + self.codec.suffix, limit)

    async def _list_users(self) -> list[str]:
        if self.layout == "agentscope":  # {user_id}_{session_id}.json: a name does not say where the user ends
            raise SessionError(f"{self!r}: a folder in AgentScope's layout cannot tell its users apart")

        def work() -> list[str]:
            try:
                entries = list(os.scandir(self.save_dir))
            except FileNotFoundError:
                return []
            users = [""] if list_folder(self.save_dir, self.codec.suffix) else []
            for entry in entries:
                user = decode_id(entry.name[len(USER_MARK) :]) if entry.name.startswith(USER_MARK) else None
                if user is not None and entry.is_dir(follow_symlinks=False) and list_folder(Path(entry.path), self.codec.suffix):
                    users.append(user)
            return users

        try:
            return await asyncio.to_thread(work)
        except OSError as err:
            raise SessionError(f"cannot list the users in {self.save_dir}: {err.strerror or err}") from err

    async def _io(
        self, key: SessionKey, work: Callable[[Path], R], *, leased_too: bool = False, reads: bool = False
    ) -> R | None:
        """Run ``work`` on the session's file in a thread, once the path is checked; ``None`` when it is absent
        (and, with ``leased_too``, so is its lease record: a delete of a missing session is fenced too).
        ``reads``: ``work`` changes nothing, so it runs on a reader thread (:mod:`._read_threads`)."""
        path = self._path(key)

        def checked() -> R | None:
            present = check_path(self.save_dir, path) or (leased_too and os.path.lexists(lease_path(path)))
            return work(path) if present else None

        try:
            return await (off_loop(checked) if reads else asyncio.to_thread(checked))
        except OSError as err:
            raise SessionError(f"cannot access {path}: {err.strerror or err}") from err
