"""The session contract's checks of sessions holding more modules than one save names (see :mod:`statekit.testing`).

Every backend must keep these promises: a save keeps the stored modules it does
not name, exactly as stored; it does so under the same revision check, so that
another writer's change to a module it does not name is never overwritten by
stale data; ``remove_modules`` is the one way a module leaves a session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from statekit.errors import ConflictError, SessionError, SessionNotFoundError, StateLoadError
from statekit.session import SessionBase
from statekit.testing._models import Check, Note, SessionFactory, Tally, fresh_user

RACING_WRITERS = 8
"""Tasks, each with its own session object, each updating its own module of one session."""


async def _count(session: SessionBase, user: str, name: str = "tally") -> int:
    tally = Tally()
    modules: dict[str, Any] = {name: tally}
    await session.aload("s", user, allow_not_exist=False, **modules)
    return tally.count


async def check_save_keeps_other_modules(make_session: SessionFactory) -> None:
    """A save replaces the modules it names and keeps the others as stored: blind, checked and overwriting."""
    user = fresh_user()
    async with make_session() as session, make_session() as blind:
        await session.asave("s", user, tally=Tally(count=1), note=Note(text="kept"))
        stored = await session.aread_document("s", user)
        assert stored is not None
        await session.asave("s", user, tally=Tally(count=2))  # checked: this object saved it
        await blind.asave("s", user, tally=Tally(count=3))  # blind: never saw it
        await blind.asave("s", user, overwrite=True, tally=Tally(count=4))
        note = Note()
        await session.aload("s", user, allow_not_exist=False, note=note)
        assert note.text == "kept", f"a save dropped or changed a module it did not name: {note!r}"
        after = await session.aread_document("s", user)
        assert after is not None and after.data["note"] == stored.data["note"], after
        assert await _count(session, user) == 4


async def check_kept_module_is_not_stale(make_session: SessionFactory) -> None:
    """A save naming one module conflicts, rather than write back an old copy of another writer's module."""
    user = fresh_user()
    async with make_session() as one, make_session() as two:
        await one.asave("s", user, tally=Tally(count=1), note=Note(text="first"))
        await two.aload("s", user, tally=Tally())
        await one.asave("s", user, tally=Tally(count=1), note=Note(text="second"))
        try:
            await two.asave("s", user, tally=Tally(count=5))
        except ConflictError:
            pass
        else:
            raise AssertionError("a save over a changed session did not conflict")
        note = Note()
        await one.aload("s", user, note=note)
        assert note.text == "second", f"another writer's module was overwritten: {note!r}"


async def check_racing_module_writers(make_session: SessionFactory) -> None:
    """Writers updating different modules of one session at once lose none of each other's changes."""
    user = fresh_user()
    async with make_session() as first:
        modules: dict[str, Any] = {f"t{index}": Tally() for index in range(RACING_WRITERS)}
        await first.asave("s", user, **modules)

    async def bump(index: int) -> None:
        tally = Tally()

        def mutate() -> None:
            tally.count += 1

        async with make_session() as session:
            for _ in range(3):
                await session.aupdate("s", mutate, user_id=user, retries=1000, **{f"t{index}": tally})

    await asyncio.gather(*(bump(index) for index in range(RACING_WRITERS)))
    async with make_session() as session:
        counts = [await _count(session, user, f"t{index}") for index in range(RACING_WRITERS)]
    assert counts == [3] * RACING_WRITERS, f"a writer's change to its own module was lost: {counts}"


async def check_remove_modules(make_session: SessionFactory) -> None:
    """``remove_modules`` drops the modules named and keeps the others; a name not stored changes nothing."""
    user = fresh_user()
    async with make_session() as session:
        await session.asave("s", user, tally=Tally(count=1), note=Note(text="gone"))
        for call in (
            lambda: session.aremove_modules("s", "nope", user_id=user),
            lambda: session.aremove_modules("s", "tally", "note", user_id=user),
            lambda: session.aremove_modules("s", user_id=user),
        ):
            await _refused(SessionError, call)
        await _refused(SessionNotFoundError, lambda: session.aremove_modules("never", "note", user_id=user))
        await session.aremove_modules("s", "note", user_id=user)
        assert await _count(session, user) == 1
        await _refused(StateLoadError, lambda: session.aload("s", user, note=Note()))


async def _refused(kind: type[Exception], call: Callable[[], Any]) -> None:
    try:
        await call()
    except kind:
        return
    raise AssertionError(f"expected {kind.__name__}")


MODULE_CHECKS: dict[str, Check] = {
    check.__name__.removeprefix("check_"): check
    for check in (check_save_keeps_other_modules, check_kept_module_is_not_stale, check_racing_module_writers, check_remove_modules)
}
"""The checks above, by name."""
