"""In-place checkers for JSON-typed values, for the session fast paths.

A session encodes its document at once, and a session load owns the document
it decoded: in both, a copy of a JSON value would protect nothing, so these
checkers validate and return the value itself (see :mod:`statekit.values.plain` for
the copiers that ``state_dict()`` and ``load_state_dict()`` use). They raise a
bare error; the caller then runs the copying hook, which names every problem.
"""

from __future__ import annotations

import typing
import weakref
from typing import Any

from statekit.values.census import check_any, defer
from statekit.values.plain import (
    NONE_TYPE,
    SCALAR_TYPES,
    Copier,
    Problems,
    BadValue,
    fast_copier,
    kind_checked,
    kind_of,
    find_problems,
    plain_union,
)
from statekit._limits import depth_message, path_too_deep, too_deep
from statekit.errors import Problem, StateDumpError


def _reject(value: Any) -> Any:
    raise BadValue


def _trusted(value: Any) -> Any:
    return value


def _converts(tp: Any) -> bool:
    """Whether checking a value of ``tp`` may have to change it (an int in a float slot)."""
    if tp is float:
        return True
    return any(_converts(arg) for arg in typing.get_args(tp))


def fast_checker(tp: Any, *, fresh: bool = False) -> Copier:
    """Like :func:`fast_copier`, but validate in place and return the value itself.

    For values about to be encoded at once (a session save) or freshly decoded
    by the JSON codec (a session load), where a copy would protect nothing.
    Where a value may need converting (``float`` slots holding ints), it is
    copied. Raises a bare error: the caller runs the copying hook to report.

    Args:
        tp: A JSON type (see :func:`is_json_type`).
        fresh: The value comes straight from the JSON codec's decoder, so
            everything under ``Any`` is JSON data already and is not walked.
    """
    if _converts(tp):
        return fast_copier(tp)
    return _checker(tp, _trusted if fresh else defer)


def _checker(tp: Any, any_check: Copier) -> Copier:
    if tp is Any:
        return any_check
    if tp in (list, dict):
        return kind_checked(tp, any_check)
    if tp is None or tp in SCALAR_TYPES:
        return kind_checked(NONE_TYPE if tp is None else tp, None)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, dict):
        item = _checker(args[-1], any_check)
        if item is _trusted:  # freshly decoded JSON: keys are strings, items JSON data
            return kind_checked(origin, None)
        if item is any_check:  # one walk checks the items
            return kind_checked(origin, any_check)
        kind = _walked_kind(args[-1])
        if origin is list and kind is not None:
            return _list_of(kind, any_check)
        return _list_checker(item) if origin is list else _dict_checker(item)
    return _union_checker(union_members(tp, fresh=any_check is _trusted))


