"""Class versions and migrations: old data is upgraded before it is structured.

A ``@stateful(version=N)`` class with ``N >= 2`` writes ``"__version__": N``
into its own state (modules and value records alike); a version-1 class writes
nothing, so data saved before versions existed (or by AgentScope) is version 1.
Loading runs the migrations of each class on that class's own data, outermost
first (a module's migrations see its nested states as they were saved, and the
nested classes then migrate what the outer migrations left), on a private deep
copy, before anything is structured. Data already at the class's version
costs one key lookup.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from statekit.values.plain import JSONValueError, copy_any
from statekit.errors import PathSegment, StateDefinitionError, StateVersionError

Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns the plain state of version N into that of version N + 1."""

VERSION_KEY = "__version__"
"""The reserved state key holding the version of a versioned class's data."""

Path = tuple[PathSegment, ...]


@attrs.frozen
class Versions:
    """The version of a ``@stateful`` class and the migrations that reach it.

    Attributes:
        current: The class's version (1 unless it says otherwise).
        migrations: Version N to the function from N to N + 1, for every N < current.
    """

    current: int = 1
    migrations: Mapping[int, Migration] = attrs.field(factory=dict)


UNVERSIONED = Versions()


class _Migrated(threading.local):
    count = 0


_MIGRATED = _Migrated()


def migrations_run() -> int:
    """How many times this thread has migrated data so far: a load that changed it ran a migration."""
    return _MIGRATED.count

_ATTRIBUTE = "__statekit_versions__"


def define_versions(cls: type, version: object, migrations: object) -> None:
    """Check ``@stateful(version=..., migrations=...)`` and attach it to ``cls``.

    Raises:
        StateDefinitionError: The version is not an int >= 1, a migration is
            not callable, is for a version outside 1..version-1, or a step is missing.
    """
    name = cls.__qualname__
    if type(version) is not int or version < 1:
        raise StateDefinitionError(f"{name}: version must be an int >= 1, got {version!r}")
    steps = _checked_steps(name, version, {} if migrations is None else migrations)
    if any(field.name == VERSION_KEY for field in attrs.fields(cls)):
        raise StateDefinitionError(f"{name}: {VERSION_KEY!r} is reserved for the data's version; rename the field")
    setattr(cls, _ATTRIBUTE, Versions(version, steps) if version > 1 else UNVERSIONED)


def _checked_steps(name: str, version: int, migrations: object) -> dict[int, Migration]:
    if not isinstance(migrations, Mapping):
        raise StateDefinitionError(f"{name}: migrations must map versions to functions, got {type(migrations).__name__}")
    for step, fn in migrations.items():
        if type(step) is not int or not 1 <= step < version:
            raise StateDefinitionError(
                f"{name}: migrations[{step!r}]: a migration turns version N into N + 1, "
                f"for 1 <= N < {version} (the class is version {version}){_version_hint(version, migrations)}"
            )
        if not callable(fn):
            raise StateDefinitionError(f"{name}: migrations[{step}] is {type(fn).__name__}, not a function")
    missing = [n for n in range(1, version) if n not in migrations]
    if missing:
        listed = ", ".join(f"{n} -> {n + 1}" for n in missing)
        raise StateDefinitionError(f"{name} is version {version} but has no migration for {listed}")
    return {n: migrations[n] for n in range(1, version)}


def _version_hint(version: int, migrations: Mapping[object, object]) -> str:
    """What to write when the migrations go past the class's version (most often: ``version=`` forgotten)."""
    steps = [step for step in migrations if type(step) is int and step >= 1]
    if not steps or max(steps) < version:
        return ""
    needed = max(steps) + 1
    forgot = " (without version=, a class is version 1)" if version == 1 else ""
    return f"; the last migration makes version {needed}: set @stateful(version={needed}, migrations=...){forgot}"


def versions_of(cls: type) -> Versions:
    """The versions of a class (``UNVERSIONED`` for anything not ``@stateful(version=...)``)."""
    found: Versions = getattr(cls, _ATTRIBUTE, UNVERSIONED)
    return found


def tag(cls: type) -> int | None:
    """The ``__version__`` a class writes, or ``None`` for version 1."""
    current = versions_of(cls).current
    return current if current > 1 else None


def is_older(cls: type, data: Mapping[str, Any]) -> bool:
    """Whether :func:`upgrade` would run migrations on ``data`` (a well-formed older version)."""
    found = data.get(VERSION_KEY, 1)
    return type(found) is int and found < versions_of(cls).current


