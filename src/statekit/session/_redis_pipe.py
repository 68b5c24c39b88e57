"""The commands many tasks send to one plain Redis client in the same turn of the event loop, sent in one round trip.

Auto-pipelining, as ioredis and Lettuce do it. A command with nothing else on
its way goes at once, on a connection of its own (a lone task waits for
nothing). One sent while others are on their way is queued, and once the
tasks running in this turn of the loop have queued theirs, one task takes a
connection of the client's pool, writes them all in one go and reads the
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
import math
from types import TracebackType
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from redis import exceptions as redis_errors
from redis.asyncio import ConnectionPool, Redis

from statekit.session._redis_once import Sending, connection_of
from statekit.session._redis_packing import packed

T = TypeVar("T")


class _Queued:
    """Commands of one caller, and where their replies go."""

    __slots__ = ("commands", "future", "sending")

    def __init__(self, commands: tuple[tuple[Any, ...], ...], future: asyncio.Future[Any], sending: Sending | None) -> None:
        self.commands, self.future, self.sending = commands, future, sending


class Pipe:
    """One plain client's queue (see the module): :meth:`send` hands commands over and waits for their replies."""

    __slots__ = ("alone_now", "next", "pool", "runs")

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self.alone_now = 0  # commands sent on their own (see alone) and not answered yet
        self.next: _RoundTrip | None = None  # the round trip this turn's commands join (its task not started yet)
        self.runs: set[asyncio.Task[None]] = set()  # the round trips under way (held: the loop keeps weak ones)

    @staticmethod
    def of(client: Any) -> Pipe | None:
        """A pipe for ``client``, or ``None`` when its commands go their own way: a cluster, a subclass of
        ``Redis`` (its own ``execute_command``), a client holding one connection."""
        if type(client) is not Redis or client.connection is not None:
            return None
        return Pipe(client.connection_pool)

    def idle(self) -> bool:
        """Whether no other command is on its way (no round trip under way, none sent alone): then a command
        goes at once, on a connection of its own, through :meth:`alone` (a lone task waits for no turn of the
        loop); the commands other tasks send meanwhile are queued by :meth:`send`, and go together."""
        return not self.runs and not self.alone_now

    async def alone(self, sent: Awaitable[T]) -> T:
        """Await ``sent``, a command sent on a connection of its own, counted as on its way."""
        self.alone_now += 1
        try:
            return await sent
        finally:
            self.alone_now -= 1

    def send(self, sending: Sending | None, commands: Sequence[tuple[Any, ...]]) -> asyncio.Future[Any]:
        """Queue ``commands`` for the next round trip (a write's mark ``sending``; a read passes ``None``); the
        future of the first one's reply (an error reply: its exception), the others' read and dropped."""
        trip = self.next
        if trip is None:  # its task starts after the tasks running in this turn of the loop have queued theirs
            trip = self.next = _RoundTrip(self)
        return trip.join(tuple(commands), sending)


class Replies:
    """The deadline of a batch's replies: ``socket_timeout`` for each, as redis-py gives each read its own; its
    expiry is redis-py's ``TimeoutError``. One timer for the batch: when it fires after a reply came, it is set
    again from that reply (a timer per read, or moved at each reply, costs a batch of small commands 4-7%)."""

    __slots__ = ("_handle", "_last", "_loop", "_seconds", "_timeout")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds or None
        self._timeout = asyncio.timeout(None)
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()  # when the last reply came (or the batch's wait began)
        self._handle: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> Replies:
        await self._timeout.__aenter__()
        if self._seconds is not None:
            self._handle = self._loop.call_at(self._last + self._seconds, self._check)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        if self._handle is not None:
            self._handle.cancel()
        try:
            await self._timeout.__aexit__(kind, err, tb)
        except TimeoutError:
            raise redis_errors.TimeoutError("Timeout reading from the connection") from None

    def read(self) -> None:
        """A reply came: the next one has ``socket_timeout`` from now."""
        self._last = self._loop.time()

    def _check(self) -> None:
        assert self._seconds is not None
        due = self._last + self._seconds
        if self._loop.time() >= due:
            self._handle = None
            self._timeout.reschedule(self._loop.time())  # expired: asyncio.timeout's own cancel, told on leaving
        else:
            self._handle = self._loop.call_at(due, self._check)


