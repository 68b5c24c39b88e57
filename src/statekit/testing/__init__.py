"""The session backend contract: one suite that every backend must pass.

statekit runs it against ``JSONSession``, ``YAMLSession``, ``RedisSession`` and ``PostgresSession``;
run it against your own :class:`~statekit.session.SessionBase` subclass too.

With pytest, subclass :class:`SessionContract` and say how to make a session
(one test per check is collected)::

    from statekit.testing import SessionContract

    class TestMyBackend(SessionContract):
        def make_session(self):
            return MyBackend(dsn="...")

Without pytest, ``asyncio.run(check_backend(make_session))`` runs every check
and raises ``AssertionError`` at the first broken promise.

``make_session`` is called inside the event loop of each check (clients that
bind to a loop are safe) and every session it returns must see the same
storage. Each check uses fresh random user ids, so a shared, non-empty storage
is fine.
"""

from statekit.testing._contract import CHECKS, SessionContract, check_backend, check_blocking_twins
from statekit.testing._models import HOSTILE_IDS as HOSTILE_IDS  # the suite's data: importable, not in __all__ (as before)
from statekit.testing._models import TRICKY_TEXTS as TRICKY_TEXTS
from statekit.testing._models import Chat, Counter, Journal, Message, SessionFactory
from statekit.testing._postgres import PostgresServer, local_postgres_server
from statekit.testing._servers import RedisCluster, RedisServer, free_port, local_redis_cluster, local_redis_server

__all__ = [
    "CHECKS",
    "Chat",
    "Counter",
    "Journal",
    "Message",
    "PostgresServer",
    "RedisCluster",
    "RedisServer",
    "SessionContract",
    "SessionFactory",
    "check_backend",
    "check_blocking_twins",
    "free_port",
    "local_postgres_server",
    "local_redis_cluster",
    "local_redis_server",
]
