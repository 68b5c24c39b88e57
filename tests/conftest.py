"""Shared fixtures: a real redis-server and PostgreSQL for the run, and every session backend; Hypothesis profiles.

The Redis server is started once per test run on a free loopback port with
persistence off, and stopped at the end. A missing ``redis-server`` fails the
Redis tests (``apt-get install redis-server``): they are never skipped. The
PostgreSQL server (``postgres_server``, ``postgres_dsn``) is a throw-away
cluster made with ``initdb``, started by the first test that asks for it; a
missing ``postgresql`` package fails those tests the same way.

Once every test is collected, the objects alive then (modules, test functions,
strategies, AgentScope) are moved out of the garbage collector's reach with
:func:`gc.freeze`: they live to the end of the run anyway, and otherwise every
full collection of the run walks them again. Objects a test makes are
collected as ever. What outlives a test (Hypothesis's records of the examples
it tried, the classes a module's properties made once) still makes each full
collection walk a few hundred thousand objects, so full collections run a tenth
as often (:data:`FULL_COLLECTIONS_EVERY`); the young generations, where a
test's garbage goes first, are collected as ever.

Where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``), the
interpreters tests start read the bytecode of what the runner imported from a
folder of the run's own, removed at the end (:mod:`child_bytecode`), instead of
compiling statekit from its source each time.

Hypothesis runs the ``dev`` profile unless ``HYPOTHESIS_PROFILE`` names
another: ``dev`` tries a tenth of each property's examples (at least 10,
:func:`strategies.examples`), for a quick inner loop; ``ci`` (set by
``.ci/run``) tries every one. Neither has a deadline: a loaded machine must
not fail a property.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from statekit.session import JSONSession, YAMLSession
from statekit.session.redis import RedisSession
from statekit.session.sqlite import SQLiteSession
from statekit.testing import PostgresServer, RedisServer, SessionFactory, local_postgres_server, local_redis_server
from child_bytecode import PREFIX, share_bytecode, stop_sharing_bytecode
from strategies import FULL_EXAMPLES, forget_made

settings.register_profile("ci", max_examples=FULL_EXAMPLES, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=FULL_EXAMPLES // 10, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


FULL_COLLECTIONS_EVERY = 100
"""Collections of the middle generation between two full ones (Python's default: 10)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection made, collect in full less often, and share the bytecode with the interpreters tests start (module docstring)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*gc.get_threshold()[:2], FULL_COLLECTIONS_EVERY)
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and PREFIX not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="statekit-tests-bytecode-"))
        session.config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        session.config.add_cleanup(stop_sharing_bytecode)
        share_bytecode(folder)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After a test module's last test, drop the classes its properties made once (:func:`strategies.made_once`)."""
    if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None):
        forget_made()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of our own for the whole run, on a free loopback port."""
    with contextlib.ExitStack() as stack:
        try:
            address = stack.enter_context(local_redis_server())
        except RuntimeError as err:
            pytest.fail(str(err))
        yield address


@pytest.fixture(scope="module")
def scriptless_server() -> Iterator[RedisServer]:
    """A real redis-server whose EVAL and EVALSHA are renamed away (as some proxies do): the scripts' twins run."""
    options = ["--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""]
    with local_redis_server(options=options) as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throw-away PostgreSQL cluster of our own for the whole run (initdb + pg_ctl on a free loopback port)."""
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(local_postgres_server())
        except RuntimeError as err:
            pytest.fail(str(err))
        yield server


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """The ``postgresql://`` URL of the run's PostgreSQL server (password included)."""
    return postgres_server.dsn


@pytest.fixture(params=["json", "yaml", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> SessionFactory:
    """A factory of sessions of one backend, all sharing one fresh storage.

    A factory rather than a session, because a Redis client belongs to the
    event loop it first connects in.
    """
    if request.param == "json":
        return lambda: JSONSession(tmp_path)
    if request.param == "yaml":
        return lambda: YAMLSession(tmp_path)
    if request.param == "sqlite":
        return lambda: SQLiteSession(tmp_path / "sessions.db")
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"test-{uuid.uuid4().hex}:"
    return lambda: RedisSession(server.host, server.port, key_prefix=prefix)
