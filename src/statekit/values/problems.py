"""Error paths: where a cattrs error tree, a failed codec or a failed dump points.

Only failures come here: the fast paths never track paths; these walkers turn
what went wrong into ``(path, message)`` pairs, once, after the fact.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from typing import Any

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from statekit.values.containers import Hook, is_collection, is_mapping, is_tuple
from statekit.values.annotations import field_types, fields_of, is_record
from statekit.values.fields import field_codec
from statekit.values.records import dump_with
from statekit.values.plain import JSONValueError, describe, is_json_type
from statekit.errors import PathSegment, StateVersionError

Problems = list[tuple[tuple[PathSegment, ...], str]]


def problems_of(exc: BaseException, path: tuple[PathSegment, ...] = ()) -> Problems:
    """Flatten a cattrs error tree (or any exception) into ``(path, message)`` pairs.

    Raises:
        StateVersionError: One is in the tree (a record's data cannot be
            migrated), now with its full path: it is not one problem among
            others but the reason nothing loads.
    """
    out: Problems = []
    _walk(exc, path, out)
    return out


def _walk(exc: BaseException, path: tuple[PathSegment, ...], out: Problems) -> None:
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        with_notes, without = exc.group_exceptions()
        for inner, note in with_notes:
            step = note.name if hasattr(note, "name") else note.index
            _walk(inner, (*path, step), out)
        for inner in without:
            _walk(inner, path, out)
    elif isinstance(exc, StateVersionError):
        raise exc.under(path) from exc.__cause__
    elif isinstance(exc, ForbiddenExtraKeysError):
        known = [f.name for f in fields_of(exc.cl)] if is_record(exc.cl) else []
        out.extend(unknown_entry(path, key, known) for key in sorted(exc.extra_fields, key=repr))
    elif isinstance(exc, JSONValueError):
        out.extend(((*path, *rel), message) for rel, message in exc.problems)
    elif isinstance(exc, KeyError) and _from_cattrs(exc):
        out.append((path, "required key is missing"))
    elif (field := refused_field(exc)) is not None:
        out.append(((*path, field.name), exc.args[0]))
    else:
        out.append((path, message_of(exc)))


def refused_field(exc: BaseException) -> attrs.Attribute[Any] | None:
    """The field an error of attrs' validators (``instance_of``, ``in_``, ``matches_re``...) names.

    They raise ``Error(message, attribute, ...)``, whose ``str()`` is a tuple:
    :func:`problems_of` reports the message at the field, below the record's path.
    """
    args = exc.args
    if len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], attrs.Attribute):
        return args[1]
    return None


def unknown_entry(path: tuple[PathSegment, ...], key: object, known: Iterable[str]) -> tuple[tuple[PathSegment, ...], str]:
    """The problem of a key ``path`` does not know: at the key, or (not a string) at ``path``."""
    if isinstance(key, str):
        return (*path, key), unknown_key(key, known)
    return path, not_a_string_key(key)


def not_a_string_key(key: object) -> str:
    """The message for a key that is not a string (given in Python data: JSON has none)."""
    return f"the key {key!r:.40} is {describe(key)}; keys are strings"


def unknown_key(key: str, known: Iterable[str]) -> str:
    """The message for an unknown key, with the known key it is probably a typo of."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f"unknown key; did you mean {close[0]!r}?" if close else "unknown key"


def dump_problems(conv: cattrs.Converter, tp: Any, value: Any, path: tuple[PathSegment, ...]) -> Problems:
    """Find where dumping ``value`` as ``tp`` fails (run once, after a failure).

    The generated dump functions do not track paths; this walks records and
    collections one level at a time, retrying each part, down to the culprit.
    """
    try:
        conv.get_unstructure_hook(tp)(value)
    except Exception as exc:  # noqa: BLE001 - located below
        return _located(conv, tp, value, path) or problems_of(exc, path)
    return []


def _located(conv: cattrs.Converter, tp: Any, value: Any, path: tuple[PathSegment, ...]) -> Problems:
    if is_record(type(value)) and not is_json_type(tp):
        return _record_problems(conv, value, path)
    args = typing.get_args(tp)
    if is_mapping(tp) and len(args) == 2 and isinstance(value, dict):
        return [p for k, v in value.items() for p in dump_problems(conv, args[1], v, (*path, k))]
    if is_collection(tp) and not is_mapping(tp) and args and not is_tuple(tp) and isinstance(value, Iterable):
        return [p for i, v in enumerate(value) for p in dump_problems(conv, args[0], v, (*path, i))]
    return []


def _record_problems(conv: cattrs.Converter, record: Any, path: tuple[PathSegment, ...]) -> Problems:
    types_by_name = dict(zip((f.name for f in fields_of(type(record))), field_types(type(record)), strict=False))
    out: Problems = []
    for field in fields_of(type(record)):
        codec = field_codec(field) if attrs.has(type(record)) else None
        value = getattr(record, field.name)
        if codec is not None and codec.to_json is not None:
            out.extend(_codec_problems(codec.to_json, value, (*path, field.name)))
        else:
            out.extend(dump_problems(conv, types_by_name.get(field.name, Any), value, (*path, field.name)))
    return out


def _codec_problems(to_json: Hook, value: Any, path: tuple[PathSegment, ...]) -> Problems:
    try:
        dump_with(to_json)(value)
    except Exception as exc:  # noqa: BLE001 - reported with its path
        return problems_of(exc, path)
    return []


def _from_cattrs(exc: KeyError) -> bool:
    """cattrs' generated code reads ``o['name']``; its KeyError names the attribute."""
    notes = getattr(exc, "__notes__", [])
    return any(getattr(note, "name", None) == (exc.args[0] if exc.args else None) for note in notes)


def message_of(exc: BaseException) -> str:
    """A one-line message for an exception raised by a hook or a codec."""
    text = str(exc)
    if isinstance(exc, (TypeError, ValueError)) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def only_extra_keys(exc: BaseException) -> bool:
    """Whether every leaf of a cattrs error tree is an unknown-key error."""
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        return all(only_extra_keys(e) for e in exc.exceptions)
    return isinstance(exc, ForbiddenExtraKeysError)
