"""The Lua scripts of RedisSession's conditional writes, run by SHA-1, and whether a server refuses scripts."""

from __future__ import annotations

import hashlib
from typing import Any

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from statekit.session.document import HEAD_BYTES
from statekit.session._redis_ids import DELETE, MINE
from statekit.session._redis_once import Sending, send_once

COMPARE_AND_SET = MINE + """
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
"""
"""Write ARGV[1] if the stored value's SHA-1 is ARGV[2] ('' = no value); ARGV[3]: TTL, '' or 'keep' (the key's own);
ARGV[4]: the write's id, pushed onto KEYS[2]; ARGV[5]: how many ids it keeps; ARGV[6]: 'retry' after a lost
reply (see _redis_once, _redis_ids). Answers 1 (written), 0 (changed by another writer), 2 (unknown after a retry)."""

COMPARE_AND_SET_SHA = hashlib.sha1(COMPARE_AND_SET.encode(), usedforsecurity=False).hexdigest()

# Deltas of append-only lists follow the document in the same key (one line
# each, see _appends.py). Within one document token the value only grows, so
# the token (in the document's first bytes) and the length say what is stored.
IF_BASE = MINE + f"""
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
"""
IF_BASE_SHA = hashlib.sha1(IF_BASE.encode(), usedforsecurity=False).hexdigest()
DELETE_SHA = hashlib.sha1(DELETE.encode(), usedforsecurity=False).hexdigest()


async def evaluated(
    client: Redis | RedisCluster, script: str, sha: str, keys: tuple[str, str], sending: Sending, *args: Any
) -> int:
    """Run a script on ``keys`` (a value's and its companion's, :func:`id_key`); its answer (``DONE``...)."""
    name = keys[0]
    try:
        return int(await send_once(client, sending, name, "EVALSHA", sha, 2, *keys, *args))
    except redis_errors.NoScriptError:  # EVAL caches it on this node only (SCRIPT LOAD needs all of them)
        return int(await send_once(client, sending, name, "EVAL", script, 2, *keys, *args))


def refuses_scripts(err: Exception) -> bool:
    """Whether the server runs no scripts: it does not know the command, or an ACL refuses it (``NOPERM``)."""
    message = str(err).lower()
    return message.startswith("unknown command") or (
        isinstance(err, redis_errors.NoPermissionError) and "'eval" in message
    )
