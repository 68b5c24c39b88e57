"""The commands many tasks send to one plain Redis client in the same turn of the event loop, sent in one round trip.

Auto-pipelining, as ioredis and Lettuce do it: a command is queued, and once
the tasks running in this turn of the loop have queued theirs, one task takes
a connection of the client's pool, writes them all in one go and reads the
replies in order, each handed to the task waiting for it. With 64 tasks
saving and loading, that is one connection wait, one write and one wake-up
for dozens of commands instead of one each (redis-py's per-command layers
cost more than a small command's work).

A write keeps its exactly-once promise (see :mod:`._redis_once`): its
``Sending`` turns pending when its bytes go to the connection and back when
its reply is read; a caller that gave up before its command was sent (its
deadline passed) is skipped, so a command is never sent for nobody; one that
gave up after is told as a lost reply, and asks again. When the connection
fails, the commands whose replies were not read get the error (the
connection is dropped, as redis-py does, never reused with replies unread).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import ConnectionPool, Redis

from statekit.session._redis_once import Sending, connection_of
from statekit.session._redis_packing import packed


class _Queued:
    """Commands of one caller, and where their replies go."""

    __slots__ = ("commands", "future", "sending")

    def __init__(self, commands: tuple[tuple[Any, ...], ...], future: asyncio.Future[list[Any]], sending: Sending | None) -> None:
        self.commands, self.future, self.sending = commands, future, sending


class Pipe:
    """One plain client's queue (see the module): :meth:`send` hands commands over and waits for their replies."""

    __slots__ = ("_pool", "_queue", "_runs")

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._queue: list[_Queued] = []  # this turn's commands (a flush is scheduled while it holds any)
        self._runs: set[asyncio.Task[None]] = set()  # the round trips under way (held: the loop keeps weak ones)

    @staticmethod
    def of(client: Any) -> Pipe | None:
        """A pipe for ``client``, or ``None`` when its commands go their own way: a cluster, a subclass of
        ``Redis`` (its own ``execute_command``), a client holding one connection."""
        if type(client) is not Redis or client.connection is not None:
            return None
        return Pipe(client.connection_pool)

    def send(self, sending: Sending | None, *commands: tuple[Any, ...]) -> asyncio.Future[list[Any]]:
        """Queue ``commands`` (a write's marks ``sending``, a read passes ``None``); their replies, in order,
        an error reply as the exception object (a lost connection: raised)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        if not self._queue:
            loop.call_soon(self._flush)
        self._queue.append(_Queued(commands, future, sending))
        return future

    async def first(self, sending: Sending | None, *commands: tuple[Any, ...]) -> Any:
        """The first command's reply (raised when it is an error); the others' are read and dropped."""
        reply = (await self.send(sending, *commands))[0]
        if isinstance(reply, redis_errors.ResponseError):
            raise reply
        return reply

    def _flush(self) -> None:
        """The turn's commands go out together, in a task of their own."""
        batch, self._queue = [queued for queued in self._queue if not queued.future.done()], []
        if batch:
            trip = _RoundTrip(self._pool, batch)
            self._runs.add(trip.task)
            trip.task.add_done_callback(self._runs.discard)


_EXHAUSTED = getattr(redis_errors, "MaxConnectionsError", redis_errors.ConnectionError)
"""What a pool with ``max_connections`` all in use raises (redis-py 5 raises its base class, with these words)."""


class _RoundTrip:
    """One write of a batch's commands on one connection, its replies handed out in order; cancelled as soon
    as every caller gave up (its connection dropped and back in the pool, for the operations that come next)."""

    __slots__ = ("batch", "finished", "pool", "task")

    def __init__(self, pool: ConnectionPool, batch: list[_Queued]) -> None:
        self.pool, self.batch, self.finished = pool, batch, False
        self.task = asyncio.get_running_loop().create_task(self._run())
        for queued in batch:
            queued.future.add_done_callback(self._given_up)

    def _given_up(self, _: object) -> None:
        if not self.finished and all(queued.future.done() for queued in self.batch):
            self.task.cancel()

    async def _run(self) -> None:
        try:
            connection = await self._connection()
        except Exception as err:  # nothing was sent
            _fail(self.batch, err)
            return
        batch, done = self.batch, 0
        try:
            await connection.check_health()  # a PING first, if the client asks for them
            batch = [queued for queued in batch if not queued.future.done()]  # who gave up meanwhile is not sent for
            message: list[bytes] = []
            for queued in batch:
                for command in queued.commands:
                    message += packed(connection, command)
                if queued.sending is not None:
                    queued.sending.pending = True
            if message:
                await connection.send_packed_command(message, check_health=False)
            for queued in batch:
                replies: list[Any] = []
                for _ in queued.commands:
                    try:
                        replies.append(await connection.read_response())
                    except redis_errors.ResponseError as err:
                        replies.append(err)  # an answer (NOSCRIPT...): the connection is sound
                done += 1
                if done == len(batch):
                    self.finished = True
                if queued.sending is not None:
                    queued.sending.pending = False
                if not queued.future.done():
                    queued.future.set_result(replies)
        except BaseException as err:
            self.finished = True
            await connection.disconnect(nowait=True)  # replies may still come: never reuse it
            _fail(batch[done:], err if isinstance(err, Exception) else redis_errors.ConnectionError(f"cancelled: {err!r}"))
            if not isinstance(err, Exception):
                raise
        finally:
            await self.pool.release(connection)

    async def _connection(self) -> Any:
        """A connected connection of the pool; with ``max_connections`` all in use (held by round trips ending,
        or by commands sent on their own), the next one released, while someone waits."""
        pause = 0.001
        while True:
            try:
                return await connection_of(self.pool, self.batch[0].commands[0][0])
            except _EXHAUSTED as err:
                if not isinstance(err, getattr(redis_errors, "MaxConnectionsError", ())) and "Too many" not in str(err):
                    raise
            await asyncio.sleep(pause)
            pause = min(2 * pause, 0.02)


def _fail(batch: list[_Queued], err: Exception) -> None:
    """Hand ``err`` to those still waiting (their ``Sending`` left as it is: pending if the command was sent)."""
    for queued in batch:
        if not queued.future.done():
            queued.future.set_exception(err)
            queued.future.exception()  # retrieved: a caller that gave up meanwhile leaves no warning behind
