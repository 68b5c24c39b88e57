"""Validating copiers for JSON-typed values (``Any``, ``dict[str, Any]``, ...).

Plain cattrs walks ``dict[str, Any]`` value by value through its dispatch; agent
messages are mostly such blobs (tool-use blocks), so statekit builds one small
closure per JSON type instead: it checks the JSON kind with ``type(v) is ...``
and copies containers in the same pass. When a copier fails, a slow walker runs
once to find *every* bad value and its path; the fast path never tracks paths.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

from statekit.errors import PathSegment

Copier = Callable[[Any], Any]
Problems = list[tuple[tuple[PathSegment, ...], str]]

NONE_TYPE = type(None)
SCALAR_TYPES = (str, int, float, bool, NONE_TYPE)
_KIND_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    NONE_TYPE: "null",
    list: "a list",
    dict: "an object",
}


class JSONValueError(ValueError):
    """A value is not of its declared JSON type; carries every problem found.

    Attributes:
        problems: ``(relative path, message)`` pairs.
    """

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in problems))


def describe(value: Any) -> str:
    """Name the JSON kind (or Python type) of ``value`` for an error message."""
    if type(value) is float and value - value != 0.0:
        return f"{value} (not a finite number)"
    return _KIND_NAMES.get(type(value)) or with_article(type(value).__qualname__)


def with_article(noun: str) -> str:
    """``"an Agent"``, ``"a dict"``: a noun with its indefinite article."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


class BadValue(Exception):
    """Raised by the fast copiers; the entry point turns it into a full report."""


PLAIN_SCALARS = frozenset((str, int, bool, NONE_TYPE))
"""The JSON scalars a copy returns as they are (``float`` is checked: NaN has no JSON form)."""


