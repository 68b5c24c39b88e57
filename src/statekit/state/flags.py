"""Checking the ``True``/``False`` arguments of public calls.

Python would take any value as a flag by its truth, so ``overwrite="no"`` would
overwrite without the revision check and ``strict="false"`` would load
strictly. statekit refuses such values instead of guessing.
"""

from __future__ import annotations

import reprlib

from statekit.errors import StatekitError


def check_flag(value: object, name: str, error: type[StatekitError] = StatekitError) -> bool:
    """``value``, when it is ``True`` or ``False``.

    Args:
        value: The argument as given.
        name: The argument's name, for the message.
        error: The error class to raise (``SessionError`` from a session).

    Returns:
        ``value``.

    Raises:
        StatekitError: (or ``error``) ``value`` is anything else, naming the argument.
    """
    if value is True or value is False:
        return value
    raise error(f"{name} must be True or False, got {reprlib.repr(value)}")
