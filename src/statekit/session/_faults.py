"""A backend's own faults, told as statekit errors.

A backend written by a user may let a storage error through (``OSError``,
``KeyError``, ``sqlite3.Error``) or return something other than bytes from
``_read``. Every call of a storage primitive goes through here, so that such a
fault reaches the caller as a :class:`~statekit.errors.SessionError` naming the
backend, the primitive and the session (the original as its ``__cause__``),
never as an exception a caller of ``save`` or ``load`` could not expect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import TracebackType

from statekit.values.plain import describe
from statekit.errors import SessionError, StatekitError


class BackendFaults:
    """A context manager around one call of a storage primitive.

    A :class:`~statekit.errors.StatekitError` (what the built-in backends raise)
    and a ``BaseException`` that is not an ``Exception`` (a cancellation) go
    through unchanged; any other exception becomes a ``SessionError``.
    """

    __slots__ = ("_backend", "_primitive", "_where")

    def __init__(self, backend: object, primitive: str, where: Callable[[], str]) -> None:
        self._backend = backend
        self._primitive = primitive
        self._where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        if error is None or isinstance(error, StatekitError) or not isinstance(error, Exception):
            return
        raise SessionError(f"{self._where()}: {self._name()} raised {type(error).__name__}: {error}") from error

    def _name(self) -> str:
        return f"{type(self._backend).__name__}.{self._primitive}"


def read_bytes(raw: object, backend: object, where: Callable[[], str]) -> bytes | None:
    """What ``_read`` returned, as bytes (a ``bytearray`` or ``memoryview`` is copied).

    Raises:
        SessionError: It is neither bytes-like nor ``None`` (a ``str``, a row...).
    """
    if raw is None or isinstance(raw, bytes):
        return raw
    if isinstance(raw, bytearray | memoryview):
        return bytes(raw)
    raise SessionError(
        f"{where()}: {type(backend).__name__}._read returned {describe(raw)}; "
        "it must return the stored bytes, or None when there is no such session"
    )


def listed_ids(ids: object, backend: object, where: Callable[[], str]) -> list[str]:
    """What ``_list`` returned, sorted.

    Raises:
        SessionError: It is not an iterable of ``str`` ids.
    """
    if isinstance(ids, str | bytes | Mapping) or not isinstance(ids, Iterable):
        raise _not_ids(describe(ids), backend, where)
    listed = list(ids)
    for session_id in listed:
        if not isinstance(session_id, str):
            raise _not_ids(f"an id that is {describe(session_id)}", backend, where)
    return sorted(listed)


def _not_ids(what: str, backend: object, where: Callable[[], str]) -> SessionError:
    return SessionError(f"{where()}: {type(backend).__name__}._list returned {what}; it must return a list of str ids")