def _walked_kind(tp: Any) -> type | None:
    """``dict`` or ``list`` when a value of ``tp`` is that kind, walked as JSON data."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in (list, dict):
        return tp  # type: ignore[no-any-return]
    if origin in (list, dict) and args[-1] is Any:
        return origin  # type: ignore[no-any-return]
    return None


def union_members(tp: Any, *, fresh: bool = False) -> dict[object, Copier | None]:
    """Checkers of a JSON union's members by JSON kind; ``None`` where the kind is check enough.

    For the fast paths: they raise bare errors. Only for unions with no ``float``
    at any depth (see :func:`checks_in_place`).
    """
    any_check = _trusted if fresh else defer
    return {kind_of(a): _member_checker(a, any_check) for a in typing.get_args(tp)}


def checks_in_place(tp: Any) -> bool:
    """Whether generated code may check a value of ``tp`` inline with :func:`union_check_lines`:
    a :func:`plain_union` with no ``float`` at any depth (an int there must be converted,
    and a float checked for NaN, which only the copier does)."""
    return plain_union(tp) and not _converts(tp)


def union_check_lines(tp: Any, var: str, names: dict[str, Any], *, fresh: bool, add: str | None = None) -> list[str]:
    """Generated lines checking ``var`` in place: plain kinds pass, another member's
    checker runs, any other kind raises (``KeyError``).

    Args:
        tp: A union for which :func:`checks_in_place` holds.
        var: The variable of the generated code that holds the value.
        names: The generated code's globals; the member tables are added to it.
        fresh: The value comes straight from the JSON decoder (``Any`` is not walked).
        add: A local of the generated code holding :func:`~statekit.values.census.deferral`:
            the members :func:`~statekit.values.census.defer` would check (JSON data under
            ``Any``, and lists of it whose items' kinds match) are given to it inline,
            without a call of their checker each.

    Returns:
        The lines, indented for the body of a generated function.
    """
    assert checks_in_place(tp), tp
    members = union_members(tp, fresh=fresh)
    names[f"__p_{var}"] = frozenset(kind for kind, check in members.items() if check is None)
    names[f"__m_{var}"] = {kind: check for kind, check in members.items() if check is not None}
    dispatch = f"__m_{var}[type({var})]({var})"
    tests = [] if add is None or fresh else _deferred_tests(names[f"__m_{var}"], var, names)
    if not tests:
        return [f"    if type({var}) not in __p_{var}:", f"        {dispatch}"]
    return [
        f"    if type({var}) not in __p_{var}:",
        f"        if {' or '.join(tests)}:",
        f"            {add}({var})",
        "        else:",
        f"            {dispatch}",
    ]


def _deferred_tests(members: dict[object, Copier], var: str, names: dict[str, Any]) -> list[str]:
    """The tests of the union's member checkers (by kind) that defer the whole value: the deferral itself (a
    kind walked as JSON data), or a :func:`_list_of` one (the items' kinds checked first, in C). A value
    that fails them goes to its member's checker, which refuses it as before."""
    tests: list[str] = []
    walked = frozenset(kind for kind, check in members.items() if check is defer)
    if walked:
        names[f"__d_{var}"] = walked
        tests.append(f"type({var}) in __d_{var}")
    on_lists = members.get(list)
    listed = None if on_lists is None else _LISTS_OF.get(on_lists)
    if listed is not None and listed[1] is defer:
        names[f"__l_{var}"] = listed[0]
        tests.append(f"(type({var}) is list and __l_{var}.issuperset(map(type, {var})))")
    return tests


def _member_checker(tp: Any, any_check: Copier) -> Copier | None:
    if tp is None or tp in SCALAR_TYPES:
        return None
    if _walked_kind(tp) is not None:  # the kind matched already
        return None if any_check is _trusted else any_check
    return _checker(tp, any_check)


def _list_of(kind: type, any_check: Copier) -> Copier:
    only = frozenset((kind,))

    def check(value: Any) -> Any:
        if type(value) is not list or not only.issuperset(map(type, value)):
            raise BadValue
        return any_check(value)  # the items' kinds are checked: one walk (or deferral) for the whole list

    _LISTS_OF[check] = (only, any_check)
    return check


_LISTS_OF: weakref.WeakKeyDictionary[Copier, tuple[frozenset[type], Copier]] = weakref.WeakKeyDictionary()
"""What each :func:`_list_of` checker accepts and hands its list to (read by :func:`_deferred_tests`)."""


def _union_checker(by_kind: dict[object, Copier | None]) -> Copier:
    def check(value: Any) -> Any:
        member = by_kind.get(type(value), _reject)
        if member is None:
            return value
        return member(value)

    return check


def _list_checker(item: Copier) -> Copier:
    def check(value: Any) -> Any:
        if type(value) is not list:
            raise BadValue
        for element in value:
            item(element)
        return value

    return check


def _dict_checker(item: Copier) -> Copier:
    def check(value: Any) -> Any:
        if type(value) is not dict:
            raise BadValue
        for key, element in value.items():
            if type(key) is not str:
                raise BadValue
            item(element)
        return value

    return check


def refuse_non_json(data: Any) -> None:
    """Refuse plain data that a codec would write changed (NaN and infinities as
    ``null``, tuples as lists, enums as their values) or nested past ``MAX_DEPTH``.

    For documents handed over whole (``write_document``, ``statekit convert``),
    which no type describes.

    Raises:
        StateDumpError: Naming every such value by its path (the first one too deep).
    """
    if too_deep(data):
        raise StateDumpError([Problem(path_too_deep(data) or (), depth_message())])
    try:
        check_any(data)
    except BadValue:
        found: Problems = []
        find_problems(Any, data, (), found)
        raise StateDumpError([Problem(path, message) for path, message in found]) from None
