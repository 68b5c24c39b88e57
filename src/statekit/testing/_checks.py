"""The contract's checks of saving, loading, listing and deleting (see :mod:`statekit.testing`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from statekit.errors import (
    ConflictError,
    DocumentError,
    InvalidSessionIdError,
    SessionError,
    SessionNotFoundError,
    StateDumpError,
    StateLoadError,
)
from statekit.session import META_KEY, SessionBase
from statekit.testing._models import (
    HOSTILE_IDS,
    LARGE_SESSION_MESSAGES,
    TRICKY_TEXTS,
    Chat,
    Check,
    Counter,
    Journal,
    Message,
    SessionFactory,
    fresh_user,
)


def _chat(name: str, count: int = 3) -> Chat:
    tool = [{"type": "tool_use", "id": f"call-{name}", "input": {"query": name, "top_k": 3}}]
    messages = [Message("user" if i % 2 else "assistant", f"{name} #{i}" if i % 3 else tool) for i in range(count)]
    return Chat(name=name, messages=messages)



async def check_round_trip(make_session: SessionFactory) -> None:
    """What is saved loads back equal, for every module of the session."""
    user = fresh_user()
    async with make_session() as session:
        await session.asave("s", user, chat=_chat("saved"), counter=Counter(count=7))
        chat, counter = Chat(), Counter()
        results = await session.aload("s", user, chat=chat, counter=counter)
    assert chat == _chat("saved"), chat
    assert counter.count == 7, counter
    assert set(results) == {"chat", "counter"}, results


async def check_reference_names(make_session: SessionFactory) -> None:
    """``save_session_state`` / ``load_session_state`` behave as ``asave`` / ``aload``."""
    user = fresh_user()
    async with make_session() as session:
        await session.save_session_state("s", user_id=user, chat=_chat("ref"))
        chat = Chat()
        await session.load_session_state("s", user_id=user, allow_not_exist=False, chat=chat)
    assert chat == _chat("ref"), chat


async def check_default_user(make_session: SessionFactory) -> None:
    """``user_id=None`` (the default) means the backend's ``default_user_id``, in every method."""
    async with make_session() as session:
        default = session.default_user_id
        await session.asave("s", counter=Counter(count=5))
        await session.asave("t", fresh_user(), counter=Counter())
        assert await session.aexists("s", default), "a save without user_id did not use default_user_id"
        listed = await session.alist_sessions()
        assert "s" in listed, "list_sessions() did not list the default user's sessions"
        assert "t" not in listed, "list_sessions() of the default user listed another user's session"
        assert not await session.aexists("t"), "exists() without user_id found another user's session"
        assert not await session.aexists("s", fresh_user()), "exists() found the default user's session for another user"
        assert await session.aload("s", fresh_user(), counter=Counter()) == {}, "load() found the default user's session"
        counter = Counter()
        await session.aload("s", default, allow_not_exist=False, counter=counter)
        assert counter.count == 5, counter
        assert await session.adelete("s"), "delete() did not delete the default user's session"


async def check_save_replaces(make_session: SessionFactory) -> None:
    """A second save replaces the modules it names, whole, and keeps the ones it does not name."""
    user = fresh_user()
    async with make_session() as session:
        await session.asave("s", user, chat=_chat("first"), counter=Counter(count=1))
        await session.asave("s", user, chat=_chat("second", 1))
        chat, counter = Chat(), Counter()
        await session.aload("s", user, chat=chat, counter=counter)
        assert chat == _chat("second", 1), chat
        assert counter.count == 1, f"a save dropped a module it did not name: {counter!r}"


async def check_missing_session(make_session: SessionFactory) -> None:
    """A missing session is a no-op when allowed and ``SessionNotFoundError`` when not."""
    user = fresh_user()
    chat = _chat("untouched")
    async with make_session() as session:
        assert await session.aload("nope", user, chat=chat) == {}, "load() of a missing session returned results"
        assert await session.aexists("nope", user) is False, "exists() of a missing session did not return False"
        try:
            await session.aload("nope", user, allow_not_exist=False, chat=chat)
        except SessionNotFoundError:
            pass
        else:
            raise AssertionError("loading a missing session with allow_not_exist=False did not raise")
    assert chat == _chat("untouched"), chat


