"""History against a model: random saves, updates, appends, compactions, rollbacks, forks, prunes and deletes; after each, history() and every listed revision agree with it."""

from __future__ import annotations

import asyncio
import io
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from statekit import ConflictError, SessionBase, SessionError
from statekit.cli._compact import compact_sessions
from statekit.session import JSONSession, YAMLSession
from statekit.session.postgres import PostgresSession
from statekit.session.redis import RedisSession
from statekit.session.sqlite import SQLiteSession
from statekit.testing import Journal, RedisCluster, local_redis_cluster
from statekit.testing._models import Tally
from strategies import examples
from test_history import KeepingDictSession

Keep = int | None
State = tuple[tuple[str, ...], int]
"""A session's modules as the model holds them: the journal's entries and the tally's count."""


@attrs.define
class Head:
    revision: str
    state: State
    parent: str | None
    forked_from: tuple[str, str, str] | None


@attrs.define
class Kept:
    """What the model knows of one stored session."""

    retention: Keep
    head: Head
    past: list[Head] = attrs.field(factory=list)


def widest(a: Keep, b: Keep) -> Keep:
    return None if a is None or b is None else max(a, b)


Factory = Callable[[Keep], SessionBase]


class HistoryMachine(RuleBasedStateMachine):
    """Drives one backend (``make``) and a model side by side; each example gets a fresh storage."""

    make: Callable[[Path], Factory] = staticmethod(lambda _: _dict_factory())

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="history-model-"))
        self.factory = type(self).make(self.folder)
        self.objects: dict[Keep, SessionBase] = {}
        self.model: dict[str, Kept] = {}
        self.user = f"u{uuid.uuid4().hex[:8]}"
        self.turn = 0

    def teardown(self) -> None:
        for session in self.objects.values():
            session.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _object(self, keep: Keep) -> SessionBase:
        if keep not in self.objects:
            self.objects[keep] = self.factory(keep)
        return self.objects[keep]

    def _write(self, sid: str, session: SessionBase, state: State, keep: Keep, *, retention: Keep | None = None) -> None:
        """The model of one write of ``state`` over the head by an object with ``keep`` (or a prune to ``retention``)."""
        revision = session.revision(sid, self.user)
        assert revision is not None
        old = self.model.get(sid)
        if old is None:
            recorded: Keep = keep
            self.model[sid] = Kept(keep, Head(revision, state, None, None))
            return
        recorded = widest(old.retention, keep) if retention == -1 else retention
        keeps = recorded != 0
        past = [old.head, *old.past] if keeps else []
        if recorded is not None:
            past = past[:recorded]
        self.model[sid] = Kept(recorded, Head(revision, state, old.head.revision if keeps else None, None), past)

    @initialize()
    def start(self) -> None:
        self.turn = 0

    @rule(keep=st.sampled_from([0, 1, 3, None]), appended=st.integers(0, 3), count=st.integers(0, 5), sid=st.sampled_from(["s", "t"]))
    def save(self, keep: Keep, appended: int, count: int, sid: str) -> None:
        session = self._object(keep)
        journal, tally = Journal(), Tally()
        session.load(sid, self.user, journal=journal, tally=tally)
        for _ in range(appended):
            self.turn += 1
            journal.entries.append(f"turn {self.turn}")
        tally.count = count
        session.save(sid, self.user, journal=journal, tally=tally)
        self._write(sid, session, (tuple(journal.entries), count), keep, retention=-1)

    @rule(keep=st.sampled_from([0, 3, None]), sid=st.sampled_from(["s", "t"]))
    def update(self, keep: Keep, sid: str) -> None:
        session = self._object(keep)
        journal, tally = Journal(), Tally()

        def bump() -> None:
            self.turn += 1
            journal.entries.append(f"update {self.turn}")
            tally.count += 1

        session.update(sid, bump, user_id=self.user, journal=journal, tally=tally)
        self._write(sid, session, (tuple(journal.entries), tally.count), keep, retention=-1)

    @precondition(lambda self: bool(self.model))
    @rule(keep=st.sampled_from([0, 1, None]), data=st.data())
    def rollback(self, keep: Keep, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.model)))
        kept = self.model[sid]
        target = data.draw(st.sampled_from([kept.head, *kept.past]))
        session = self._object(keep)
        session.rollback(sid, target.revision, user_id=self.user)
        self._write(sid, session, target.state, keep, retention=-1)

    @precondition(lambda self: bool(self.model))
    @rule(keep=st.sampled_from([0, 2]), data=st.data(), into=st.sampled_from(["s", "t", "f"]))
    def fork(self, keep: Keep, data: st.DataObject, into: str) -> None:
        target = into
        sid = data.draw(st.sampled_from(sorted(self.model)))
        kept = self.model[sid]
        source = data.draw(st.sampled_from([kept.head, *kept.past]))
        session = self._object(keep)
        if target in self.model or target == sid:
            with pytest.raises(SessionError if target == sid else ConflictError):
                session.fork(sid, target, user_id=self.user, at=source.revision)
            return
        revision = session.fork(sid, target, user_id=self.user, at=source.revision)
        self.model[target] = Kept(
            widest(kept.retention, keep), Head(revision, source.state, None, (self.user, sid, source.revision))
        )

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), keep=st.sampled_from([0, 1, 2, None]))
    def prune(self, data: st.DataObject, keep: Keep) -> None:
        sid = data.draw(st.sampled_from(sorted(self.model)))
        session = self._object(0)
        old = self.model[sid]
        session.prune_history(sid, self.user, keep=keep)
        if old.retention == 0 and not keep and old.head.forked_from is None:
            return  # keeps none, and is to keep none: nothing written
        self._write(sid, session, old.head.state, 0, retention=keep)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        """``statekit compact``'s rewrite: deltas folded in (in a session that keeps history, a new revision
        of the same state over the head; the revisions the deltas named stay listed and load)."""
        sid = data.draw(st.sampled_from(sorted(self.model)))

        async def run() -> bool:
            async with self.factory(0) as store:
                return await compact_sessions(store, [(self.user, sid)], out=io.StringIO(), err=io.StringIO())

        assert asyncio.run(run())
        session = self._object(0)
        if session.revision(sid, self.user) != self.model[sid].head.revision:
            self._write(sid, session, self.model[sid].head.state, 0, retention=-1)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.model)))
        assert self._object(0).delete(sid, self.user)
        del self.model[sid]

    @invariant()
    def history_agrees(self) -> None:
        session = self._object(0)
        for sid in ("s", "t", "f"):
            listed = session.history(sid, self.user)
            kept = self.model.get(sid)
            if kept is None:
                assert listed == [], (sid, listed)
                continue
            heads = [kept.head, *kept.past]
            assert [r.revision for r in listed] == [h.revision for h in heads], (sid, listed, heads)
            assert [r.parent for r in listed] == [h.parent for h in heads], (sid, listed, heads)
            assert [r.forked_from for r in listed] == [h.forked_from for h in heads], (sid, listed, heads)
            for head in heads:
                journal, tally = Journal(), Tally()
                session.load_at(sid, head.revision, user_id=self.user, journal=journal, tally=tally)
                assert (tuple(journal.entries), tally.count) == head.state, (sid, head)


