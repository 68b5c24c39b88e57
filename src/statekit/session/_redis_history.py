"""RedisSession's kept revisions (docs/history.md): one hash beside the session's key, kept in the save's own script.

A session key ``K`` that keeps history has ``K:history`` (on a Redis Cluster,
plus a hash tag when needed to sit in ``K``'s slot, as the write ids and leases
do: :func:`._redis_ids.beside`), a hash from each kept blob's name (a revision)
to the bytes ``K`` held then, deltas included, and from :data:`INDEX_FIELD` to
the kept records (one per line, newest first: :mod:`._history_beside`), which
therefore ride in no save or load of ``K``. :data:`KEEP` is the
compare-and-set of ``COMPARE_AND_SET`` (or of ``IF_BASE`` after a delta save)
that also copies the old value into the hash and removes the pruned fields, in
one script: the value never travels to the client and back. The hash expires
with ``K`` (every write aligns its expiry, a read that slides ``K``'s slides it
too), a delete of ``K`` deletes it, and its name never ends in ``:state``, so
listing sessions never sees it.
"""

from __future__ import annotations

from typing import Any

from statekit.session._archive import Archive
from statekit.session._redis_fence import FENCE
from statekit.session._redis_ids import ALIGN, MINE, beside
from statekit.session._redis_scripts import REVISION, SAVE, Script
from statekit.session._revisions import Expected
from statekit.session.document import HEAD_BYTES, token_mark

HISTORY_SUFFIX = ":history"
"""What follows the session key in its kept revisions' key (never ``:state``: listing does not see it)."""

INDEX_FIELD = ""
"""The field of ``K:history`` holding the session's kept records (see :mod:`._history_beside`): no revision is empty."""

_BESIDE = """
local function blob_of(line)
  return string.match(line, '"in":"([^"]*)"') or string.match(line, '"revision":"([^"]*)"') or ''
end
local function kept_in(index, blob)
  if string.find(index, '"in":"' .. blob .. '"', 1, true) then return true end
  local from = 1
  while true do
    local at = string.find(index, '"revision":"' .. blob .. '"', from, true)
    if not at then return false end
    local first, last = at, string.find(index, '\\n', at, true) or #index
    while first > 1 and string.byte(index, first - 1) ~= 10 do first = first - 1 end
    if blob_of(string.sub(index, first, last)) == blob then return true end
    from = last + 1
  end
end
local function first_lines(text, count)
  local at = 0
  for _ = 1, count do
    at = string.find(text, '\\n', at + 1, true)
    if not at then return text, '' end
  end
  return string.sub(text, 1, at), string.sub(text, at + 1)
end
local function beside(mode, records, keep, listed)
  local stored, stale = redis.call('HGET', KEYS[4], '') or '', ''
  if listed ~= '' then stored, stale = first_lines(stored, tonumber(listed)) end
  local index, gone = records, stored .. stale
  if mode == 'add' then index, gone = index .. stored, stale end
  if keep ~= '' then
    local at = 0
    for _ = 1, tonumber(keep) do
      at = string.find(index, '\\n', at + 1, true)
      if not at then break end
    end
    if at then index, gone = string.sub(index, 1, at), string.sub(index, at + 1) .. gone end
  end
  for line in string.gmatch(gone, '[^\\n]+') do
    local blob = blob_of(line)
    if blob ~= '' and not kept_in(index, blob) then redis.call('HDEL', KEYS[4], blob) end
  end
  if index == '' then redis.call('HDEL', KEYS[4], '') else redis.call('HSET', KEYS[4], '', index) end
end
"""
"""``beside(mode, records, keep)``: the session's kept records (field :data:`INDEX_FIELD` of KEYS[4]) become
``records`` ('set') or ``records`` followed by the first ``listed`` of them ('' = all: the rest go, as if cut off)
('add'), cut to ``keep`` records ('' = all); the blobs that
only records no longer listed are in are removed. :func:`._history_beside.advance` in Lua."""

