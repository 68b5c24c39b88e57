"""Redis writes sent once: no blind re-send, and a lost or late reply resolved by asking again.

redis-py re-sends a command whose reply did not come within ``socket_timeout``
(its ``Retry``). For a compare-and-set that is wrong: the server may run both
copies, and the second one, finding the first one's write, answers "changed by
another writer". So a write is sent here exactly once, on a connection of its
own. When its reply is lost after it was sent (a timeout, a dropped
connection), the same write is sent again marked as a retry: the scripts (and
the ``WATCH``/``MULTI`` twins) then answer "done" when the write's own id is
among those kept beside the value (see :mod:`._redis_ids`), so the answer says
whether the lost write landed (or that it cannot be told, when later writes may
have pushed the id out). That is asked until the server answers or another
``timeout`` runs out; then :class:`~statekit.errors.WriteOutcomeUnknownError`
says that the write may or may not have been applied.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from redis import exceptions as redis_errors
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster

from statekit.errors import BackendUnavailableError, WriteOutcomeUnknownError
from statekit.session._redis_packing import packed

T = TypeVar("T")

RETRIED = "retry"
"""The scripts' last argument (``ARGV[#ARGV]``, whatever comes before it) when a write is sent
again after its reply was lost ('' the first time)."""

_LOST = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.ClusterError,
    redis_errors.RedisClusterException,  # a cluster client finding its nodes again
    OSError,
)
"""What a lost reply (or a server not answering yet) looks like while asking again."""

_NOT_LOST = (redis_errors.AuthenticationError, redis_errors.AuthorizationError)
"""``ConnectionError`` subclasses that are answers, not silence."""


_NAMED_CONNECTIONS = getattr(
    inspect.signature(ConnectionPool.get_connection).parameters.get("command_name"), "default", None
) is inspect.Parameter.empty
"""Whether this redis-py's ``ConnectionPool.get_connection`` needs a command name (5.x does)."""


class Sending:
    """Whether a write's command has left for the server and its reply is not read yet."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = False


Attempt = Callable[[bool, Sending], Awaitable[T]]
"""One try of a write: ``retried`` says whether an earlier try's reply was lost; it marks ``Sending``."""


def flag(retried: bool) -> str:
    """The scripts' retry argument."""
    return RETRIED if retried else ""


async def write_once(guard: Callable[[], AbstractAsyncContextManager[None]], attempt: Attempt[T]) -> T:
    """Run ``attempt`` once under ``guard`` (the operation's timeout and error translation);
    when its reply was lost after it was sent, ask again until the answer says what happened.

    Raises:
        WriteOutcomeUnknownError: The server did not answer again within another
            ``guard``: the write may or may not have been applied.
        BackendUnavailableError: Nothing was sent (the server could not be reached).
    """
    sending = Sending()
    try:
        async with guard():
            try:  # _tried, inlined: the first try is every write's
                return await attempt(False, sending)
            except redis_errors.WatchError as err:
                raise_if_lost(err)
                raise
    except BackendUnavailableError:
        if not sending.pending:
            raise
    try:
        async with guard():
            return await _asked_again(attempt)
    except BackendUnavailableError as err:
        raise WriteOutcomeUnknownError(
            f"{err}; a write was sent but its reply was lost, and asking again got no answer: "
            "the write may or may not have been applied (load the session to see which)"
        ) from err


async def _asked_again(attempt: Attempt[T]) -> T:
    """Send the write again, marked as a retry, until the server answers (the guard's timeout ends it)."""
    pause = 0.05
    while True:
        try:
            return await _tried(attempt, True, Sending())
        except _NOT_LOST:
            raise
        except _LOST:
            await asyncio.sleep(pause)
            pause = min(2 * pause, 0.5)


async def _tried(attempt: Attempt[T], retried: bool, sending: Sending) -> T:
    """``attempt``, with redis-py's ``WatchError`` for a connection lost while watching told as that loss."""
    try:
        return await attempt(retried, sending)
    except redis_errors.WatchError as err:
        raise_if_lost(err)
        raise


def raise_if_lost(err: redis_errors.WatchError) -> None:
    """Raise redis-py's ``WatchError`` for a connection lost while watching as that loss (``ConnectionError``);
    return for one that says a watched key changed."""
    if isinstance(err.__context__, _LOST):
        raise redis_errors.ConnectionError(f"the connection was lost during a transaction: {err.__context__}") from err


async def send_once(client: Redis | RedisCluster, sending: Sending, name: str, *command: Any) -> Any:
    """Send ``command`` (about key ``name``) exactly once and return its reply (redis-py's retries bypassed).

    ``sending.pending`` is true from the moment the command may have reached the
    server until a reply (or an error reply) is read; the connection is made before that.
    """
    if not isinstance(client, Redis):  # a plain client's exact class: no protocol check (see _redis_cluster)
        try:
            return await _sent_to_node(client, sending, name, command)
        except redis_errors.ResponseError:
            sending.pending = False  # an answer (NOSCRIPT, CLUSTERDOWN...): the command did nothing
            raise
    pool = client.connection_pool
    connection = await connection_of(pool, command[0])
    try:
        await connection.check_health()  # a PING first, if the client asks for them
        sending.pending = True
        await connection.send_packed_command(packed(connection, command), check_health=False)
        reply = await connection.read_response()
        sending.pending = False
        return reply
    except redis_errors.ResponseError:
        sending.pending = False  # an answer (NOSCRIPT, CLUSTERDOWN...): the command did nothing; the connection is sound
        raise
    except BaseException:
        await connection.disconnect(nowait=True)  # its reply may still come: never reuse it
        raise
    finally:
        await pool.release(connection)


async def _sent_to_node(client: RedisCluster, sending: Sending, name: str, command: tuple[Any, ...]) -> Any:
    node = client.get_node_from_key(name)
    if node is None:
        raise redis_errors.SlotNotCoveredError(f"no node of the cluster serves the slot of {name!r}")
    await _connected(node)
    sending.pending = True
    reply = await client.execute_command(*command, target_nodes=node)  # given a target, the client never re-sends
    sending.pending = False
    return reply


def connection_of(pool: ConnectionPool, command: str) -> Awaitable[Any]:
    """A connected connection of ``pool`` (redis-py retries connecting: nothing is sent yet), for ``command``
    (redis-py 5.x needs its name), to await (no coroutine of its own); the caller releases it."""
    named = (command,) if _NAMED_CONNECTIONS else ()
    return pool.get_connection(*named)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped


async def _connected(node: ClusterNode) -> None:
    """Connect one of the node's connections, so that failing to connect is told apart from a lost reply.

    Older redis-py (6.0, say) has no ``ClusterNode.release``: there a failed connect is
    resolved like a lost reply (by asking again: as true an answer, only slower).
    """
    release: Callable[[Any], None] | None = getattr(node, "release", None)
    if release is None:
        return
    connection = node.acquire_connection()
    try:
        await connection.connect()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    finally:
        release(connection)


async def executed(pipe: Pipeline | ClusterPipeline, sending: Sending) -> bool:
    """``EXEC`` a ``WATCH``/``MULTI`` transaction: ``True`` when applied, ``False`` when a watched key changed.

    redis-py reports a connection lost during ``EXEC`` as ``WatchError`` too
    (then the transaction may have been applied): that one is raised on, with
    ``sending.pending`` still true, and :func:`write_once` asks again.
    """
    sending.pending = True
    try:
        await pipe.execute()
    except redis_errors.WatchError as err:
        if isinstance(err.__context__, _LOST):
            raise
        sending.pending = False
        return False
    sending.pending = False
    return True