def _dict_factory() -> Factory:
    store: dict[str, Any] = {}
    return lambda keep: KeepingDictSession(store, keep_history=keep)


def _run(make: Callable[[Path], Factory], count: int) -> None:
    machine: Any = type("Machine", (HistoryMachine,), {"make": staticmethod(make)})
    run_state_machine_as_test(machine, settings=settings(max_examples=examples(count), stateful_step_count=25, deadline=None))


def test_history_agrees_with_its_model_on_a_reference_backend() -> None:
    _run(lambda _: _dict_factory(), 200)


def _real(kind: str, request: pytest.FixtureRequest) -> Callable[[Path], Factory]:
    """A factory of factories: each example of the machine gets a fresh storage of ``kind``."""
    if kind == "json":
        return lambda folder: lambda keep: JSONSession(folder, keep_history=keep)
    if kind == "yaml":
        return lambda folder: lambda keep: YAMLSession(folder, keep_history=keep)
    if kind == "sqlite":
        return lambda folder: lambda keep: SQLiteSession(folder / "sessions.db", keep_history=keep)
    if kind == "redis":
        server = request.getfixturevalue("redis_server")
        return lambda _: _redis_factory(f"redis://{server.host}:{server.port}")
    if kind == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        return lambda _: _redis_factory(cluster.url)
    dsn = request.getfixturevalue("postgres_dsn")
    return lambda _: _postgres_factory(dsn)


def _redis_factory(url: str) -> Factory:
    prefix = f"history-{uuid.uuid4().hex}:"
    return lambda keep: RedisSession.from_url(url, key_prefix=prefix, keep_history=keep, timeout=60)


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    with local_redis_cluster() as running:
        yield running


def _postgres_factory(dsn: str) -> Factory:
    table = f"history_{uuid.uuid4().hex[:12]}"
    return lambda keep: PostgresSession.from_url(dsn, table=table, keep_history=keep)


@pytest.mark.parametrize(
    ("kind", "count"),
    [
        ("json", 60),
        ("sqlite", 60),
        pytest.param("yaml", 30, marks=pytest.mark.slow),
        pytest.param("redis", 40, marks=[pytest.mark.redis, pytest.mark.slow]),
        pytest.param("cluster", 20, marks=[pytest.mark.redis, pytest.mark.slow]),
        pytest.param("postgres", 30, marks=[pytest.mark.postgres, pytest.mark.slow]),
    ],
)
def test_history_agrees_with_its_model_on_every_backend(kind: str, count: int, request: pytest.FixtureRequest) -> None:
    _run(_real(kind, request), count)