KEEP = Script(MINE + FENCE + SAVE + REVISION + _BESIDE + f"""
local refused = fence(KEYS[3], ARGV[#ARGV - 3])
if refused then return refused end
local current = redis.call('GET', KEYS[1])
if ARGV[4] == 'base' then
  if not current or #current ~= tonumber(ARGV[5]) then return 0 end
  if not string.find(string.sub(current, 1, {HEAD_BYTES}), ARGV[2], 1, true) then return 0 end
else
  local revision = ''
  if current then revision = revision_of(current) end
  if revision ~= ARGV[2] then return 0 end
end
save(ARGV[1], ARGV[3])
if current and ARGV[6] ~= '' then redis.call('HSETNX', KEYS[4], ARGV[6], current) end
for index = 11, #ARGV - 4 do redis.call('HDEL', KEYS[4], ARGV[index]) end
if ARGV[7] ~= '' then beside(ARGV[7], ARGV[8], ARGV[9], ARGV[10]) end
stamp()
return 1
""")
"""``COMPARE_AND_SET`` keeping the old value: write ARGV[1] (ARGV[3]: TTL, '' or 'keep') if the stored value is
still the one expected: ARGV[4] 'revision': its SHA-1 is ARGV[2] ('' = no value); ARGV[4] 'base': its head holds
ARGV[2] (the document's token) and its length is ARGV[5]. Then the old value (if any) becomes field ARGV[6] of
KEYS[4] (unless ARGV[6] is ''), the fields ARGV[11..] are removed, and, unless ARGV[7] is '', the kept records
change (``beside(ARGV[7], ARGV[8], ARGV[9], ARGV[10])``); KEYS[4] expires with the value. Then the lease token and the
write id, as in ``COMPARE_AND_SET``; it answers as that one does."""

PUT = Script(FENCE + ALIGN + """
local refused = fence(KEYS[2], ARGV[3])
if refused then return refused end
redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2])
align(KEYS[1], KEYS[3])
return 1
""")
"""Store ARGV[2] as field ARGV[1] of KEYS[3] (the value KEYS[1]'s kept revisions; a field of that name already
holds the same bytes) unless the lease fence (KEYS[2], ARGV[3]: the token carried) refuses it. Answers 1 or the
refusal; sent again, it changes nothing more."""

DROP = Script(FENCE + """
local refused = fence(KEYS[2], ARGV[#ARGV])
if refused then return refused end
for index = 1, #ARGV - 1 do redis.call('HDEL', KEYS[3], ARGV[index]) end
return 1
""")
"""Remove the fields ARGV[1..#ARGV - 1] of KEYS[3] unless the lease fence (KEYS[2], ARGV[#ARGV]: the token
carried) refuses it. Answers 1 or the refusal; sent again, it changes nothing more."""


def history_key(name: str, cluster: bool) -> str:
    """The key of session key ``name``'s kept revisions; on a cluster, in ``name``'s slot."""
    return beside(name, HISTORY_SUFFIX, cluster)


def keep_args(data: bytes, expected: Expected, ttl: str, archive: Archive) -> tuple[Any, ...]:
    """:data:`KEEP`'s arguments before the lease token and the write id (``ttl``: the scripts' TTL argument):
    one tuple, held while the write waits."""
    index, keep_as = archive.index, archive.keep_as or ""
    mode, records, keep, listed = "", b"", "", ""
    if index is not None:
        mode, records = "set" if index.replace else "add", index.records
        keep = "" if index.keep is None else str(index.keep)
        listed = "" if index.listed is None else str(index.listed)
    if expected.only_base:
        base = expected.base
        assert base is not None
        length = str(base.doc_len + base.log_len)
        return (data, token_mark(base.token), ttl, "base", length, keep_as, mode, records, keep, listed, *archive.drop)
    return (data, expected.revision, ttl, "revision", "", keep_as, mode, records, keep, listed, *archive.drop)


def blob_text(value: Any) -> bytes | None:
    """A field's value as Redis answered it (bytes, or text from a ``decode_responses`` client), as bytes."""
    return value.encode("utf-8") if isinstance(value, str) else value


def blob_names(names: Any) -> list[str]:
    """``HKEYS``'s answer as the blobs' names (the kept records' field left out)."""
    found = (name.decode("utf-8") if isinstance(name, bytes) else str(name) for name in names)
    return [name for name in found if name != INDEX_FIELD]
