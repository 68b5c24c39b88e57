"""A TCP proxy to a real redis-server that loses one reply, for the Redis tests of writes sent again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from statekit.testing import RedisServer


class LosingProxy:
    """A TCP proxy to a real redis-server that loses the reply to one command.

    :meth:`lose` arms it: the next chunk a client sends that holds ``marker`` waits
    for ``first()`` (another writer's work, done meanwhile), goes to the server,
    and the server's reply never comes back: the proxy drops it (after ``then()``,
    more work done once the command ran) and cuts that connection, as a network
    would. :meth:`hold` delays a command instead, past its connection's loss.
    Every other byte passes through.
    """

    def __init__(self, server: RedisServer) -> None:
        self._server = server
        self._trap: tuple[bytes, Callable[[], Any]] | None = None
        self._then: Callable[[], Any] | None = None
        self._at_least = 1
        self._holding: bytes | None = None
        self._landing = b""
        self._held: tuple[bytes, bytes] | None = None
        self.lost = 0
        self.lost_commands = 0  # how many commands the chunk whose replies were lost held (marker counted)
        self._listener: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> LosingProxy:
        self._listener = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._listener.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._listener is not None
        self._listener.close()

    def lose(
        self, marker: bytes, first: Callable[[], Any] | None = None, then: Callable[[], Any] | None = None, *, at_least: int = 1
    ) -> None:
        """Lose the replies of the next chunk holding ``marker`` (``at_least`` times: a round trip of several commands)."""
        self._trap = (marker, first or _nothing)
        self._then, self._at_least = then, at_least

    def hold(self, marker: bytes, landing: bytes) -> None:
        """Hold the next chunk holding ``marker`` and cut its connection at once (its reply is lost);
        the held command reaches the server late, as a command stuck in a network would: just before
        the next chunk holding ``landing`` (``marker``: the same command, sent again)."""
        self._holding, self._landing = marker, landing

    async def _land(self, chunk: bytes) -> None:
        """Run a held chunk on a connection of its own, its reply read and dropped."""
        reader, writer = await asyncio.open_connection(self._server.host, self._server.port)
        writer.write(chunk + b"PING\r\n")
        replies = b""
        while not replies.endswith(b"+PONG\r\n"):
            replies += await reader.read(65536)
        writer.close()
        self.lost += 1

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection(self._server.host, self._server.port)
        losing = asyncio.Event()

        async def upstream() -> None:
            while chunk := await client_in.read(65536):
                if self._holding is not None and self._holding in chunk:
                    self._held, self._holding = (self._landing, chunk), None
                    client_out.transport.abort()
                    server_out.transport.abort()
                    return
                if self._held is not None and self._held[0] in chunk:
                    held, self._held = self._held[1], None
                    await self._land(held)
                if self._trap is not None and chunk.count(self._trap[0]) >= self._at_least:
                    (marker, first), self._trap = self._trap, None
                    self.lost_commands = chunk.count(marker)
                    await first()
                    losing.set()
                server_out.write(chunk)
                await server_out.drain()
            server_out.close()

        async def downstream() -> None:
            while chunk := await server_in.read(65536):
                if losing.is_set():  # the trapped command's reply: lost, and the connection with it
                    self.lost += 1
                    then, self._then = self._then, None
                    if then is not None:
                        await then()
                    break
                client_out.write(chunk)
                await client_out.drain()
            client_out.transport.abort()
            server_out.transport.abort()

        await asyncio.gather(upstream(), downstream(), return_exceptions=True)


async def _nothing() -> None:
    pass