async def check_list_delete_exists(make_session: SessionFactory) -> None:
    """Listing is per user (even when one user id starts another) and sorted; delete tells if it
    deleted, and deletes that user's session only; exists and delete answer ``True`` or ``False``."""
    user = fresh_user()
    other = user + "_x"
    async with make_session() as session:
        await session.asave("b", other, counter=Counter())  # first: a store that finds ids in order meets it first
        for session_id in ("b", "a", "c"):
            await session.asave(session_id, user, counter=Counter())
        await session.asave("z", other, counter=Counter())
        await _listed(session, user, ["a", "b", "c"])
        assert await session.aexists("b", user) is True, "exists() of a saved session did not return True"
        assert await session.aexists("z", user) is False, "exists() found another user's session"
        assert not await session.aexists("a", other), "exists() found another user's session"
        assert await session.aload("a", other, counter=Counter()) == {}, "load() found another user's session"
        assert await session.adelete("b", user) is True, "delete() of a stored session did not return True"
        assert await session.aexists("b", other), "delete() deleted another user's session of the same id"
        assert await session.adelete("b", user) is False, "delete() of a missing session did not return False"
        assert not await session.aexists("b", user), "exists() found a deleted session"
        await _listed(session, user, ["a", "c"])
        await _listed(session, other, ["b", "z"])
        await _listed(session, fresh_user(), [])


async def _listed(session: SessionBase, user: str, expected: list[str]) -> None:
    listed = await session.alist_sessions(user)
    assert listed == expected, f"list_sessions({user!r}) returned {listed!r}, not {expected!r}"


async def check_hostile_ids(make_session: SessionFactory) -> None:
    """Ids that look like paths, patterns or separators neither escape nor collide."""
    prefix = fresh_user()
    pairs = [(prefix + user if user else user, session_id) for user, session_id in HOSTILE_IDS]
    async with make_session() as session:
        for index, (user, session_id) in enumerate(pairs):
            await session.asave(session_id, user, counter=Counter(count=index))
        for index, (user, session_id) in enumerate(pairs):
            counter = Counter()
            await session.aload(session_id, user, allow_not_exist=False, counter=counter)
            assert counter.count == index, (user, session_id, counter.count)
        for user in {user for user, _ in pairs if user}:
            expected = sorted(session_id for owner, session_id in pairs if owner == user)
            await _listed(session, user, expected)
        await _delete_all(session, pairs)


async def _delete_all(session: SessionBase, pairs: list[tuple[str, str]]) -> None:
    for user, session_id in pairs:
        assert await session.adelete(session_id, user), (user, session_id)


async def check_invalid_ids(make_session: SessionFactory) -> None:
    """Empty, NUL, over-long and non-``str`` ids are ``InvalidSessionIdError``, for every method."""
    bad: list[tuple[Any, Any]] = [("", "u"), ("a\x00b", "u"), ("x" * 10_000, "u"), ("s", "u\x00"), (3, "u"), ("s", 4)]
    async with make_session() as session:
        for session_id, user in bad:
            for call in _calls(session, session_id, user):
                await expect(InvalidSessionIdError, call, (session_id, user))
        await expect(InvalidSessionIdError, lambda: session.alist_sessions("u\x00"), "list")


def _calls(session: SessionBase, session_id: Any, user: Any) -> list[Callable[[], Awaitable[Any]]]:
    return [
        lambda: session.asave(session_id, user, counter=Counter()),
        lambda: session.aload(session_id, user, counter=Counter()),
        lambda: session.aexists(session_id, user),
        lambda: session.adelete(session_id, user),
    ]


async def expect(kind: type[Exception], call: Callable[[], Awaitable[Any]], what: object) -> None:
    """Await ``call``; fail, naming ``what``, unless it raises ``kind``."""
    try:
        await call()
    except kind:
        return
    raise AssertionError(f"{what!r}: expected {kind.__name__}")


async def check_failed_save_keeps_old(make_session: SessionFactory) -> None:
    """A save that fails (unencodable text, reserved name) leaves the stored bytes as they were."""
    user = fresh_user()
    async with make_session() as session:
        await session.asave("s", user, chat=_chat("old"))
        before = await session.aread_document("s", user)
        broken = Chat(name="lone \ud800 surrogate")
        await expect(StateDumpError, lambda: session.asave("s", user, chat=broken), "lone surrogate")
        reserved: dict[str, Any] = {META_KEY: Counter()}
        await expect(SessionError, lambda: session.asave("s", user, **reserved), META_KEY)
        assert await session.aread_document("s", user) == before
        chat = Chat()
        await session.aload("s", user, chat=chat)
    assert chat == _chat("old"), chat


async def check_all_or_nothing(make_session: SessionFactory) -> None:
    """When one module of a load fails, no module changes; problems name their path."""
    user = fresh_user()
    async with make_session() as session:
        await session.asave("s", user, chat=_chat("saved"), other=Counter(count=1))
        chat, wrong = _chat("mine"), Chat(name="wrong shape")
        try:
            await session.aload("s", user, chat=chat, other=wrong)
        except StateLoadError as err:
            assert all(problem.path[0] == "other" for problem in err.problems), err
            assert all(problem.source for problem in err.problems), err
        else:
            raise AssertionError("loading a Counter's state into a Chat did not fail")
    assert chat == _chat("mine"), chat
    assert wrong == Chat(name="wrong shape"), wrong


