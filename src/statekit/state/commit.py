"""Committing a planned load: what a plan collects, assigned all together or not at all, undone, journaled.

An update journals the loads committed inside it, to take them back if it fails.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any

import attrs

from statekit.errors import PathSegment, Problem, StateLoadError, format_path
from statekit.state.base import LoadResult
from statekit.state.hints import migration_hint
from statekit.state.overrides import Deferred, join_paths, restore_all, run_overrides
from statekit.values.problems import not_a_string_key, only_extra_keys, problems_of, refused_field, unknown_key

Path = tuple[PathSegment, ...]

_LOG = logging.getLogger("statekit")

FAILED = object()
"""What :meth:`Pending.plan_value` returns for a value that could not be loaded."""


class Pending:
    """What a plan collected: new values to assign, problems, keys missing and ignored, deferred overrides."""

    def __init__(self, strict: bool, fresh: bool = False, *, saved: bool = True) -> None:
        self.strict = strict
        self.fresh = fresh
        self.saved = saved  # the data was saved by code: a mismatch may be a class that changed since
        self.problems: list[Problem] = []
        self.assignments: list[tuple[object, str, Any]] = []
        self.missing: list[str] = []
        self.unexpected: list[str] = []
        self.deferred: list[Deferred] = []
        self.paths: dict[int, Path] = {}  # id(module) -> its path, to name a refused assignment

    def problem(self, path: Path, message: str) -> None:
        self.problems.append(Problem(path, message))

    def unknown(self, path: Path, known: Iterable[str]) -> None:
        if not isinstance(path[-1], str):  # Python data only; a problem even when lenient
            self.problem(path[:-1], not_a_string_key(path[-1]))
        elif self.strict:
            self.problem(path, unknown_key(str(path[-1]), known))
        else:
            self.unexpected.append(format_path(path))

    def hide_unexpected(self, mark: int, path: Path) -> None:
        """Name the keys ignored since ``mark`` inside a secret by the secret's path alone (they could be secret too)."""
        if len(self.unexpected) > mark:
            self.unexpected[mark:] = [format_path(path)]

    def lenient_load(self, strict: Callable[[Any], Any], loose: Callable[[Any], Any], data: Any, path: Path) -> Callable[[Any], Any]:
        """Report unknown record keys before ignoring them (strict first: it is the common case)."""
        try:
            value = strict(data)
        except Exception as exc:  # noqa: BLE001 - re-raised by the loose hook if real
            if only_extra_keys(exc):
                self.unexpected.extend(format_path(p) for p, _ in problems_of(exc, path))
            return loose
        return lambda _: value

    def plan_value(self, module: object, name: str, load: Callable[[Any], Any], data: Any, path: Path) -> Any:
        try:
            new = load(data)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a problem
            self.problems.extend(Problem(p, m) for p, m in problems_of(exc, path))
            return FAILED
        self.assignments.append((module, name, new))
        return new

    def validate(self, module: object, field: attrs.Attribute[Any], value: Any, path: Path) -> None:
        try:
            field.validator(module, field, value)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - a validator's refusal is a problem
            at = path[:-1] if refused_field(exc) is field else path  # problems_of names the field itself
            self.problems.extend(Problem(p, m) for p, m in problems_of(exc, at))


def commit_all(loaders: list[Pending]) -> list[LoadResult]:
    """Run the deferred overrides of every loader (restored together if one
    raises), then assign every planned value."""
    problems = [p for loader in loaders for p in loader.problems]
    if problems:
        saved = all(loader.strict and loader.saved for loader in loaders)
        raise StateLoadError(problems, hint=migration_hint(problems) if saved else None)
    if any(loader.deferred for loader in loaders):
        _run_deferred(loaders)
    done = _assign_all(loaders)
    if (journal := _JOURNAL.get()) is not None:
        journal.append((done, loaders))
    ignored = [key for loader in loaders for key in loader.unexpected]
    if ignored:
        _LOG.warning("a non-strict load ignored %d unknown key(s): %s", len(ignored), ", ".join(ignored))
    return [LoadResult(loader.missing, loader.unexpected) for loader in loaders]


_UNSET = object()  # an attribute that had no value (a slot never set), deleted again on undo

Assigned = tuple[object, str, Any]
"""An assignment of a commit: the object, the attribute, the value it replaced."""

Commit = tuple[list[Assigned], list[Pending]]
"""A committed load, as :func:`undo_loads` takes it back."""

_JOURNAL: ContextVar[list[Commit] | None] = ContextVar("statekit_load_journal", default=None)


@contextlib.contextmanager
def journaled(journal: list[Commit]) -> Iterator[None]:
    """Record in ``journal`` every load committed inside the block (in this task or thread)."""
    token = _JOURNAL.set(journal)
    try:
        yield
    finally:
        _JOURNAL.reset(token)


def undo_loads(journal: list[Commit]) -> None:
    """Take back the loads ``journal`` recorded, last first, and empty it.

    Raises:
        StateLoadError: A value could not be put back (a property's setter, an
            override's ``load_state_dict()`` refused).
    """
    failed = [problem for done, loaders in reversed(journal) for problem in _undo(done, loaders)]
    journal.clear()
    if failed:
        raise StateLoadError(failed)


def _assign_all(loaders: list[Pending]) -> list[Assigned]:
    """Assign every planned value; when one is refused (a property's setter raised),
    put back every value assigned and every override run, and raise.

    Returns:
        What each assignment replaced, for :func:`undo_loads`.
    """
    done: list[Assigned] = []
    for loader in loaders:
        for target, name, value in loader.assignments:
            try:
                before = getattr(target, name, _UNSET)
                object.__setattr__(target, name, value)
            except Exception as exc:  # noqa: BLE001 - reported with its path, nothing kept
                path = (*loader.paths.get(id(target), ()), name)
                problem = Problem(path, f"setting it raised {type(exc).__name__}: {exc}")
                raise StateLoadError([problem, *_undo(done, loaders)]) from exc
            done.append((target, name, before))
    return done


def _undo(done: list[Assigned], loaders: list[Pending]) -> list[Problem]:
    """Put back the values ``done`` replaced and the modules the overrides loaded; what could not be."""
    failed: list[Problem] = []
    for target, name, before in reversed(done):
        try:
            if before is _UNSET:
                object.__delattr__(target, name)
            else:
                object.__setattr__(target, name, before)
        except Exception as exc:  # noqa: BLE001 - reported, never hidden
            path = (*_path_of(loaders, target), name)
            failed.append(Problem(path, f"could not be restored ({type(exc).__name__}: {exc}); it may be half-loaded"))
    return failed + restore_all([item for loader in loaders for item in loader.deferred])


def _path_of(loaders: list[Pending], target: object) -> Path:
    return next((loader.paths[id(target)] for loader in loaders if id(target) in loader.paths), ())


def _run_deferred(loaders: list[Pending]) -> None:
    owners = [loader for loader in loaders for _ in loader.deferred]
    items = [item for loader in loaders for item in loader.deferred]
    for loader, item, result in zip(owners, items, run_overrides(items), strict=True):
        if result is not None:
            loader.missing.extend(join_paths(item.path, result.missing_keys))
            loader.unexpected.extend(join_paths(item.path, result.unexpected_keys))


__all__ = ["FAILED", "Assigned", "Commit", "Pending", "commit_all", "journaled", "undo_loads"]
