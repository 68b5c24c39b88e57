"""Modules whose class overrides ``state_dict()`` / ``load_state_dict()``.

AgentScope's memories and toolkits (and many users' classes) write their own
``state_dict`` and ``load_state_dict``. statekit cannot see inside them, so on
every path (a nested module, a session, ``from_config``, the CLI) it calls them
and checks what comes back:

- a dump takes the override's result, refuses what JSON cannot hold (naming the
  path) and deep-copies it (tuples become lists);
- a load hands the override a private copy of its data at commit time, after
  every other module's data was checked; if an override raises, every override
  already run in this load is restored from a snapshot taken just before it
  ran (its attributes and those of the modules below it), and no other value
  is assigned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from statekit.state.foreign import SupportsState
from statekit.values.problems import problems_of
from statekit.state.base import REGISTERED, LoadResult, modules_below
from statekit.values.plain import JSONValueError, copy_any, copy_loose, describe
from statekit.errors import PathSegment, Problem, StateDumpError, StateLoadError, StateVersionError, format_path


Path = tuple[PathSegment, ...]
Attributes = list[tuple[object, dict[str, Any]]]
"""Modules and their attributes, as a snapshot holds them."""


def dump_override(module: SupportsState, path: Path) -> dict[str, Any]:
    """The state an overriding ``state_dict()`` returns, checked and copied.

    Raises:
        StateDumpError: It raised, returned no mapping, or returned something
            JSON cannot hold (non-str keys, NaN, sets...), with the path.
    """
    name = type(module).__qualname__
    try:
        state = module.state_dict()
    except Exception as exc:
        raise StateDumpError([Problem(path, f"{name}.state_dict() raised {type(exc).__name__}: {exc}")]) from exc
    if not isinstance(state, Mapping):
        raise StateDumpError([Problem(path, f"{name}.state_dict() returned {describe(state)}, not an object")])
    try:
        copied: dict[str, Any] = copy_loose(dict(state))
    except JSONValueError as exc:
        raise StateDumpError([Problem(p, m) for p, m in problems_of(exc, path)]) from exc
    return copied


@attrs.define
class Deferred:
    """An overriding ``load_state_dict`` to call at commit time.

    Attributes:
        module: The module to load.
        data: A private copy of its state.
        path: Where the state sits in the loaded document.
        strict: Passed on to the override.
        fresh: The module was built by this load (nothing to restore).
    """

    module: SupportsState
    data: dict[str, Any]
    path: Path
    strict: bool
    fresh: bool = False
    snapshot: tuple[Attributes, Any] | None = None


def defer(module: SupportsState, state: Any, path: Path, strict: bool, problems: list[Problem]) -> Deferred | None:
    """Check the data meant for an overriding module; ``None`` when it is not a JSON object."""
    if not isinstance(state, Mapping):
        problems.append(Problem(path, f"expected an object of state, got {describe(state)}"))
        return None
    try:
        data = copy_loose(dict(state))
    except JSONValueError as exc:
        problems.extend(Problem(p, m) for p, m in problems_of(exc, path))
        return None
    return Deferred(module, data, path, strict)


def run_overrides(deferred: list[Deferred]) -> list[LoadResult | None]:
    """Call every deferred override; all or nothing.

    Returns:
        What each override returned, when it was a ``LoadResult``.

    Raises:
        StateLoadError: An override raised; every override already run was
            restored (and the failing one too).
    """
    results: list[LoadResult | None] = []
    for index, item in enumerate(deferred):
        if not item.fresh:
            item.snapshot = _snapshot(item.module)
        try:
            results.append(_call(item))
        except Exception as exc:  # noqa: BLE001 - reported with the module's path
            failed = [p for p in (_restore(done) for done in reversed(deferred[: index + 1])) if p is not None]
            if isinstance(exc, StateVersionError) and not failed:  # documented as its own error, at its path
                raise exc.under(item.path) from exc.__cause__
            raise StateLoadError([Problem(item.path, _raised(item.module, exc)), *failed]) from exc
    return results


def _call(item: Deferred) -> LoadResult | None:
    result: object = item.module.load_state_dict(item.data, strict=item.strict)  # None in AgentScope's style
    return result if isinstance(result, LoadResult) else None


def _raised(module: object, exc: BaseException) -> str:
    return f"{type(module).__qualname__}.load_state_dict() raised {type(exc).__name__}: {exc}"


def _snapshot(module: SupportsState) -> tuple[Attributes, Any]:
    """The attributes (shallow) of the module and of every module below it, and its own
    state (deep), before its load: an override that loads through ``super()`` assigns in
    its submodules, which putting back the module's own attributes would not undo."""
    try:
        state = copy_loose(dict(module.state_dict()))
    except Exception:  # noqa: BLE001 - then attributes alone are restored
        state = None
    return [(each, _attributes(each)) for each in modules_below([module])], state


def _attributes(module: object) -> dict[str, Any]:
    """The module's attributes, and a copy of its registry (an override may register state as it loads)."""
    found = _with_own_registry(dict(getattr(module, "__dict__", {})))
    cls: Any = type(module)
    for field in attrs.fields(cls) if attrs.has(cls) else ():
        if field.name not in found and hasattr(module, field.name):
            found[field.name] = getattr(module, field.name)
    return found


def restore_all(items: list[Deferred]) -> list[Problem]:
    """Put back every module whose override ran (last first); a problem for each that could not be."""
    return [p for p in (_restore(item) for item in reversed(items)) if p is not None]


def _restore(item: Deferred) -> Problem | None:
    """Put a module back as it was; a problem when that failed."""
    if item.snapshot is None:
        return None
    attributes, state = item.snapshot
    try:
        for module, values in attributes:
            _set_attributes(module, values)
        if state is not None and copy_loose(dict(item.module.state_dict())) != state:
            item.module.load_state_dict(state, strict=False)  # the override changed objects in place
            if copy_loose(dict(item.module.state_dict())) != state:
                return Problem(item.path, "could not be restored (its load_state_dict() did not put it back); it may be half-loaded")
    except Exception as exc:  # noqa: BLE001 - reported, never hidden
        return Problem(item.path, f"could not be restored ({type(exc).__name__}: {exc}); it may be half-loaded")
    return None


def _set_attributes(module: object, attributes: dict[str, Any]) -> None:
    own = getattr(module, "__dict__", None)
    if own is not None:
        own.clear()
    for name, value in _with_own_registry(attributes).items():  # the snapshot's registry stays as it was
        object.__setattr__(module, name, value)


def _with_own_registry(attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` with a copy of the ``register_state`` registry they hold (changed in place by a registration)."""
    registry = attributes.get(REGISTERED)
    return attributes if not isinstance(registry, dict) else {**attributes, REGISTERED: dict(registry)}


def join_paths(prefix: Path, entries: list[str]) -> list[str]:
    """Entries of an override's ``LoadResult``, made relative to the document."""
    if not prefix:  # the module is the document's root
        return list(entries)
    head = format_path(prefix)
    return [f"{head}{entry}" if entry.startswith("[") else f"{head}.{entry}" for entry in entries]
