"""``update()``: load, change and save, again after a conflict, until it sticks.

Each attempt loads the modules, calls ``mutate()`` and saves against what that
attempt read. A missing session starts from the modules as they were passed:
an attempt that finds the session gone after an earlier one loaded it takes
back what those loads replaced (they are journaled, see
:func:`~statekit.state.commit.journaled`), so that no failed attempt's change, nor
the deleted state, is saved.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import orjson

from statekit.state.dump import dump_many
from statekit.state.foreign import SupportsState
from statekit.state.gc import paused_gc
from statekit.state.commit import Commit, journaled, undo_loads
from statekit.state.load import load_many
from statekit.state.base import modules_below, state_keys
from statekit.values.secrets import SecretBox, secrets_with
from statekit.errors import ConflictError, LeaseError, SessionError
from statekit.session._arguments import check_modules_by_name, check_mutate, require_modules
from statekit.session._backend import Backend
from statekit.session._keyless import refuse_secret_fields
from statekit.session._ids import SessionKey
from statekit.session._loading import load_modules
from statekit.session._revisions import Expected, backoff
from statekit.session._saving import save_modules

Attributes = list[tuple[SupportsState, dict[str, Any]]]
"""Modules with their state attributes (references, not copies)."""


UPDATE_OPTIONS = ("user_id", "retries")


def start_update(
    make_key: Callable[[str, str | None], SessionKey],
    backend: Backend,
    session_id: str,
    mutate: object,
    user_id: str | None,
    retries: int,
    modules: Mapping[str, SupportsState],
) -> Attempts:
    """Check ``update()``'s arguments (before anything is loaded) and start its attempts.

    ``make_key`` is the session's ``key`` method (checking the ids), ``backend`` its storage.

    Raises:
        SessionError: No module, a module by position, a misspelled option, ``retries``
            not a whole number >= 0, or a ``mutate`` that cannot be called without arguments.
        SecretError: A module holds secret fields and the session has no key (nor ``omit_secrets``).
    """
    check_modules_by_name("update", {"session_id": session_id, "mutate": mutate}, modules, UPDATE_OPTIONS)
    require_modules("update", session_id, modules)
    key = make_key(session_id, user_id)
    if type(retries) is not int or retries < 0:
        raise SessionError(f"retries must be a whole number >= 0, got {retries!r}")
    check_mutate(mutate)
    if backend.secret_box is None and not backend.omit_secrets:
        refuse_secret_fields(modules)  # the save would refuse them: say so before mutate() runs
    return Attempts(backend, key, retries, modules)


class Attempts:
    """One ``update()``'s attempts: each loads, lets ``mutate()`` change the modules, and saves.

    The loop that drives them runs ``mutate()`` where the caller is: in its task
    (:func:`update_async`) or on its thread (:func:`update_blocking`), so that a plain
    ``mutate`` may call the session's blocking methods.
    """

    def __init__(self, backend: Backend, key: SessionKey, retries: int, modules: Mapping[str, SupportsState]) -> None:
        self.backend, self.key, self.retries, self.modules = backend, key, retries, modules
        self.passed = _attributes_of(modules)  # references only: no copy
        self.loads: list[Commit] = []  # what earlier attempts' loads replaced
        self.fresh: bytes | None = None

    async def load(self) -> Expected:
        """Load the modules (a missing session: put them back as passed); what was read."""
        with journaled(self.loads):
            results, seen = await load_modules(self.backend, self.key, self.modules, True)
        if results is None:
            self.fresh = _as_passed(self.modules, (self.passed, self.loads, self.fresh), self.backend.secret_box)
        return seen

    async def save(self, seen: Expected, attempt: int) -> bool:
        """Save against what attempt ``attempt`` (0-based) loaded; ``False``: lost a race, try again.

        Raises:
            ConflictError: Lost the race of the last attempt allowed, saying so.
        """
        try:  # against what this attempt loaded, not what the object saw last: tasks may share it
            await save_modules(self.backend, self.key, self.modules, expected=seen)
        except LeaseError:
            raise  # not a race another attempt wins: a lease decides who writes (docs/leases.md)
        except ConflictError as err:
            if attempt >= self.retries:
                raise ConflictError(_gave_up(err.source, self.retries), source=err.source) from err
            return False
        return True


def _gave_up(source: str, retries: int) -> str:
    return (
        f"update() gave up on {source} after {retries + 1} attempts (retries={retries}): every time, another "
        "writer changed it between the load and the save; nothing of the last attempt was written. "
        "Raise retries= for more attempts, or let fewer writers change this session at once"
    )


async def update_async(attempts: Attempts, mutate: Callable[[], object]) -> Any:
    """The loop of :meth:`~statekit.session.SessionBase.aupdate` (arguments checked): what ``mutate`` returned.

    Raises:
        ConflictError: Still conflicting after ``retries`` retries.
        StateLoadError: What an earlier attempt loaded could not be put back.
    """
    for attempt in itertools.count():
        seen = await attempts.load()
        outcome = mutate()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if await attempts.save(seen, attempt):
            return outcome
        await asyncio.sleep(backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def update_blocking(
    attempts: Attempts, mutate: Callable[[], object], block: Callable[[Callable[[], Coroutine[Any, Any, Any]]], Any]
) -> Any:
    """The loop of the blocking ``update()``: loads and saves through ``block``, ``mutate()`` on this thread.

    Args:
        attempts: The update.
        mutate: The user's function; an awaitable it returns is awaited through ``block``.
        block: Runs a coroutine (made by its argument) on the session's loop and waits.
    """
    for attempt in itertools.count():
        seen = block(attempts.load)
        outcome = mutate()
        if inspect.isawaitable(outcome):
            awaitable = outcome
            outcome = block(lambda: _awaited(awaitable))
        if block(lambda: attempts.save(seen, attempt)):  # noqa: B023 - called at once
            return outcome
        time.sleep(backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


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
