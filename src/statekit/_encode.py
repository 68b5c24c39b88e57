"""The converter a session save encodes with, straight from the live objects."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import cattrs

from statekit._checkers import fast_checker
from statekit._convert import is_record, make_converter
from statekit._json import is_json_type

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
        lambda t: is_json_type(t) and t not in (str, int, bool, type(None), None), fast_checker
    )
    conv.register_unstructure_hook_factory(_is_record_list, _record_list_unstructure)
    return conv


def _is_record_list(tp: Any) -> bool:
    args = typing.get_args(tp)
    return typing.get_origin(tp) is list and len(args) == 1 and is_record(args[0])


def _record_list_unstructure(tp: Any, conv: cattrs.Converter) -> Hook:
    item = conv.get_unstructure_hook(typing.get_args(tp)[0])
    return lambda value: [item(v) for v in value]


__all__ = ["make_encode_converter"]
