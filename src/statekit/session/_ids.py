"""Session ids: what a backend is given to map to its storage, and the checks every id passes."""

from __future__ import annotations

import attrs

from statekit.values.plain import describe
from statekit.errors import InvalidSessionIdError

MAX_ID_LENGTH = 200
"""The longest ``session_id`` or ``user_id``, in characters."""


@attrs.frozen
class SessionKey:
    """Which session: checked ids, ready for a backend to map to its storage.

    Attributes:
        user_id: The owner; ``""`` for "no particular user".
        session_id: The session, never empty.
    """

    user_id: str
    session_id: str


def check_id(value: object, what: str, *, allow_empty: bool = False) -> str:
    """Check a ``session_id`` or ``user_id``.

    Args:
        value: The id given by the caller.
        what: ``"session_id"`` or ``"user_id"``, for the message.
        allow_empty: Whether ``""`` is allowed (it is for ``user_id``).

    Returns:
        The id, unchanged.

    Raises:
        InvalidSessionIdError: Not a ``str``, empty, longer than
            :data:`MAX_ID_LENGTH`, or holding NUL or a lone surrogate.
    """
    if not isinstance(value, str):
        raise InvalidSessionIdError(f"{what} must be a string, got {describe(value)}")
    if not value and not allow_empty:
        raise InvalidSessionIdError(f"{what} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidSessionIdError(f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    if "\x00" in value:
        raise InvalidSessionIdError(f"{what} {value!r} contains a NUL character")
    if not value.isascii():
        _check_utf8(value, what)
    return value


def _check_utf8(value: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidSessionIdError(f"{what} {value!r} contains a lone surrogate") from None