def _exhausted(err: redis_errors.ConnectionError) -> bool:
    """Whether ``err`` says that the pool's ``max_connections`` are all in use (redis-py 5 raises its base class)."""
    return type(err).__name__ == "MaxConnectionsError" or str(err) == "Too many connections"


class _RoundTrip:
    """One write of a batch's commands on one connection, its replies handed out in order; cancelled as soon
    as every caller gave up (its connection dropped and back in the pool, for the operations that come next)."""

    __slots__ = ("batch", "finished", "pipe", "task", "waiting")

    def __init__(self, pipe: Pipe) -> None:
        self.pipe, self.batch, self.finished = pipe, list[_Queued](), False
        self.waiting = 0  # callers whose futures are not done yet
        self.task = asyncio.get_running_loop().create_task(self._run())
        pipe.runs.add(self.task)
        self.task.add_done_callback(pipe.runs.discard)

    def join(self, commands: tuple[tuple[Any, ...], ...], sending: Sending | None) -> asyncio.Future[Any]:
        """Queue ``commands``; the future of the first one's reply (an error reply: its exception)."""
        future: asyncio.Future[Any] = self.task.get_loop().create_future()
        future.add_done_callback(self._given_up)
        self.batch.append(_Queued(commands, future, sending))
        self.waiting += 1
        return future

    def _given_up(self, _: object) -> None:
        """A caller's future is done: when every caller's is and the replies are not all handed out, stop."""
        self.waiting -= 1
        if not self.waiting and not self.finished:
            if self.pipe.next is self:
                self.pipe.next = None  # not started yet: the commands that come next go in a new one
            self.task.cancel()

    async def _run(self) -> None:
        if self.pipe.next is self:
            self.pipe.next = None  # the commands queued from now on go in the next round trip
        if not self.waiting:
            return  # every caller gave up before it started
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
            async with Replies(connection.socket_timeout) as deadline:
                for queued in batch:
                    replies: list[Any] = []
                    for _ in queued.commands:
                        try:
                            replies.append(await connection.read_response(timeout=math.inf))
                        except redis_errors.ResponseError as err:
                            replies.append(err)  # an answer (NOSCRIPT...): the connection is sound
                        deadline.read()
                    done += 1
                    if done == len(batch):
                        self.finished = True
                    if queued.sending is not None:
                        queued.sending.pending = False
                    if not queued.future.done():
                        if isinstance(replies[0], redis_errors.ResponseError):
                            queued.future.set_exception(replies[0])
                        else:
                            queued.future.set_result(replies[0])
        except BaseException as err:
            self.finished = True
            await connection.disconnect(nowait=True)  # replies may still come: never reuse it
            _fail(batch[done:], err if isinstance(err, Exception) else redis_errors.ConnectionError(f"cancelled: {err!r}"))
            if not isinstance(err, Exception):
                raise
        finally:
            await self.pipe.pool.release(connection)

    async def _connection(self) -> Any:
        """A connected connection of the pool; with ``max_connections`` all in use (held by round trips ending,
        or by commands sent on their own), the next one released, while someone waits."""
        pause = 0.001
        while True:
            try:
                return await connection_of(self.pipe.pool, self.batch[0].commands[0][0])
            except redis_errors.ConnectionError as err:
                if not _exhausted(err):
                    raise
            await asyncio.sleep(pause)
            pause = min(2 * pause, 0.02)


def _fail(batch: list[_Queued], err: Exception) -> None:
    """Hand ``err`` to those still waiting (their ``Sending`` left as it is: pending if the command was sent)."""
    for queued in batch:
        if not queued.future.done():
            queued.future.set_exception(err)
            queued.future.exception()  # retrieved: a caller that gave up meanwhile leaves no warning behind
