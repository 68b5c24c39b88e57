"""One conditional Redis write (a compare-and-set, an append, a set over a delta base): its script's arguments and its attempts, in one object."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from statekit.session._redis_fence import carried
from statekit.session._redis_ids import Keys, id_args, new_id
from statekit.session._redis_once import Sending
from statekit.session._redis_scripts import Script, Scripting
from statekit.session._redis_watch import Twin


class ConditionalWrite:
    """A write with a write id (see :mod:`._redis_once`): ``script`` on ``keys`` with ``args``, the lease token
    carried and the id; without Lua, ``twin(client, keys, args, (key_ttl, keep_ttl), (id, retried, sending, token))``.

    One object held while the write waits for its reply, where closures would hold a cell per name.
    """

    __slots__ = ("args", "errors", "expiry", "keys", "retried", "script", "scripting", "sending", "token", "twin", "write_id")

    def __init__(
        self,
        scripting: Scripting,
        call: tuple[Script, Keys, tuple[Any, ...], Twin],
        token: int | None,
        expiry: tuple[int | None, bool],
        errors: Callable[[], AbstractAsyncContextManager[None]],
    ) -> None:
        self.scripting = scripting
        self.script, self.keys, self.args, self.twin = call
        self.token, self.expiry, self.errors = token, expiry, errors
        self.write_id = new_id()
        self.retried = False  # the attempt running (attempts run one after the other), for watching()
        self.sending: Sending | None = None

    def attempt(self, retried: bool, sending: Sending) -> Awaitable[Any]:
        """Send the write once (``retried``: again, after an earlier try's reply was lost); its answer (a plain
        method handing back the script's coroutine: no coroutine of its own while the write waits)."""
        self.retried, self.sending = retried, sending
        args = (*self.args, carried(self.token), *id_args(self.write_id, retried))
        return self.scripting.run(self.script, sending, self.keys, args, self.watching)

    def watching(self) -> Awaitable[Any]:
        """The attempt running, on a server without Lua: the ``WATCH``/``MULTI`` twin."""
        assert self.sending is not None, "called by the attempt's Scripting.run"
        attempt = (self.write_id, self.retried, self.sending, self.token)
        return self.twin(self.scripting.client, self.keys, self.args, self.expiry, attempt)
