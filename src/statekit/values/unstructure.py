"""Generated record unstructuring for ``state_dict()``: cattrs' job, with JSON unions inline.

cattrs' generated function calls one hook per field. For a message whose
``content`` is ``str | list[dict[str, Any]]`` that hook is a union copier
that looks the kind up and calls the member's copier, which checks the kind
again: three calls to return a string. Here a union of JSON kinds is
dispatched inline: a plain kind (a string, ``None``) is returned as it is,
another kind goes straight to its member's copier, and any other kind raises
(``KeyError``); the dump then walks the value slowly to name the problem.
A session save's converter checks in place instead of copying (see
:mod:`statekit.values.checks`): its unions are dispatched inline the same way.
Every other field keeps the converter's own hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import cattrs
from cattrs.fns import identity

from statekit.values.checks import union_check_lines
from statekit.values.codegen import compile_function
from statekit.values.plain import JSONValueError, describe, plain_union, union_copy_lines, with_article

Hook = Callable[[Any], Any]
JSON_HOOK = "__statekit_json__"
"""Set on statekit's own unstructure hook for a JSON type (the type it copies)."""

JSON_CHECK = "__statekit_json_check__"
"""Set on the in-place checker of a plain JSON union that a session save encodes with (the type it checks)."""

SCALAR_KIND = "__statekit_scalar__"
"""Set on the unstructure hook of ``str``, ``int``, ``bool`` and ``None``: the exact type it passes."""


def record_unstructure(tp: type, conv: cattrs.Converter, hints: dict[str, Any]) -> Hook:
    """Generate ``unstructure(o)`` for an attrs record (no field with a ``to_json``)."""
    names: dict[str, Any] = {"__cl": tp, "__wrong": _wrong_record(tp)}
    lines = ["    if type(o) is not __cl:", "        __wrong(o)"]
    items: list[str] = []
    for index, field in enumerate(f for f in attrs.fields(tp) if f.init):  # cattrs leaves init=False out too
        var = f"a{index}"
        lines.append(f"    {var} = o.{field.name}")
        lines.extend(_field_lines(hints.get(field.name, Any), var, names, conv))
        items.append(f"{field.name!r}: {var}")
    lines.append(f"    return {{{', '.join(items)}}}")
    return _compile(tp, lines, names)


def refusal(what: str) -> Hook:
    """What a dump calls with a value of another class than ``what`` it writes."""

    def refuse(value: Any) -> Any:
        raise JSONValueError([((), f"expected {what}, got {describe(value)}")])

    return refuse


def _wrong_record(tp: type) -> Hook:
    """A record's refusal of another class (a subclass, a look-alike): its fields
    would be written as ``tp``'s, and loaded back as a ``tp``."""
    return refusal(with_article(tp.__qualname__))


def exactly(kind: type, dump: Hook, what: str | None = None) -> Hook:
    """``dump``, refusing any value whose class is not exactly ``kind`` (a subclass
    too): it would load back as another value. ``what`` names ``kind`` in the error."""
    refuse = refusal(what) if what is not None else _wrong_record(kind)

    def checked(value: Any) -> Any:
        if type(value) is not kind:
            refuse(value)
        return dump(value)

    return checked


def _field_lines(tp: Any, var: str, names: dict[str, Any], conv: cattrs.Converter) -> list[str]:
    hook = conv.get_unstructure_hook(tp)
    if hook is identity:
        return []
    kind = getattr(hook, SCALAR_KIND, None)
    if kind is not None:
        names[f"__h_{var}"], names[f"__k_{var}"] = hook, kind
        return [f"    if type({var}) is not __k_{var}:", f"        __h_{var}({var})"]
    if getattr(hook, JSON_HOOK, None) == tp and plain_union(tp):
        return union_copy_lines(tp, var, names)
    if getattr(hook, JSON_CHECK, None) == tp:
        return union_check_lines(tp, var, names, fresh=False)
    names[f"__h_{var}"] = hook
    return [f"    {var} = __h_{var}({var})"]


def _compile(tp: type, body: list[str], names: dict[str, Any]) -> Hook:
    return compile_function("unstructure(o)", body, names, f"unstructure {tp.__module__}.{tp.__qualname__}")


__all__ = ["JSON_CHECK", "JSON_HOOK", "SCALAR_KIND", "exactly", "record_unstructure", "refusal"]