async def check_concurrent_saves(make_session: SessionFactory) -> None:
    """Many tasks overwriting one session while others load it: every load sees one whole version."""
    user = fresh_user()
    versions = [_chat(f"v{index}", 20) for index in range(24)]
    async with make_session() as session:
        await session.asave("s", user, chat=versions[0])
        seen = await asyncio.gather(
            *(session.asave("s", user, overwrite=True, chat=version) for version in versions),
            *(_load_while_saving(session, user) for _ in versions),
        )
        final = await _load_chat(session, user)
    for chat in [*seen[len(versions) :], final]:
        assert chat in versions, f"a load while other tasks saved got a version nobody saved: {chat}"


async def _load_while_saving(session: SessionBase, user: str) -> Chat:
    try:
        return await _load_chat(session, user)
    except (DocumentError, SessionNotFoundError) as err:
        raise AssertionError(
            f"a load while other tasks saved found no whole document ({err}): _write must replace the "
            "stored bytes atomically, so that a reader sees the old document or the new one, whole"
        ) from err


async def _load_chat(session: SessionBase, user: str) -> Chat:
    chat = Chat()
    await session.aload("s", user, allow_not_exist=False, chat=chat)
    return chat


async def check_unicode(make_session: SessionFactory) -> None:
    """Any text (emoji, controls, separators, YAML look-alikes) comes back exactly."""
    user = fresh_user()
    messages = [Message(text or "user", text) for text in TRICKY_TEXTS]
    saved = Chat(name="ünïcødé 😀", messages=messages)
    async with make_session() as session:
        await session.asave("s 😀", user, chat=saved)
        chat = Chat()
        await session.aload("s 😀", user, chat=chat)
        await _listed(session, user, ["s 😀"])
    assert chat == saved, [m for m, n in zip(chat.messages, messages, strict=False) if m != n]


async def check_large_session(make_session: SessionFactory) -> None:
    """A session of :data:`LARGE_SESSION_MESSAGES` messages round-trips."""
    user = fresh_user()
    saved = Chat(name="large", messages=[Message("user", f"message {i}") for i in range(LARGE_SESSION_MESSAGES)])
    async with make_session() as session:
        await session.asave("s", user, chat=saved)
        chat = Chat()
        await session.aload("s", user, chat=chat)
        await session.adelete("s", user)
    assert chat == saved


async def check_error_positions(make_session: SessionFactory) -> None:
    """A load error names the stored session and the line of the bad value."""
    user = fresh_user()
    async with make_session() as session:
        await session.asave("s", user, counter=Counter(count=3))
        try:
            await session.aload("s", user, counter=Chat())
        except StateLoadError as err:
            assert err.problems, err
            assert all(p.source and p.line for p in err.problems), err
        else:
            raise AssertionError("loading a Counter's state into a Chat did not fail")


async def check_appends(make_session: SessionFactory) -> None:
    """Items appended between saves load back whole, through another object too; a stale appender
    conflicts and changes nothing (with ``supports_appends`` these saves go through ``_append``)."""
    user = fresh_user()
    journal = Journal(entries=["first"])
    async with make_session() as writer, make_session() as stale:
        await writer.asave("s", user, journal=journal)
        journal.entries.append("second")
        await writer.asave("s", user, journal=journal)
        behind = Journal()
        await stale.aload("s", user, journal=behind)  # after an append: it knows the deltas stored then
        journal.entries.append("third")
        await writer.asave("s", user, journal=journal)
        assert await _journal(make_session, user) == journal, "appended items did not load back"
        behind.entries.append("other")
        await expect(ConflictError, lambda: stale.asave("s", user, journal=behind), "a save behind appends")
        assert await _journal(make_session, user) == journal, "a refused save after appends changed the session"
        journal.title = "renamed"  # not only appends: the whole document is written
        journal.entries.append("fourth")
        await writer.asave("s", user, journal=journal)
    assert await _journal(make_session, user) == journal, "a full save after appends did not load back"


async def _journal(make_session: SessionFactory, user: str) -> Journal:
    journal = Journal()
    async with make_session() as session:
        await session.aload("s", user, allow_not_exist=False, journal=journal)
    return journal


BASIC_CHECKS: dict[str, Check] = {
    check.__name__.removeprefix("check_"): check
    for check in (
        check_round_trip,
        check_reference_names,
        check_default_user,
        check_save_replaces,
        check_missing_session,
        check_list_delete_exists,
        check_hostile_ids,
        check_invalid_ids,
        check_failed_save_keeps_old,
        check_all_or_nothing,
        check_concurrent_saves,
        check_unicode,
        check_large_session,
        check_error_positions,
        check_appends,
    )
}
"""The checks above, by name."""
