"""The history checks of the session contract: kept revisions load as saved, pruning, rollback, fork, erasure.

A backend with ``supports_history`` must keep past revisions when an object's
``keep_history`` asks (the checks set it on the object); one without must
refuse ``keep_history`` other than 0 and list a session's head alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from statekit.errors import ConflictError, SessionError, SessionNotFoundError
from statekit.session import SessionBase
from statekit.testing._checks import expect
from statekit.testing._models import Check, Journal, Note, SessionFactory, Tally, fresh_user


async def _saved(session: SessionBase, user: str, count: int, sid: str = "h") -> str:
    await session.asave(sid, user, tally=Tally(count=count), note=Note(text=f"note {count}"))
    revision = await session.arevision(sid, user)
    assert revision is not None
    return revision


async def _count_at(session: SessionBase, user: str, revision: str, sid: str = "h") -> int:
    tally = Tally()
    await session.aload_at(sid, revision, user_id=user, tally=tally)
    return tally.count


def _loader(session: SessionBase, user: str, revision: str) -> Callable[[], Awaitable[object]]:
    return lambda: session.aload_at("h", revision, user_id=user, tally=Tally())


async def check_history_keeps_and_prunes(make_session: SessionFactory) -> None:
    """With keep_history=2, history() lists the head and the 2 newest past revisions, each loading as saved."""
    user = fresh_user()
    async with make_session() as session:
        if not session.supports_history:
            await session.asave("h", user, tally=Tally(count=1))
            listed = await session.ahistory("h", user)
            assert [r.revision for r in listed] == [await session.arevision("h", user)], listed
            try:
                await session.aprune_history("h", user, keep=3)
            except SessionError as err:
                assert "does not keep history" in str(err), err
            else:
                raise AssertionError(f"{type(session).__name__} keeps no history, yet prune_history(keep=3) was accepted")
            return
        session.keep_history = 2
        revisions = [await _saved(session, user, count) for count in range(5)]
        listed = await session.ahistory("h", user)
        assert [r.revision for r in listed] == revisions[::-1][:3], (listed, revisions)
        assert [r.parent for r in listed] == [revisions[3], revisions[2], revisions[1]], listed
        for revision, count in zip(revisions[::-1][:3], (4, 3, 2), strict=True):
            assert await _count_at(session, user, revision) == count
        assert all(r.saved_at is not None and r.saved_at.utcoffset() is not None for r in listed), listed
        assert all(r.modules == ("tally", "note") and r.size > 0 for r in listed), listed
        for pruned in revisions[:2]:
            await expect(SessionNotFoundError, _loader(session, user, pruned), "a pruned revision")
        assert await session.ahistory("missing", user) == []


async def check_history_is_recorded_with_the_session(make_session: SessionFactory) -> None:
    """An object with keep_history=0 writing a session that keeps history keeps it (the retention is the session's)."""
    user = fresh_user()
    async with make_session() as keeper, make_session() as plain:
        if not keeper.supports_history:
            return
        keeper.keep_history = 3
        first = await _saved(keeper, user, 1)
        await plain.asave("h", user, tally=Tally(count=2), note=Note())
        listed = await plain.ahistory("h", user)
        assert [r.revision for r in listed][1:] == [first], listed
        assert await _count_at(plain, user, first) == 1


async def check_rollback_and_fork(make_session: SessionFactory) -> None:
    """rollback() makes an old revision's modules the head over the head read; fork() copies a revision into a new session."""
    user = fresh_user()
    async with make_session() as session, make_session() as other:
        if not session.supports_history:
            return
        session.keep_history = None
        first = await _saved(session, user, 1)
        second = await _saved(session, user, 2)
        rolled = await session.arollback("h", first, user_id=user)
        listed = await session.ahistory("h", user)
        assert [r.revision for r in listed] == [rolled, second, first], listed
        tally = Tally()
        await other.aload("h", user, tally=tally)
        assert tally.count == 1
        await expect(ConflictError, lambda: session.asave("h", user, tally=Tally(count=9)), "a save from the object holding the state before the rollback")
        forked = await other.afork("h", "f", user_id=user, at=second)
        fork_history = await other.ahistory("f", user)
        assert [r.revision for r in fork_history] == [forked], fork_history
        assert fork_history[0].forked_from == (user, "h", second), fork_history
        assert await _count_at(other, user, forked, "f") == 2
        await expect(ConflictError, lambda: other.afork("h", "f", user_id=user), "a fork onto a session that exists")
        await other.asave("f", user, tally=Tally(count=7))
        assert await _count_at(other, user, (await other.ahistory("h", user))[0].revision) == 1  # the source did not change


async def check_delete_erases_history(make_session: SessionFactory) -> None:
    """delete() removes the kept revisions: a session saved again under the id starts with no history."""
    user = fresh_user()
    async with make_session() as session:
        if not session.supports_history:
            return
        session.keep_history = 5
        old = await _saved(session, user, 1)
        await _saved(session, user, 2)
        assert await session.adelete("h", user)
        assert await session.ahistory("h", user) == []
        await session.asave("h", user, tally=Tally(count=3), note=Note())
        assert len(await session.ahistory("h", user)) == 1
        await expect(SessionNotFoundError, _loader(session, user, old), "a revision of a deleted session")
        assert await session.alist_sessions(user) == ["h"]


async def check_history_with_appends(make_session: SessionFactory) -> None:
    """A session with an append-only list keeps every revision loadable exactly as saved, across rollbacks."""
    user = fresh_user()
    async with make_session() as session:
        if not session.supports_history:
            return
        session.keep_history = None
        journal = Journal()
        revisions: list[str] = []
        for turn in range(4):
            journal.entries.append(f"entry {turn}")
            await session.asave("j", user, journal=journal)
            revisions.append(await session.arevision("j", user) or "")
        rolled = await session.arollback("j", revisions[1], user_id=user)
        for revision, count in [*zip(revisions, range(1, 5), strict=True), (rolled, 2)]:
            loaded = Journal()
            await session.aload_at("j", revision, user_id=user, journal=loaded)
            assert loaded.entries == [f"entry {turn}" for turn in range(count)], (revision, loaded.entries)


async def _entries_at(session: SessionBase, user: str, revision: str, sid: str = "d") -> list[str]:
    loaded = Journal()
    await session.aload_at(sid, revision, user_id=user, journal=loaded, tally=Tally())
    return loaded.entries


async def check_history_over_deltas(make_session: SessionFactory) -> None:
    """Turns saved as deltas name their revisions: each loads as saved after more turns, a full rewrite,
    a rollback to a shorter list and a fork; the retention counts them like any revision."""
    user = fresh_user()
    async with make_session() as session, make_session() as other:
        if not session.supports_history:
            return
        session.keep_history = 4
        journal, tally = Journal(), Tally()
        saved: dict[str, list[str]] = {}
        revisions: list[str] = []

        async def turn(text: str | None, count: int = 0) -> str:
            if text is not None:
                journal.entries.append(text)
            tally.count = count
            await session.asave("d", user, journal=journal, tally=tally)
            revision = await session.arevision("d", user)
            assert revision is not None and revision not in saved, (revision, saved)
            saved[revision] = list(journal.entries)
            revisions.append(revision)
            return revision

        for number in range(3):
            await turn(f"turn {number}")
        await turn(None)  # nothing appended: still a revision of its own
        listed = await session.ahistory("d", user)
        assert [r.revision for r in listed] == revisions[::-1], (listed, revisions)
        assert [r.parent for r in listed] == [*revisions[::-1][1:], None], listed
        assert [r.size for r in listed] == sorted((r.size for r in listed), reverse=True), listed
        await turn("turn 3", count=1)  # the skeleton changed: a full rewrite keeps the turns before it
        for number in range(4, 7):
            await turn(f"turn {number}", count=1)
        listed = await session.ahistory("d", user)
        assert [r.revision for r in listed] == revisions[::-1][:5], (listed, revisions)
        for revision in revisions[-5:]:
            assert await _entries_at(other, user, revision) == saved[revision], revision
        for pruned in revisions[:-5]:
            await expect(SessionNotFoundError, partial(_entries_at, other, user, pruned), "a revision past the retention")
        early = revisions[-5]
        rolled = await other.arollback("d", early, user_id=user)
        saved[rolled] = saved[early]
        await other.aload("d", user, journal=(again := Journal()), tally=Tally(count=1))
        again.entries.append("after the rollback")
        await other.asave("d", user, journal=again, tally=Tally(count=1))
        head = await other.arevision("d", user)
        assert head is not None
        saved[head] = list(again.entries)
        listed = await other.ahistory("d", user)
        assert [r.revision for r in listed][:3] == [head, rolled, revisions[-1]], listed
        for revision in [r.revision for r in listed]:
            assert await _entries_at(other, user, revision) == saved[revision], revision
        forked = await other.afork("d", "d2", user_id=user, at=revisions[-1])
        assert await _entries_at(other, user, forked, "d2") == saved[revisions[-1]]


HISTORY_CHECKS: dict[str, Check] = {
    "history_keeps_and_prunes": check_history_keeps_and_prunes,
    "history_is_recorded_with_the_session": check_history_is_recorded_with_the_session,
    "rollback_and_fork": check_rollback_and_fork,
    "delete_erases_history": check_delete_erases_history,
    "history_with_appends": check_history_with_appends,
    "history_over_deltas": check_history_over_deltas,
}
"""The history checks, by name (part of :data:`~statekit.testing.CHECKS`)."""