def _copy_any(value: Any) -> Any:
    kind = type(value)
    # plain items are tested inline: a call per string would cost more than the test
    # (_copy_dict_of_any repeats the dict comprehension, saving a call per metadata dict: change both)
    if kind is dict:
        return {k if type(k) is str else _bad(): v if type(v) in PLAIN_SCALARS else _copy_any(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in PLAIN_SCALARS else _copy_any(v) for v in value]
    if kind in PLAIN_SCALARS:
        return value
    if kind is float and value - value == 0.0:  # NaN and infinities have no JSON form
        return value
    raise BadValue


def _bad() -> str:
    raise BadValue


def copy_any(value: Any) -> Any:
    """Deep-copy JSON data, raising :class:`JSONValueError` on anything else.

    Scalars come back as they are (they are immutable); lists and dicts are
    rebuilt so that the copy shares no container with ``value``.
    """
    try:
        return _copy_any(value)
    except BadValue:
        raise _fail(Any, value) from None


def copy_loose(value: Any) -> Any:
    """:func:`copy_any`, but with AgentScope's json rule: what ``json.dumps`` writes is JSON data.

    For what users hand over untyped: registered attributes, ``to_json``
    results, overriding ``state_dict()`` results and foreign modules' states
    (AgentScope's memories hold ``(message, marks)`` pairs). Tuples and list
    subclasses are arrays, dict subclasses (``OrderedDict``) objects, and
    ``str`` / ``int`` / ``float`` subclasses (``str`` and ``int`` enums) their
    plain values, as ``json.dumps`` writes them: they load back as the plain
    JSON type. Typed fields keep refusing them.
    """
    try:
        return _copy_any(value)
    except BadValue:
        return copy_any(_as_json(value))  # rare: a second pass only then


def _as_json(value: Any) -> Any:
    """``value`` with what ``json.dumps`` writes as JSON made plain (the rest left for :func:`copy_any` to refuse)."""
    kind = type(value)
    if kind in PLAIN_SCALARS or kind is float:
        return value
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {str.__str__(k) if isinstance(k, str) else k: _as_json(v) for k, v in value.items()}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # an int enum: json.dumps writes int.__repr__
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return value


def _fail(tp: Any, value: Any) -> JSONValueError:
    """Build the error for a failed fast copy by walking ``value`` slowly."""
    problems: Problems = []
    find_problems(tp, value, (), problems)
    return JSONValueError(problems or [((), f"unexpected {describe(value)}")])


def is_json_type(tp: Any) -> bool:
    """Whether ``tp`` is built only of JSON kinds (so one copier serves it)."""
    if tp is Any or tp in SCALAR_TYPES or tp is None or tp in (list, dict):
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return is_json_type(args[0])
    if origin is dict:
        return args[0] is str and is_json_type(args[1])
    if origin in (typing.Union, types.UnionType):
        kinds = [kind_of(a) for a in args]
        return all(is_json_type(a) for a in args) and _distinct(kinds)
    return False


def kind_of(tp: Any) -> object:
    if tp is None or tp is NONE_TYPE:
        return NONE_TYPE
    if tp is Any:
        return Any
    return typing.get_origin(tp) or tp


def _distinct(kinds: list[object]) -> bool:
    """A union is copied by JSON kind only when no two members share one."""
    if Any in kinds:
        return False
    numeric = [k for k in kinds if k in (int, float)]
    return len(set(kinds)) == len(kinds) and len(numeric) <= 1


def make_copier(tp: Any) -> Copier:
    """Return a validating copier for a JSON type (see :func:`is_json_type`).

    The copier raises :class:`JSONValueError` listing every bad value.
    """
    fast = _fast_copier(tp)

    def copy(value: Any) -> Any:
        try:
            return fast(value)
        except BadValue:
            raise _fail(tp, value) from None

    return copy


def fast_copier(tp: Any) -> Copier:
    """A copier for ``tp`` that raises a bare exception, for the fast paths."""
    return _fast_copier(tp)


def _fast_copier(tp: Any) -> Copier:
    if tp is Any:
        return _copy_any
    if tp is dict:
        return _copy_dict_of_any  # the same as dict[str, Any]
    if tp is list:
        return kind_checked(list, _copy_any)
    if tp is float:
        return _copy_float
    if tp is None or tp in SCALAR_TYPES:
        return kind_checked(NONE_TYPE if tp is None else tp, None)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return list_copier(_fast_copier(args[0]))
    if origin is dict:
        return dict_copier(_fast_copier(args[1]))
    return _union_copier({kind_of(a): _fast_copier(a) for a in args})


def kind_checked(kind: type, then: Copier | None) -> Copier:
    def copy(value: Any) -> Any:
        if type(value) is not kind:
            raise BadValue
        return value if then is None else then(value)

    return copy


def _copy_float(value: Any) -> Any:
    kind = type(value)
    if kind is float and value - value == 0.0:
        return value
    if kind is int and -_FLOAT_BOUND < value < _FLOAT_BOUND:
        return float(value)
    raise BadValue


def list_copier(item: Copier) -> Copier:
    """Copy a list item by item with ``item`` (fast path: raises a bare error)."""

    def copy(value: Any) -> Any:
        if type(value) is not list:
            raise BadValue
        return [item(v) for v in value]

    return copy


def dict_copier(item: Copier) -> Copier:
    """Copy a ``dict[str, X]`` value by value with ``item`` (fast path)."""
    if item is _copy_any:  # plain values are tested inline, as in _copy_any
        return _copy_dict_of_any

    def copy(value: Any) -> Any:
        if type(value) is not dict:
            raise BadValue
        return {k if type(k) is str else _bad(): item(v) for k, v in value.items()}

    return copy


def _copy_dict_of_any(value: Any) -> Any:
    if type(value) is not dict:
        raise BadValue
    return {k if type(k) is str else _bad(): v if type(v) in PLAIN_SCALARS else _copy_any(v) for k, v in value.items()}


def _union_copier(by_kind: dict[object, Copier]) -> Copier:
    if float in by_kind:
        by_kind[int] = by_kind[float]

    def copy(value: Any) -> Any:
        member = by_kind.get(type(value))
        if member is None:
            raise BadValue
        return member(value)

    return copy


def plain_union(tp: Any) -> bool:
    """A union of JSON kinds (``str | list[dict[str, Any]]``) that generated code may
    dispatch inline: each kind once, no ``float`` (an int there is converted)."""
    if typing.get_origin(tp) not in (typing.Union, types.UnionType) or not is_json_type(tp):
        return False
    return float not in typing.get_args(tp)


def union_copy_lines(tp: Any, var: str, names: dict[str, Any]) -> list[str]:
    """Generated lines copying ``var`` of :func:`plain_union` type ``tp``: a plain kind
    stays as it is, another member's copier copies, any other kind raises ``KeyError``."""
    members = {kind_of(arg): arg for arg in typing.get_args(tp)}
    names[f"__p_{var}"] = frozenset(kind for kind in members if kind in SCALAR_TYPES)  # float is not in a plain union
    names[f"__m_{var}"] = {kind: _fast_copier(arg) for kind, arg in members.items() if kind not in names[f"__p_{var}"]}
    return [f"    if type({var}) not in __p_{var}:", f"        {var} = __m_{var}[type({var})]({var})"]


def find_problems(tp: Any, value: Any, path: tuple[PathSegment, ...], out: Problems) -> None:
    """Append every place where ``value`` departs from JSON type ``tp``."""
    if tp is Any or tp in (list, dict):
        _any_problems(tp, value, path, out)
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        _union_problems(tp, args, value, path, out)
    elif origin is list:
        _list_problems(tp, args[0], value, path, out)
    elif origin is dict:
        _dict_problems(tp, args[1], value, path, out)
    elif tp is float and type(value) is int and not _scalar_fits(tp, value):
        out.append((path, "expected a number, got an integer too large for a float (beyond 1.8e308)"))
    elif not _scalar_fits(tp, value):
        out.append((path, f"expected {expected_name(tp)}, got {describe(value)}"))


def _scalar_fits(tp: Any, value: Any) -> bool:
    kind = type(value)
    if tp is float:
        return (kind is float and value - value == 0.0) or (kind is int and -_FLOAT_BOUND < value < _FLOAT_BOUND)
    return kind is (NONE_TYPE if tp is None else tp)


_FLOAT_BOUND = 2**1024 - 2**970
"""The first integer ``float()`` overflows on: halfway from the largest float to
2**1024, where rounding goes up (smaller ones round to a float, as msgspec's do)."""


def _any_problems(tp: Any, value: Any, path: tuple[PathSegment, ...], out: Problems) -> None:
    if tp is not Any and type(value) is not tp:
        out.append((path, f"expected {expected_name(tp)}, got {describe(value)}"))
    elif type(value) is dict:
        _dict_problems(dict, Any, value, path, out)
    elif type(value) is list:
        _list_problems(list, Any, value, path, out)
    elif type(value) not in SCALAR_TYPES or (type(value) is float and value - value != 0.0):
        out.append((path, f"{describe(value)} is not JSON data"))


def _list_problems(
    tp: Any, item: Any, value: Any, path: tuple[PathSegment, ...], out: Problems
) -> None:
    if type(value) is not list:
        out.append((path, f"expected {expected_name(tp)}, got {describe(value)}"))
        return
    for index, element in enumerate(value):
        find_problems(item, element, (*path, index), out)


def _dict_problems(
    tp: Any, item: Any, value: Any, path: tuple[PathSegment, ...], out: Problems
) -> None:
    if type(value) is not dict:
        out.append((path, f"expected {expected_name(tp)}, got {describe(value)}"))
        return
    for key, element in value.items():
        if type(key) is not str:
            out.append((path, f"object keys must be strings, got {describe(key)}"))
        else:
            find_problems(item, element, (*path, key), out)


def _union_problems(
    tp: Any, args: tuple[Any, ...], value: Any, path: tuple[PathSegment, ...], out: Problems
) -> None:
    for member in args:
        if kind_of(member) is type(value) or (member is float and type(value) is int):
            find_problems(member, value, path, out)
            return
    out.append((path, f"expected {expected_name(tp)}, got {describe(value)}"))


def expected_name(tp: Any) -> str:
    """What a value of type ``tp`` is, in the words of error messages (``an integer or null``)."""
    if tp is Any:
        return "JSON data"
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and all(_plain(a) for a in typing.get_args(tp)):
        return " or ".join(expected_name(a) for a in typing.get_args(tp))
    return _KIND_NAMES.get(NONE_TYPE if tp is None else tp) or type_name(tp)


def _plain(tp: Any) -> bool:
    return tp is None or tp in _KIND_NAMES


def type_name(tp: Any) -> str:
    """A short, readable name for a type in error messages."""
    if tp is None or tp is NONE_TYPE:
        return "null"
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")
