"""The Lua scripts of RedisSession's writes, one object per script, run by SHA-1 unless the server runs no Lua."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from statekit.session.document import HEAD_BYTES
from statekit.session._redis_fence import FENCE
from statekit.session._redis_ids import ALIGN, DELETE, MINE
from statekit.session._redis_once import Sending, send_once
from statekit.session._redis_pipe import Pipe


class Script:
    """A Lua script and its SHA-1 (as redis-py's ``Script``), run by :meth:`Scripting.run`."""

    __slots__ = ("sha", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


SAVE = """
local function save(value, ttl)
  if ttl == '' then redis.call('SET', KEYS[1], value)
  elseif ttl == 'keep' then redis.call('SET', KEYS[1], value, 'KEEPTTL')
  else redis.call('SET', KEYS[1], value, 'EX', ttl) end
end
"""
"""Prepended to the scripts that set the value: ``save(value, ttl)`` sets KEYS[1], ``ttl`` seconds, '' or 'keep'."""

_HEX = "[0-9a-f]"
REVISION = (
    """
local function revision_of(value)
  local size = #value
  if size > 1 and string.byte(value, size) == 10 then
    local at = size - 1
    while at > 0 and string.byte(value, at) ~= 10 do at = at - 1 end
    if at > 0 then
      local line = string.sub(value, at + 1)
      if string.find(line, '^%[%[[1-9]%d*,"CRC","PARENT",') then return redis.sha1hex(line) end
    end
  end
  return redis.sha1hex(value)
end
""".replace("CRC", _HEX * 8).replace("PARENT", _HEX * 40)
)
"""Prepended to the scripts that compare revisions: ``revision_of(value)`` as ``_revisions.revision_of`` computes it
(the SHA-1 of the value, or of its last delta line when that line names its parent revision, see ``_proofs``)."""

COMPARE_AND_SET = Script(MINE + FENCE + SAVE + REVISION + """
local refused = fence(KEYS[3], ARGV[#ARGV - 3])
if refused then return refused end
local current = redis.call('GET', KEYS[1])
local revision = ''
if current then revision = revision_of(current) end
if revision ~= ARGV[2] then return 0 end
save(ARGV[1], ARGV[3])
stamp()
return 1
""")
"""Write ARGV[1] if the stored value's SHA-1 is ARGV[2] ('' = no value); ARGV[3]: TTL, '' or 'keep' (the key's own);
ARGV[4]: the lease token the write carries, checked against KEYS[3] first (see _redis_fence); ARGV[5]: the write's
id, pushed onto KEYS[2]; ARGV[6]: how many ids it keeps; ARGV[7]: 'retry' after a lost reply (see _redis_once,
_redis_ids). Answers 1 (written), 0 (changed by another writer), 2 (unknown after a retry), or the fence's refusal."""

# Deltas of append-only lists follow the document in the same key (one line
# each, see _appends.py). Within one document token the value only grows, so
# the token (in the document's first bytes) and the length say what is stored.
IF_BASE = Script(MINE + FENCE + SAVE + f"""
local refused = fence(KEYS[3], ARGV[#ARGV - 3])
if refused then return refused end
local head = redis.call('GETRANGE', KEYS[1], 0, {HEAD_BYTES - 1})
if not string.find(head, ARGV[1], 1, true) then return 0 end
if redis.call('STRLEN', KEYS[1]) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[4] == 'set' then
  save(ARGV[3], ARGV[5])
  stamp()
  return 1
end
if ARGV[3] ~= '' then redis.call('APPEND', KEYS[1], ARGV[3]) end
if ARGV[6] ~= '' then redis.call('SETRANGE', KEYS[1], tonumber(ARGV[6]), ARGV[7]) end
if ARGV[5] ~= '' and ARGV[5] ~= 'keep' then redis.call('EXPIRE', KEYS[1], ARGV[5]) end
stamp()
return 1
""")
"""Append ARGV[3] (or set it, ARGV[4] 'set') if the stored value is still the one whose head holds ARGV[1] (the
document's token) and whose length is ARGV[2]; ARGV[5]: TTL, '' or 'keep' (the key's own); ARGV[6], ARGV[7]: when
not '', write these bytes at this offset (the header's count); then the lease token and the write id, as in
COMPARE_AND_SET."""

DELETE_SCRIPT = Script(MINE + FENCE + """
local refused = fence(KEYS[3], ARGV[#ARGV - 3])
if refused then return refused end
""" + DELETE)
""":data:`DELETE` of :mod:`._redis_ids` after the lease fence (KEYS[3]; ARGV[2]: the token carried),
as a :class:`Script` (KEYS[4], KEYS[5]: the session's kept revisions and their records, deleted with it)."""

SET_SCRIPT = Script(FENCE + SAVE + ALIGN + """
local refused = fence(KEYS[2], ARGV[3])
if refused then return refused end
save(ARGV[1], ARGV[2])
align(KEYS[1], KEYS[3], KEYS[4])
return 1
""")
"""A save that checks no revision: write ARGV[1] (ARGV[2]: TTL, '' or 'keep') unless the lease fence (KEYS[2], ARGV[3]:
the token carried) refuses it; the session's kept revisions (KEYS[3]) and their records (KEYS[4]) then expire
with it. Answers 1 or the refusal. No write id: sent again, it writes the same bytes."""


class Scripting:
    """Whether a server runs Lua, learnt at its first refusal: the scripts run until then, their
    ``WATCH``/``MULTI`` twins after (fakeredis without ``lupa``, some proxies, an ACL that refuses ``EVAL``)."""

    __slots__ = ("client", "lua", "pipe")

    def __init__(self, client: Redis | RedisCluster, pipe: Pipe | None = None) -> None:
        self.client = client
        self.pipe = pipe  # the client's commands sent together (see _redis_pipe), or each on its own
        self.lua = True  # until the server says it runs no scripts

    async def run(
        self,
        script: Script,
        sending: Sending,
        keys: tuple[str, ...],
        args: tuple[Any, ...],
        twin: Callable[[], Awaitable[Any]],
    ) -> Any:
        """``script``'s answer on ``keys`` (all in one slot: the first one's node) with ``args``, or ``twin()``'s on
        a server that runs no Lua. Sent once (see :func:`send_once`), through the client's pipe when it has one
        (see :mod:`._redis_pipe`): ``EVALSHA``, then ``EVAL`` on a node that lacks it, which caches it on that
        node only (``SCRIPT LOAD`` needs all of them)."""
        if self.lua:
            try:
                try:
                    return await self._sent(sending, keys[0], ("EVALSHA", script.sha, len(keys), *keys, *args))
                except redis_errors.NoScriptError:
                    return await self._sent(sending, keys[0], ("EVAL", script.text, len(keys), *keys, *args))
            except redis_errors.ResponseError as err:
                if not refuses_scripts(err):
                    raise
                self.lua = False
        return await twin()

    def _sent(self, sending: Sending, name: str, command: tuple[Any, ...]) -> Awaitable[Any]:
        """``command`` sent once, with the other tasks' (see :mod:`._redis_pipe`) or on a connection of its own."""
        pipe = self.pipe
        if pipe is None:
            return send_once(self.client, sending, name, *command)
        if pipe.idle():
            return pipe.alone(send_once(self.client, sending, name, *command))
        return pipe.send(sending, (command,))


def refuses_scripts(err: Exception) -> bool:
    """Whether the server runs no scripts: it does not know the command, or an ACL refuses it (``NOPERM``)."""
    message = str(err).lower()
    return message.startswith("unknown command") or (
        isinstance(err, redis_errors.NoPermissionError) and "'eval" in message
    )
