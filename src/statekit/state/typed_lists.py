"""Lists in a typed document (see :mod:`.typed`): found by their path, extended with appended items."""

from __future__ import annotations

import functools
import types
from collections.abc import Sequence
from typing import Any, Union, get_args, get_origin

import msgspec
import orjson

from statekit.errors import PathSegment


def list_at(document: Any, path: Sequence[PathSegment]) -> list[Any] | None:
    """The list at ``path`` (keys from the document's root), ``None`` when there is none."""
    found = _place(document, path)
    return None if found is None else found[0]


def extend_at(document: Any, path: Sequence[PathSegment], items: list[Any]) -> bool:
    """Append ``items`` (plain JSON data) to the list at ``path``, decoded as its type says.

    Returns:
        ``False``, nothing changed, when there is no such list or the items are not of its
        type (the full path then says why).
    """
    found = _place(document, path)
    if found is None:
        return False
    target, tp = found
    if tp is Any:
        target.extend(items)  # plain JSON, as the full path holds it
        return True
    decoder = _items_decoder(tp)
    if decoder is None:
        return False
    try:  # through JSON bytes: exactly what decoding the document would have made of them
        target.extend(decoder.decode(orjson.dumps(items)))
    except (msgspec.MsgspecError, orjson.JSONEncodeError, RecursionError, UnicodeDecodeError):
        return False
    return True


def _place(document: Any, path: Sequence[PathSegment]) -> tuple[list[Any], Any] | None:
    """The list at ``path`` and its declared type (``Any`` inside plain data)."""
    node, tp = document, Any
    for key in path:
        if not isinstance(key, str):
            return None
        if isinstance(node, msgspec.Struct):
            field = _fields(type(node)).get(key)
            if field is None:
                return None
            node, tp = getattr(node, field.name), field.type
        elif isinstance(node, dict):
            node, tp = node.get(key), Any
        else:
            return None
    return (node, tp) if isinstance(node, list) else None


@functools.lru_cache(maxsize=1024)
def _fields(struct: type) -> dict[str, msgspec.structs.FieldInfo]:
    """A mirror Struct's fields by the keys they decode from (mirror types are made once per shape)."""
    return {field.encode_name: field for field in msgspec.structs.fields(struct)}


@functools.lru_cache(maxsize=256)
def _items_decoder(tp: Any) -> msgspec.json.Decoder[Any] | None:
    """A decoder of a list of the items a list of type ``tp`` holds (``None``: ``tp`` is not a list's)."""
    args = [arg for arg in get_args(tp) if arg is not type(None)]
    if get_origin(tp) in (Union, types.UnionType) and len(args) == 1:
        tp = args[0]  # the list a nullable field holds
    if get_origin(tp) is not list:
        return None
    return msgspec.json.Decoder(tp)


__all__ = ["extend_at", "list_at"]
