"""The whole session contract: every check by name, and the two ways to run it (``check_backend``, ``SessionContract``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from statekit.errors import SessionError
from statekit.session import SessionBase
from statekit.testing._checks import BASIC_CHECKS, expect
from statekit.testing._history import HISTORY_CHECKS
from statekit.testing._leases import LEASE_CHECKS, check_blocking_lease
from statekit.testing._models import Check, Counter, SessionFactory, fresh_user
from statekit.testing._modules import MODULE_CHECKS
from statekit.testing._revisions import REVISION_CHECKS

CHECKS: dict[str, Check] = BASIC_CHECKS | REVISION_CHECKS | MODULE_CHECKS | LEASE_CHECKS | HISTORY_CHECKS
"""Every async check of the contract, by name."""


def check_blocking_twins(make_session: SessionFactory) -> None:
    """The blocking twins work without an event loop, and refuse to run inside one."""
    user = fresh_user()
    with make_session() as session:
        session.save("s", user, counter=Counter(count=2))
        counter = Counter()
        session.load("s", user, allow_not_exist=False, counter=counter)
        assert counter.count == 2, counter
        assert session.list_sessions(user) == ["s"], f"list_sessions() returned {session.list_sessions(user)!r}"
        assert session.exists("s", user)
        assert session.delete("s", user)
        asyncio.run(expect(SessionError, _inside_loop(session), "save() inside a loop"))


def _inside_loop(session: SessionBase) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        session.save("s", "u", counter=Counter())

    return call


async def check_backend(make_session: SessionFactory, *, skip: frozenset[str] = frozenset()) -> None:
    """Run every async check of the contract (not the blocking twins: see :func:`check_blocking_twins`).

    Args:
        make_session: Makes a session on the storage under test.
        skip: Names of checks to leave out (keys of :data:`CHECKS`).

    Raises:
        AssertionError: The first promise the backend breaks.
    """
    for name, check in CHECKS.items():
        if name not in skip:
            await check(make_session)


class SessionContract:
    """Subclass in a pytest module and define :meth:`make_session`; one test per check."""

    def make_session(self) -> SessionBase:
        """Make a session on the storage under test (called once or more per check)."""
        raise NotImplementedError("define make_session() in your SessionContract subclass")

    def _run(self, name: str) -> None:
        asyncio.run(CHECKS[name](self.make_session))

    def test_round_trip(self) -> None:  # noqa: D102 - see check_round_trip
        self._run("round_trip")

    def test_reference_names(self) -> None:  # noqa: D102
        self._run("reference_names")

    def test_default_user(self) -> None:  # noqa: D102
        self._run("default_user")

    def test_save_replaces(self) -> None:  # noqa: D102
        self._run("save_replaces")

    def test_missing_session(self) -> None:  # noqa: D102
        self._run("missing_session")

    def test_list_delete_exists(self) -> None:  # noqa: D102
        self._run("list_delete_exists")

    def test_hostile_ids(self) -> None:  # noqa: D102
        self._run("hostile_ids")

    def test_invalid_ids(self) -> None:  # noqa: D102
        self._run("invalid_ids")

    def test_failed_save_keeps_old(self) -> None:  # noqa: D102
        self._run("failed_save_keeps_old")

    def test_all_or_nothing(self) -> None:  # noqa: D102
        self._run("all_or_nothing")

    def test_concurrent_saves(self) -> None:  # noqa: D102
        self._run("concurrent_saves")

    def test_unicode(self) -> None:  # noqa: D102
        self._run("unicode")

    def test_large_session(self) -> None:  # noqa: D102
        self._run("large_session")

    def test_error_positions(self) -> None:  # noqa: D102
        self._run("error_positions")

    def test_appends(self) -> None:  # noqa: D102
        self._run("appends")

    def test_blocking_twins(self) -> None:  # noqa: D102
        check_blocking_twins(self.make_session)

    def test_revisions(self) -> None:  # noqa: D102 - see statekit.testing._revisions
        self._run("revisions")

    def test_stale_save_conflicts(self) -> None:  # noqa: D102
        self._run("stale_save_conflicts")

    def test_blind_save_and_delete(self) -> None:  # noqa: D102
        self._run("blind_save_and_delete")

    def test_create_race(self) -> None:  # noqa: D102
        self._run("create_race")

    def test_write_document(self) -> None:  # noqa: D102
        self._run("write_document")

    def test_update_races(self) -> None:  # noqa: D102
        self._run("update_races")

    def test_update_async_mutate(self) -> None:  # noqa: D102
        self._run("update_async_mutate")

    def test_save_keeps_other_modules(self) -> None:  # noqa: D102 - see statekit.testing._modules
        self._run("save_keeps_other_modules")

    def test_kept_module_is_not_stale(self) -> None:  # noqa: D102
        self._run("kept_module_is_not_stale")

    def test_racing_module_writers(self) -> None:  # noqa: D102
        self._run("racing_module_writers")

    def test_remove_modules(self) -> None:  # noqa: D102
        self._run("remove_modules")

    def test_lease_fences_writes(self) -> None:  # noqa: D102 - see statekit.testing._leases
        self._run("lease_fences_writes")

    def test_lease_tokens_grow(self) -> None:  # noqa: D102
        self._run("lease_tokens_grow")

    def test_lease_wait(self) -> None:  # noqa: D102
        self._run("lease_wait")

    def test_lease_lost(self) -> None:  # noqa: D102
        self._run("lease_lost")

    def test_lease_renew_release(self) -> None:  # noqa: D102
        self._run("lease_renew_release")

    def test_lease_appends(self) -> None:  # noqa: D102
        self._run("lease_appends")

    def test_history_keeps_and_prunes(self) -> None:  # noqa: D102 - see statekit.testing._history
        self._run("history_keeps_and_prunes")

    def test_history_is_recorded_with_the_session(self) -> None:  # noqa: D102
        self._run("history_is_recorded_with_the_session")

    def test_rollback_and_fork(self) -> None:  # noqa: D102
        self._run("rollback_and_fork")

    def test_delete_erases_history(self) -> None:  # noqa: D102
        self._run("delete_erases_history")

    def test_history_with_appends(self) -> None:  # noqa: D102
        self._run("history_with_appends")

    def test_history_over_deltas(self) -> None:  # noqa: D102
        self._run("history_over_deltas")

    def test_blocking_lease(self) -> None:  # noqa: D102
        check_blocking_lease(self.make_session)
