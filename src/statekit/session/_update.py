"""``update()``: load, change and save, again after a conflict, until it sticks.

Each attempt loads the modules, calls ``mutate()`` and saves against what that
attempt read. A missing session starts from the modules as they were passed:
an attempt that finds the session gone after an earlier one loaded it takes
back what those loads replaced (they are journaled, see
:func:`~statekit._load.journaled`), so that no failed attempt's change, nor
the deleted state, is saved.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from statekit._dump import dump_many
from statekit._foreign import SupportsState
from statekit._gc import paused_gc
from statekit._load import Commit, journaled, load_many, modules_below, state_keys, undo_loads
from statekit._module import StateModule
from statekit._secrets import SecretBox, secrets_with
from statekit.errors import ConflictError
from statekit.session._revisions import backoff

if TYPE_CHECKING:
    from statekit.session._base import SessionBase
    from statekit.session._ids import SessionKey

Attributes = list[tuple[SupportsState, dict[str, Any]]]
"""Modules with their state attributes (references, not copies)."""


async def update_modules(
    session: SessionBase, key: SessionKey, mutate: Callable[[], object], retries: int, modules: Mapping[str, SupportsState]
) -> None:
    """The loop of :meth:`~statekit.session.SessionBase.aupdate` (arguments checked).

    Raises:
        ConflictError: Still conflicting after ``retries`` retries (the last one).
        StateLoadError: What an earlier attempt loaded could not be put back.
    """
    passed = _attributes_of(modules)  # references only: no copy
    loads: list[Commit] = []  # what earlier attempts' loads replaced
    fresh: bytes | None = None
    for attempt in itertools.count():
        with journaled(loads):
            results, seen = await session._load(key, modules, True)  # noqa: SLF001 - its helper
        if results is None:
            fresh = _as_passed(modules, (passed, loads, fresh), session._secret_box)  # noqa: SLF001
        if inspect.isawaitable(outcome := mutate()):
            await outcome
        try:  # against what this attempt loaded, not what the object saw last: tasks may share it
            await session._save_modules(key, modules, expected=seen)  # noqa: SLF001
            return
        except ConflictError:
            if attempt >= retries:
                raise
        await asyncio.sleep(backoff(attempt))


def _as_passed(
    modules: Mapping[str, SupportsState],
    before: tuple[Attributes, list[Commit], bytes | None],
    box: SecretBox | None,
) -> bytes:
    """Put the modules back as they were passed, for an attempt that found no session.

    ``before`` holds every module's state attributes as passed (references: a
    child module ``mutate()`` replaced, a secret no load touched), the loads of
    earlier attempts (an override may have changed objects in place) and, after
    the first miss, a snapshot of the state (``mutate()`` may then have changed
    the passed objects in place).

    Returns:
        The snapshot.
    """
    passed, loads, fresh = before
    undo_loads(loads)
    for module, values in passed:  # only state: a cache or a client the module holds is left alone
        for name, value in values.items():
            object.__setattr__(module, name, value)
    if fresh is None:
        return _snapshot(modules, box)
    _restore(modules, fresh, box)
    return fresh


def _attributes_of(modules: Mapping[str, SupportsState]) -> Attributes:
    """Every module reachable from ``modules`` through state, with its state attributes."""
    return [
        (module, {name: getattr(module, name) for name in state_keys(module) if hasattr(module, name)})
        for module in modules_below(modules.values())
    ]


def _snapshot(modules: Mapping[str, SupportsState], box: SecretBox | None) -> bytes:
    """The modules' states as JSON bytes, encoded straight from the live objects
    (no deep copy); secret fields sealed with ``box``."""
    with paused_gc(), secrets_with(box):
        return orjson.dumps(dump_many(modules, live=True))


def _restore(modules: Mapping[str, SupportsState], snapshot: bytes, box: SecretBox | None) -> None:
    """Put the modules back to ``snapshot``, as a load would (without a key, secret fields stay as they are)."""
    with paused_gc(), secrets_with(box):
        load_many(modules, orjson.loads(snapshot), strict=True, fresh=True)
