"""The lease checks of the session contract: one writer per session while a lease is live, fencing tokens that only grow.

A backend with ``supports_leases`` must keep them; one without must refuse
``lease()`` with a ``SessionError`` that says so, and write as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from statekit.errors import LeaseHeldError, LeaseLostError, SessionError
from statekit.session import Lease, SessionBase
from statekit.testing._checks import expect
from statekit.testing._models import Check, Journal, Note, SessionFactory, Tally, fresh_user

LONG = 120.0
"""Seconds: a lease that must not run out during a check, however loaded the machine."""

SHORT = 0.3
"""Seconds: a lease a check lets run out (it sleeps :data:`PAST_SHORT` first)."""

PAST_SHORT = 0.8
"""Seconds a check sleeps for a :data:`SHORT` lease to be over."""


async def _unsupported(session: SessionBase) -> None:
    """A backend without leases refuses ``lease()`` and saves as before."""
    try:
        await session.alease("s", fresh_user())
    except SessionError as err:
        assert "does not support leases" in str(err), err
    else:
        raise AssertionError(f"{type(session).__name__} has no supports_leases, yet lease() did not raise SessionError")


def _held(call: Callable[[], Awaitable[Any]], what: str) -> Awaitable[None]:
    return expect(LeaseHeldError, call, what)


def _lost(call: Callable[[], Awaitable[Any]], what: str) -> Awaitable[None]:
    return expect(LeaseLostError, call, what)


def _check_lease(lease: Lease, session_id: str, user: str, ttl: float) -> None:
    assert type(lease.token) is int, lease
    assert (lease.session_id, lease.user_id) == (session_id, user), lease
    now = datetime.now(UTC)
    assert lease.expires_at.tzinfo is not None and lease.expires_at.utcoffset() == timedelta(0), lease.expires_at
    assert now - timedelta(seconds=5) < lease.expires_at <= now + timedelta(seconds=ttl + 5), (lease.expires_at, now)


async def check_lease_fences_writes(make_session: SessionFactory) -> None:
    """While A holds the lease, A writes and every write of B is refused with LeaseHeldError, changing nothing."""
    user = fresh_user()
    async with make_session() as holder, make_session() as other:
        if not holder.supports_leases:
            return await _unsupported(holder)
        lease = await holder.alease("s", user, ttl=LONG)
        _check_lease(lease, "s", user, LONG)
        await holder.asave("s", user, tally=Tally(count=1), note=Note(text="kept"))
        before = await other.aread_document("s", user)
        assert before is not None, "the holder's save was not stored"
        await _held(lambda: other.asave("s", user, tally=Tally(count=9)), "a save of another object")
        await _held(lambda: other.asave("s", user, overwrite=True, tally=Tally(count=9)), "an overwrite=True save")
        await _held(lambda: other.adelete("s", user), "a delete")
        await _held(lambda: other.aremove_modules("s", "note", user_id=user), "remove_modules")
        await _held(lambda: other.awrite_document("s", {"tally": {"count": 9}}, user, overwrite=True), "write_document")
        calls: list[int] = []
        await _held(lambda: other.aupdate("s", lambda: calls.append(1), user_id=user, tally=Tally()), "an update")
        assert len(calls) <= 1, f"update() retried a write refused by a lease ({len(calls)} attempts)"
        try:
            await other.asave("s", user, tally=Tally(count=9))
        except LeaseHeldError as err:
            assert err.source and err.held_until is not None, err
            assert abs((err.held_until - lease.expires_at).total_seconds()) < 5, (err.held_until, lease.expires_at)
        assert await other.aread_document("s", user) == before, "a refused write changed the session"
        assert await holder.aupdate("s", lambda: 7, user_id=user, tally=Tally()) == 7
        await holder.asave("s", user, tally=Tally(count=2))
        await lease.arelease()
        await other.aload("s", user, tally=Tally())
        await other.asave("s", user, tally=Tally(count=3))  # released: anyone writes again
        await holder.asave("s", user, overwrite=True, tally=Tally(count=4))  # and the holder without a token


async def check_lease_tokens_grow(make_session: SessionFactory) -> None:
    """Tokens only grow (over releases, deletes and new objects); of many takers at once exactly one wins."""
    user = fresh_user()
    tokens: list[int] = []
    for _ in range(3):
        async with make_session() as session:
            if not session.supports_leases:
                return await _unsupported(session)
            async with session.alease("s", user, ttl=LONG) as lease:
                tokens.append(lease.token)
                await session.asave("s", user, tally=Tally(count=len(tokens)))
            assert await session.adelete("s", user)
    assert tokens == sorted(set(tokens)), f"fencing tokens did not grow: {tokens}"
    sessions = [make_session() for _ in range(8)]
    try:
        outcomes = await asyncio.gather(*(s.alease("race", user, ttl=LONG) for s in sessions), return_exceptions=True)
        won = [o for o in outcomes if isinstance(o, Lease)]
        assert len(won) == 1, f"{len(won)} of 8 objects took one lease at once: {outcomes!r}"
        assert all(isinstance(o, LeaseHeldError) for o in outcomes if not isinstance(o, Lease)), outcomes
        await won[0].arelease()
    finally:
        for session in sessions:
            await session.aclose()


async def check_lease_wait(make_session: SessionFactory) -> None:
    """``wait=0`` refuses a held lease saying until when; a longer wait gets it once released or expired."""
    user = fresh_user()
    async with make_session() as first, make_session() as second, make_session() as third:
        if not first.supports_leases:
            return await _unsupported(first)
        lease = await first.alease("s", user, ttl=LONG)
        try:
            await second.alease("s", user)
        except LeaseHeldError as err:
            assert err.held_until is not None and "wait=" in str(err), err
        else:
            raise AssertionError("a second lease on a leased session was granted")

        async def release_soon() -> None:
            await asyncio.sleep(0.2)
            await lease.arelease()

        releasing = asyncio.create_task(release_soon())
        after_release = await second.alease("s", user, ttl=SHORT, wait=LONG)
        await releasing
        assert after_release.token > lease.token, (after_release.token, lease.token)
        after_expiry = await third.alease("s", user, ttl=LONG, wait=LONG)  # second never releases: it runs out
        assert after_expiry.token > after_release.token, (after_expiry.token, after_release.token)
        await after_expiry.arelease()


async def check_lease_lost(make_session: SessionFactory) -> None:
    """A holder whose lease ran out is fenced off (LeaseLostError), even with the revision unchanged; renew fails too."""
    user = fresh_user()
    async with make_session() as late, make_session() as taker:
        if not late.supports_leases:
            return await _unsupported(late)
        await late.asave("s", user, tally=Tally(count=1))
        lease = await late.alease("s", user, ttl=SHORT)
        await asyncio.sleep(PAST_SHORT)
        before = await taker.aread_document("s", user)
        await _lost(lambda: late.asave("s", user, tally=Tally(count=2)), "a save after the lease ran out")
        await _lost(lambda: lease.arenew(), "renew after the lease ran out")
        new = await taker.alease("s", user, ttl=LONG)
        assert new.token > lease.token, (new.token, lease.token)
        await _lost(lambda: late.asave("s", user, tally=Tally(count=2)), "a save after the lease was taken over")
        await _lost(lambda: late.adelete("s", user), "a delete after the lease was taken over")
        assert await taker.aread_document("s", user) == before, "a fenced-off holder changed the session"
        await taker.asave("s", user, tally=Tally(count=3))
        await lease.arelease()  # quietly: it is not the live lease, and the live one stays
        await _held(lambda: late.asave("s", user, overwrite=True, tally=Tally(count=4)), "a save after releasing a lost lease")
        await new.arelease()


async def check_lease_renew_release(make_session: SessionFactory) -> None:
    """Renew extends the expiry with the same token; ``async with`` releases on exit, also on an exception."""
    user = fresh_user()
    async with make_session() as session, make_session() as other:
        if not session.supports_leases:
            return await _unsupported(session)
        lease = await session.alease("s", user, ttl=LONG)
        first = lease.expires_at
        await lease.arenew(LONG * 2)
        assert lease.expires_at > first and lease.ttl == LONG * 2, (first, lease.expires_at)
        await expect(SessionError, lambda: session.alease("s", user), "a second lease by the holder")
        await lease.arelease()
        await lease.arelease()  # twice: nothing to do
        await expect(SessionError, lambda: lease.arenew(), "renew after release")
        try:
            async with session.alease("s", user, ttl=LONG):
                raise ValueError("the turn failed")
        except ValueError:
            pass
        async with other.alease("s", user) as taken:  # released on the exception: free at once
            await other.asave("s", user, tally=Tally(count=1))
            assert taken.token > lease.token
        bad: dict[str, Any]
        for bad in ({"ttl": 0}, {"ttl": -1}, {"ttl": True}, {"ttl": float("nan")}, {"wait": -1}, {"ttl": "5"}):
            await expect(SessionError, _taking(session, user, bad), f"lease({bad})")


async def check_lease_appends(make_session: SessionFactory) -> None:
    """Saves after appends (delta saves where a backend stores them) are fenced like any write."""
    user = fresh_user()
    async with make_session() as holder, make_session() as other:
        if not holder.supports_leases:
            return await _unsupported(holder)
        mine, theirs = Journal(entries=["a"]), Journal()
        await holder.asave("s", user, journal=mine)
        await other.aload("s", user, journal=theirs)
        async with holder.alease("s", user, ttl=LONG):
            mine.entries.append("b")
            await holder.asave("s", user, journal=mine)
            theirs.entries.append("x")
            await _held(lambda: other.asave("s", user, journal=theirs), "a delta save of another object")
        check = Journal()
        await other.aload("s", user, journal=check)
        assert check.entries == ["a", "b"], check.entries


def _taking(session: SessionBase, user: str, options: dict[str, Any]) -> Callable[[], Awaitable[Lease]]:
    async def take() -> Lease:
        return await session.alease("s", user, **options)

    return take


LEASE_CHECKS: dict[str, Check] = {
    check.__name__.removeprefix("check_"): check
    for check in (
        check_lease_fences_writes,
        check_lease_tokens_grow,
        check_lease_wait,
        check_lease_lost,
        check_lease_renew_release,
        check_lease_appends,
    )
}
"""The lease checks, by name."""


def check_blocking_lease(make_session: SessionFactory) -> None:
    """``with session.lease(...)`` fences the other objects' blocking saves and releases on exit."""
    user = fresh_user()
    with make_session() as holder, make_session() as other:
        if not holder.supports_leases:
            return
        with holder.lease("s", user, ttl=LONG) as lease:
            holder.save("s", user, tally=Tally(count=1))
            lease.renew()
            try:
                other.save("s", user, overwrite=True, tally=Tally(count=9))
            except LeaseHeldError:
                pass
            else:
                raise AssertionError("a blocking save of another object went through a live lease")
        other.save("s", user, overwrite=True, tally=Tally(count=2))
        assert lease.released