def upgrade(cls: type, data: Mapping[str, Any], path: Path = ()) -> Mapping[str, Any]:
    """Return ``data`` at ``cls``'s version, without the version key.

    Data already at the version comes back as it is (or, when it carries the
    key, as a shallow copy without it); older data is migrated on private deep
    copies, so that ``data`` is never mutated.

    Raises:
        StateVersionError: The data is newer than the class, its version is not
            an int, or a migration raised or returned something not a dict.
    """
    versions = versions_of(cls)
    found = data.get(VERSION_KEY, 1)
    if found == versions.current and type(found) is int:
        return data if VERSION_KEY not in data else _without_key(data)
    _check_found(cls, found, versions.current, path)
    if found > versions.current:
        raise StateVersionError(
            f"the data is version {found} but {cls.__qualname__} is version {versions.current}: "
            "it was saved by newer code; nothing was loaded",
            path=path,
            found=found,
            expected=versions.current,
        )
    return _migrate(cls, _without_key(data), found, versions, path, implicit=VERSION_KEY not in data)


def _without_key(data: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != VERSION_KEY}


def _check_found(cls: type, found: object, current: int, path: Path) -> None:
    if type(found) is not int or found < 1:
        raise StateVersionError(
            f"{VERSION_KEY} should be an int >= 1, got {found!r} ({cls.__qualname__} is version {current})",
            path=path,
            found=found,
            expected=current,
        )


def _migrate(cls: type, data: dict[str, Any], found: int, versions: Versions, path: Path, *, implicit: bool) -> dict[str, Any]:
    """Run the steps from ``found`` on one private deep copy, handed from step to step.

    Each step owns what it gets: the first a copy nobody else holds, the next
    what the step before returned (a big session is copied once per class, not
    once per step). ``implicit``: the data carried no version key (a failure says so).
    """
    _MIGRATED.count += 1
    data = _private_copy(data)
    for step in range(found, versions.current):
        try:
            data = _step(versions.migrations[step], data)
        except _StepFailed as failed:
            error = _failed(cls, versions.migrations[step], step, (found, versions.current), failed.reason, path, implicit)
            raise error from failed.__cause__
    return data


class _StepFailed(Exception):
    """A migration raised (the ``__cause__``) or returned no dict: ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _step(fn: Migration, data: dict[str, Any]) -> dict[str, Any]:
    """Run one migration.

    Raises:
        _StepFailed: It raised, or returned something not a dict.
    """
    try:
        result: object = fn(data)
    except Exception as exc:  # noqa: BLE001 - any failure of user code is reported
        raise _StepFailed(f"raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, dict):
        raise _StepFailed(f"returned {type(result).__name__}, not a dict")
    result.pop(VERSION_KEY, None)  # the result is version step + 1 whatever it says
    return result


def _failed(
    cls: type, fn: Migration, step: int, versions: tuple[int, int], reason: str, path: Path, implicit: bool
) -> StateVersionError:
    """The error of a failed step, naming the class, the step and both versions (``found``, ``current``)."""
    found, current = versions
    unversioned = " (it has no __version__)" if implicit else ""
    name = getattr(fn, "__qualname__", repr(fn))
    return StateVersionError(
        f"cannot migrate the data of version {found}{unversioned} to {cls.__qualname__} version {current}: "
        f"the migration from {step} to {step + 1} ({name}) {reason}; nothing was loaded",
        path=path,
        found=found,
        expected=current,
    )


def _private_copy(data: dict[str, Any]) -> dict[str, Any]:
    try:
        copied: dict[str, Any] = copy_any(data)
    except JSONValueError:
        copied = copy.deepcopy(data)  # load_state_dict() may be given live Python values
    return copied


def versioned_structure(cls: type, hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Wrap a record's cattrs structure hook so that it upgrades the data first."""
    current = versions_of(cls).current

    def structure(value: Any, tp: Any) -> Any:
        if current != 1 or VERSION_KEY in value:
            value = upgrade(cls, value)
        return hook(value, tp)

    return structure


def versioned_unstructure(cls: type, hook: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """Wrap a record's cattrs unstructure hook so that the data carries the version."""
    version = tag(cls)
    if version is None:
        return hook
    return lambda value: {VERSION_KEY: version, **hook(value)}
