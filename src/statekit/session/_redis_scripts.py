"""The Lua scripts of RedisSession's writes, one object per script, run by SHA-1 unless the server runs no Lua."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from statekit.session.document import HEAD_BYTES
from statekit.session._redis_ids import DELETE, MINE
from statekit.session._redis_once import Sending, send_once


class Script:
    """A Lua script and its SHA-1 (as redis-py's ``Script``), sent with :func:`send_once`: ``EVALSHA``,
    then ``EVAL`` on a node that lacks it, which caches it on that node only (``SCRIPT LOAD`` needs all of them)."""

    __slots__ = ("sha", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()

    async def run(self, client: Redis | RedisCluster, sending: Sending, keys: tuple[str, str], *args: Any) -> int:
        """Run on ``keys`` (a value's and its companion's, :func:`id_key`); its answer (``DONE``...)."""
        name = keys[0]
        try:
            return int(await send_once(client, sending, name, "EVALSHA", self.sha, 2, *keys, *args))
        except redis_errors.NoScriptError:
            return int(await send_once(client, sending, name, "EVAL", self.text, 2, *keys, *args))


COMPARE_AND_SET = Script(MINE + """
local current = redis.call('GET', KEYS[1])
local revision = ''
if current then revision = redis.sha1hex(current) end
if revision ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
elseif ARGV[3] == 'keep' then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
else
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
end
stamp()
return 1
""")
"""Write ARGV[1] if the stored value's SHA-1 is ARGV[2] ('' = no value); ARGV[3]: TTL, '' or 'keep' (the key's own);
ARGV[4]: the write's id, pushed onto KEYS[2]; ARGV[5]: how many ids it keeps; ARGV[6]: 'retry' after a lost
reply (see _redis_once, _redis_ids). Answers 1 (written), 0 (changed by another writer), 2 (unknown after a retry)."""

# Deltas of append-only lists follow the document in the same key (one line
# each, see _appends.py). Within one document token the value only grows, so
# the token (in the document's first bytes) and the length say what is stored.
IF_BASE = Script(MINE + f"""
local head = redis.call('GETRANGE', KEYS[1], 0, {HEAD_BYTES - 1})
if not string.find(head, ARGV[1], 1, true) then return 0 end
if redis.call('STRLEN', KEYS[1]) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[4] == 'set' then
  if ARGV[5] == '' then redis.call('SET', KEYS[1], ARGV[3])
  elseif ARGV[5] == 'keep' then redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
  else redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[5]) end
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
not '', write these bytes at this offset (the header's count); then the write id, as in COMPARE_AND_SET."""

DELETE_SCRIPT = Script(DELETE)
""":data:`DELETE` of :mod:`._redis_ids`, as a :class:`Script`."""


class Scripting:
    """Whether a server runs Lua, learnt at its first refusal: the scripts run until then, their
    ``WATCH``/``MULTI`` twins after (fakeredis without ``lupa``, some proxies, an ACL that refuses ``EVAL``)."""

    __slots__ = ("client", "lua")

    def __init__(self, client: Redis | RedisCluster) -> None:
        self.client = client
        self.lua = True  # until the server says it runs no scripts

    async def run(
        self, script: Script, sending: Sending, keys: tuple[str, str], args: tuple[Any, ...], twin: Callable[[], Awaitable[int]]
    ) -> int:
        """``script``'s answer on ``keys`` with ``args``, or ``twin()``'s on a server that runs no Lua."""
        if self.lua:
            try:
                return await script.run(self.client, sending, keys, *args)
            except redis_errors.ResponseError as err:
                if not refuses_scripts(err):
                    raise
                self.lua = False
        return await twin()


def refuses_scripts(err: Exception) -> bool:
    """Whether the server runs no scripts: it does not know the command, or an ACL refuses it (``NOPERM``)."""
    message = str(err).lower()
    return message.startswith("unknown command") or (
        isinstance(err, redis_errors.NoPermissionError) and "'eval" in message
    )
