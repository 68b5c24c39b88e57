"""Dumping state: the walk from live modules to plain JSON data.

``state_dict()`` walks a module through :func:`dump_root`; sessions call
:func:`dump_many`, which can share validated JSON values with the live objects
(``live``, for data encoded at once) and hold append-only lists aside
(``held``) so that a save writes only their new items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import cattrs

from statekit.values.census import checks_deferred
from statekit.values.cycles import TooDeep, module_problem, value_problem
from statekit.state.foreign import SupportsState, protocol_class
from statekit.values.plain import JSONValueError, copy_loose, describe, with_article
from statekit._limits import MAX_DEPTH
from statekit.state.overrides import dump_override
from statekit.state.plan import DEFAULT_CONVERTER, FieldPlan
from statekit.values.problems import dump_problems, problems_of
from statekit.values.secrets import seal_into
from statekit.state.base import StateBase, is_module, plan_of, state_extras, walks_dump
from statekit.values.versions import VERSION_KEY, tag
from statekit.errors import PathSegment, Problem, StatekitError, StateDumpError

Path = tuple[PathSegment, ...]


@attrs.frozen
class HeldList:
    """An append-only list met by a dump: whose it is, how it encodes, where it goes.

    Attributes:
        owner: The module holding it.
        plan: The field's plan.
        value: The live list.
        path: The state keys from the document's root to the list.
        out: The dumped state dict where its encoding belongs (under ``plan.name``).
    """

    owner: object
    plan: FieldPlan
    value: list[Any]
    path: Path
    out: dict[str, Any]


Held = list[HeldList]


def dump_root(
    module: StateBase, path: Path, live: bool = False, lax: bool = False, held: Held | None = None
) -> dict[str, Any]:
    try:
        return _dump(module, path, live, lax, held)
    except TooDeep as exc:
        raise StateDumpError([module_problem(module, path, exc.path)]) from None


_UNSET = object()


def _refuse_unset(plan: FieldPlan, path: Path) -> None:
    """A state field without a value cannot be saved (a plain attribute is no one's business).

    Raises:
        StateDumpError: ``plan`` is state.
    """
    if plan.is_state or plan.module_type is not None:
        raise StateDumpError([Problem(path, "has no value (an init=False field that was never set)")])


def _dump(obj: StateBase, path: Path, live: bool = False, lax: bool = False, held: Held | None = None) -> dict[str, Any]:
    """The state of ``obj``; ``live`` shares validated JSON values instead of
    copying them (for data that is encoded at once, see :func:`dump_many`);
    ``lax`` passes registered values that are not JSON through (see ``state_dict``);
    ``held`` collects append-only lists instead of encoding them (see :func:`dump_many`)."""
    if len(path) >= MAX_DEPTH:
        raise TooDeep(path)  # a cycle of modules, or a chain too long to save
    version = tag(type(obj))
    out: dict[str, Any] = {} if version is None else {VERSION_KEY: version}
    for plan in plan_of(obj).fields:
        name = plan.field.name  # plan.name, read once per field (a property: every dump runs this loop)
        value = getattr(obj, name, _UNSET)
        if value is _UNSET:  # a field with init=False that no one set yet
            _refuse_unset(plan, (*path, name))
            continue
        dump = plan.encode if live else plan.dump
        if is_module(value):
            out[name] = _dump_child(value, (*path, name), live, held)
        elif plan.secret:
            refused = seal_into(out, name, plan.dump, value, (*path, name))  # type: ignore[arg-type]
            if refused is not None:
                del value  # raised without the secret in this frame, which the traceback keeps
                raise refused
        elif held is not None and plan.append_only and type(value) is list:
            held.append(HeldList(obj, plan, value, (*path, name), out))
            out[name] = None  # filled in by the caller, or left out of a delta
        elif live and dump is not None:  # _encode_value, inlined: the path is built only for an error
            try:
                out[name] = dump(value)
            except Exception:  # noqa: BLE001 - the copying hook reports it
                out[name] = _dump_value(obj, plan.dump, value, (*path, name), plan.tp)  # type: ignore[arg-type]
        elif dump is not None:
            out[name] = _dump_value(obj, dump, value, (*path, name), plan.tp)
        elif plan.is_state or plan.module_type is not None:
            out[name] = None  # an optional nested module that is not set
    for name, hooks in state_extras(obj).items():
        value = getattr(obj, name)
        if is_module(value):
            out[name] = _dump_child(value, (*path, name), live, held)
        elif hooks is not None:
            out[name] = _dump_registered(obj, hooks[0], value, (*path, name), lax)
    return out


def _dump_top(module: SupportsState, path: Path, live: bool = False, held: Held | None = None) -> dict[str, Any]:
    """A module given to a session: its own ``state_dict()`` when its class overrides it (or is foreign)."""
    if walks_dump(module):
        return dump_root(module, path, live, held=held)
    return dump_override(module, path)


def _dump_child(module: SupportsState, path: Path, live: bool = False, held: Held | None = None) -> dict[str, Any]:
    """A module's state, through its own ``state_dict()`` when its class overrides it (or is foreign)."""
    if walks_dump(module):
        return _dump(module, path, live, held=held)
    return dump_override(module, path)


def _dump_registered(owner: StateBase, dump: Callable[[Any], Any], value: Any, path: Path, lax: bool) -> Any:
    if lax and dump is copy_loose:
        try:
            return copy_loose(value)
        except JSONValueError:
            return value  # for the overriding state_dict() to replace; its result is checked
    return _dump_value(owner, dump, value, path, Any)


def encode_held(held: HeldList, start: int = 0) -> Any:
    """Encode a held append-only list, from item ``start`` on, as a save would.

    Raises:
        StateDumpError: Naming bad items by their index in the whole list.
    """
    if not start:
        return _encode_value(held.owner, held.plan, held.value, held.path)
    try:
        return _encode_value(held.owner, held.plan, held.value[start:], held.path)
    except StateDumpError as err:
        raise StateDumpError([item_problem(p, held.path, start, p.path[len(held.path) :]) for p in err.problems]) from None


def item_problem(problem: Problem, path: Path, start: int, at: tuple[PathSegment, ...]) -> Problem:
    """``problem``, found at ``at`` in the items of the list at ``path`` from ``start`` on, in the whole list."""
    if not at or not isinstance(at[0], int):
        return attrs.evolve(problem, path=path)
    return attrs.evolve(problem, path=(*path, start + at[0], *at[1:]))


def _encode_value(owner: object, plan: FieldPlan, value: Any, path: Path) -> Any:
    """A live hook raises a bare error; the copying hook then says what is wrong, and where."""
    assert plan.encode is not None and plan.dump is not None
    try:
        return plan.encode(value)
    except Exception:  # noqa: BLE001 - the copying hook reports it
        return _dump_value(owner, plan.dump, value, path, plan.tp)


def _dump_value(owner: object, dump: Callable[[Any], Any], value: Any, path: Path, tp: Any) -> Any:
    try:
        return dump(value)
    except RecursionError:
        raise StateDumpError([value_problem(value, path)]) from None
    except Exception as exc:
        found = [] if tp is Any else dump_problems(converter_of(type(owner)), tp, value, path)
        problems = [Problem(p, m) for p, m in found or problems_of(exc, path)]
        raise StateDumpError(problems) from exc


def converter_of(cls: type) -> cattrs.Converter:
    return getattr(cls, "__statekit_converter__", None) or DEFAULT_CONVERTER


def dump_many(
    modules: Mapping[str, SupportsState], *, live: bool = False, held: Held | None = None
) -> dict[str, Any]:
    """``{name: module.state_dict()}``, with error paths that start at the name.

    Args:
        modules: The modules, by name.
        live: Validate JSON-typed values but share them with the live objects
            instead of copying them. Only for a caller that encodes the result
            at once, in the same thread, before anything can change the objects.
        held: Collects every append-only list (with where it goes) instead of
            encoding it; its place in the result holds ``None`` until the
            caller fills it in (a session saving only new items).

    Raises:
        StatekitError: A value is not a state module.
        StateDumpError: A module's state is not JSON data.
    """
    check_modules(modules)
    if not live:
        return {name: _dump_top(module, (name,), held=held) for name, module in modules.items()}

    start = 0 if held is None else len(held)

    def build() -> dict[str, Any]:
        if held is not None:
            del held[start:]  # a second run (see checks_deferred) finds the same lists again
        return {name: _dump_top(module, (name,), True, held) for name, module in modules.items()}

    return checks_deferred(build)


def check_modules(modules: Mapping[str, object]) -> None:
    """Refuse anything but modules (``StateModule`` instances, or foreign ones such as
    AgentScope's: see :mod:`statekit.state.foreign`), naming the keyword argument.

    Raises:
        StatekitError: ``name=`` is a class, a value record or any other value.
    """
    for name, value in modules.items():
        if not is_module(value):
            raise StatekitError(f"{name}= must be a StateModule instance, got {_what(value)}")


def _what(value: object) -> str:
    if isinstance(value, type):
        hint = "; pass an instance" if protocol_class(value) else ""
        return f"the class {value.__qualname__}{hint}"
    if attrs.has(type(value)):
        return f"{type(value).__qualname__}, a value record (its class does not subclass StateModule)"
    return with_article(type(value).__name__) if type(value) in (dict, list) else describe(value)


__all__ = ["Held", "HeldList", "check_modules", "converter_of", "dump_many", "dump_root", "encode_held"]
