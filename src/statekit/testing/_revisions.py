"""The revision and conflict checks of the session contract (see :mod:`statekit.testing`).

Every backend must keep these promises: a stored session has a revision that
changes exactly when its bytes do; a save through an object that knows an
older revision raises ``ConflictError`` and writes nothing; ``overwrite=True``
and blind saves replace; ``update`` loses no increment among racing writers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from statekit.errors import ConflictError
from statekit.session import MISSING_REVISION, SessionBase
from statekit.testing._models import Check, SessionFactory, Tally, fresh_user

RACING_TASKS = 16
"""Tasks, each with its own session object, racing to increment one counter."""


async def _conflicts(call: Callable[[], Awaitable[Any]], what: str) -> None:
    try:
        await call()
    except ConflictError as err:
        assert err.source, err
        return
    raise AssertionError(f"{what}: expected ConflictError")


async def check_revisions(make_session: SessionFactory) -> None:
    """A revision exists once saved, stays when unchanged state is re-saved, changes with the bytes."""
    user = fresh_user()
    async with make_session() as session:
        assert await session.arevision("s", user) is None, "a session never saved has a revision"
        await session.asave("s", user, tally=Tally(count=1))
        first = await session.aread_document("s", user)
        assert first is not None and first.revision == await session.arevision("s", user), first
        assert first.data["tally"] == {"count": 1}, first.data
        await session.asave("s", user, tally=Tally(count=1))
        again = await session.aread_document("s", user)
        assert again == first, "re-saving unchanged state changed the stored bytes"
        await session.asave("s", user, tally=Tally(count=2))
        assert await session.arevision("s", user) not in (None, first.revision), "saving other state kept the revision"


async def check_stale_save_conflicts(make_session: SessionFactory) -> None:
    """A save through an object that knows an older revision (or a session since deleted) fails and changes nothing."""
    user = fresh_user()
    async with make_session() as writer, make_session() as stale:
        await writer.asave("s", user, tally=Tally(count=1))
        await stale.aload("s", user, tally=Tally())
        await writer.asave("s", user, tally=Tally(count=2))
        before = await writer.aread_document("s", user)
        await _conflicts(lambda: stale.asave("s", user, tally=Tally(count=99)), "stale save")
        assert await writer.aread_document("s", user) == before, "a refused save changed the document"
        await _conflicts(lambda: stale.asave("s", user, tally=Tally(count=99)), "stale save, twice")
        await stale.asave("s", user, overwrite=True, tally=Tally(count=3))
        await stale.asave("s", user, tally=Tally(count=4))  # it now knows what it wrote
        await _conflicts(lambda: writer.asave("s", user, tally=Tally(count=5)), "the first writer, now stale")
        assert await _fresh_count(make_session, user) == 4, "the stored session is not the last successful save"
        await writer.aload("s", user, tally=Tally())
        assert await stale.adelete("s", user), "delete() of a stored session did not return True"
        await _conflicts(lambda: writer.asave("s", user, tally=Tally(count=6)), "a save after another object deleted it")
        assert not await stale.aexists("s", user), "a refused save of a deleted session stored it again"


async def check_blind_save_and_delete(make_session: SessionFactory) -> None:
    """An object that never saw the session replaces it; a delete makes the next save blind."""
    user = fresh_user()
    async with make_session() as first, make_session() as blind:
        await first.asave("s", user, tally=Tally(count=1))
        await blind.asave("s", user, tally=Tally(count=2))
        assert await _count(blind, user) == 2, "a blind save did not replace the session"
        await first.aload("s", user, tally=Tally())
        await blind.asave("s", user, tally=Tally(count=3))
        assert await first.adelete("s", user), "delete() of a stored session did not return True"
        await first.asave("s", user, tally=Tally(count=4))
        assert await _count(blind, user) == 4, "a save after a delete did not store the session"


async def check_create_race(make_session: SessionFactory) -> None:
    """Two objects that both saw the session missing: the second to create it conflicts."""
    user = fresh_user()
    async with make_session() as one, make_session() as two:
        assert await one.aload("s", user, tally=Tally()) == {}
        assert await two.aload("s", user, tally=Tally()) == {}
        await one.asave("s", user, tally=Tally(count=1))
        await _conflicts(lambda: two.asave("s", user, tally=Tally(count=2)), "second creator")
        assert await _count(one, user) == 1, "a conflicting creator changed the session"


async def check_write_document(make_session: SessionFactory) -> None:
    """``awrite_document`` compares against the revision given, or none when ``overwrite``."""
    user = fresh_user()
    async with make_session() as session:
        data = {"tally": {"count": 1}}
        created = await session.awrite_document("s", data, user, expected_revision=MISSING_REVISION)
        assert created == await session.arevision("s", user)
        await _conflicts(
            lambda: session.awrite_document("s", data, user, expected_revision=MISSING_REVISION), "create over"
        )
        await _conflicts(lambda: session.awrite_document("s", data, user, expected_revision="0" * 40), "wrong rev")
        second = await session.awrite_document("s", {"tally": {"count": 2}}, user, expected_revision=created)
        await session.awrite_document("s", {"tally": {"count": 3}}, user, overwrite=True)
        assert second != created, "writing other data kept the revision"
        assert await _count(session, user) == 3, "write_document(overwrite=True) did not replace the session"


async def check_update_races(make_session: SessionFactory) -> None:
    """Tasks with their own session objects racing ``aupdate`` on one session lose no increment."""
    user = fresh_user()

    async def worker() -> None:
        tally = Tally()

        def bump() -> None:
            tally.count += 1

        async with make_session() as session:
            for _ in range(3):
                await session.aupdate("s", bump, user_id=user, retries=100, tally=tally)

    await asyncio.gather(*(worker() for _ in range(RACING_TASKS)))
    count = await _fresh_count(make_session, user)
    assert count == 3 * RACING_TASKS, (
        f"racing update() tasks lost {3 * RACING_TASKS - count} of {3 * RACING_TASKS} increments: "
        "_write_if must compare and write as one atomic step of the storage (a transaction, a lock, a script)"
    )


async def check_update_async_mutate(make_session: SessionFactory) -> None:
    """``aupdate`` awaits an async ``mutate`` and starts a missing session from the modules as given."""
    user = fresh_user()
    tally = Tally(count=10)

    async def bump() -> None:
        await asyncio.sleep(0)
        tally.count += 1

    async with make_session() as session:
        await session.aupdate("s", bump, user_id=user, tally=tally)
        assert await _count(session, user) == 11
        await session.aupdate("s", bump, user_id=user, tally=tally)
    assert await _fresh_count(make_session, user) == 12


async def _count(session: SessionBase, user: str) -> int:
    tally = Tally()
    await session.aload("s", user, allow_not_exist=False, tally=tally)
    return tally.count


async def _fresh_count(make_session: SessionFactory, user: str) -> int:
    async with make_session() as session:
        return await _count(session, user)


REVISION_CHECKS: dict[str, Check] = {
    check.__name__.removeprefix("check_"): check
    for check in (
        check_revisions,
        check_stale_save_conflicts,
        check_blind_save_and_delete,
        check_create_race,
        check_write_document,
        check_update_races,
        check_update_async_mutate,
    )
}
"""The revision and conflict checks, by name."""
