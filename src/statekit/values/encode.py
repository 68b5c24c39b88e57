"""The converter a session save encodes with, straight from the live objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cattrs

from statekit.values.checks import checks_in_place, fast_checker
from statekit.values.converter import make_converter
from statekit.values.plain import is_json_type
from statekit.values.types import Role, made

Hook = Callable[[Any], Any]


def make_encode_converter() -> cattrs.Converter:
    """statekit's converter for encoding straight from live objects (a session save).

    The same hooks, except that JSON-typed values are validated in place
    instead of copied: the result is encoded at once, before anything can
    change the objects, so a copy would protect nothing. Its hooks raise bare
    errors; the caller runs the copying hook to say what is wrong, and where.
    """
    conv = make_converter()
    conv.register_unstructure_hook_factory(
        lambda t: is_json_type(t) and t not in (str, int, bool, type(None), None), _checker
    )
    return conv


def _checker(tp: Any) -> Hook:
    check = fast_checker(tp)
    if checks_in_place(tp):  # a closure of its own: generated record code may check the union inline
        return made(check, Role.CHECKS, tp)
    return check


__all__ = ["make_encode_converter"]
