"""RedisSession's kept revisions (docs/history.md): a hash and a list beside the session's key, kept in the save's own script.

A session key ``K`` that keeps history has ``K:history`` (on a Redis Cluster,
plus a hash tag when needed to sit in ``K``'s slot, as the write ids and leases
do: :func:`._redis_ids.beside`), a hash from each kept blob's name (a revision)
to the bytes ``K`` held then, deltas included, and ``K:history-records``, a list
of the kept records (one JSON record each, newest first: :mod:`._history_beside`),
which therefore ride in no save or load of ``K``. :data:`KEEP` is the
compare-and-set of ``COMPARE_AND_SET`` (or of ``IF_BASE`` after a delta save)
that also copies the old value into the hash, pushes the new records, trims the
list and removes the pruned fields, in one script: the value never travels to
the client and back, and the records already kept are neither read nor
rewritten. Both keys expire with ``K`` (every write aligns their expiry, a read
that slides ``K``'s slides theirs too), a delete of ``K`` deletes them, and
their names never end in ``:state``, so listing sessions never sees them.
"""

from __future__ import annotations

from typing import Any

from statekit.session._archive import Archive, IndexChange
from statekit.session._redis_fence import FENCE
from statekit.session._redis_ids import ALIGN, MINE, beside
from statekit.session._redis_scripts import REVISION, SAVE, Script
from statekit.session._revisions import Expected
from statekit.session.document import HEAD_BYTES, token_mark

HISTORY_SUFFIX = ":history"
"""What follows the session key in its kept revisions' key (never ``:state``: listing does not see it)."""

RECORDS_SUFFIX = ":history-records"
"""What follows the session key in its kept records' key (a list, newest first; never ``:state``)."""

_BESIDE = """
local function blob_of(line)
  local _, at = string.find(line, '"in":"', 1, true)
  if not at then _, at = string.find(line, '"revision":"', 1, true) end
  if not at then return '' end
  return string.sub(line, at + 1, (string.find(line, '"', at + 1, true) or 0) - 1)
end
local function beside(mode, records, keep, listed)
  local lines, gone, cut = {}, {}, nil
  for line in string.gmatch(records, '[^\\n]+') do lines[#lines + 1] = line end
  if mode == 'set' then cut = 0 elseif listed ~= '' then cut = tonumber(listed) end
  if cut then
    gone = redis.call('LRANGE', KEYS[5], cut, -1)
    if cut == 0 then redis.call('DEL', KEYS[5]) elseif #gone > 0 then redis.call('LTRIM', KEYS[5], 0, cut - 1) end
  end
  local at = #lines
  while at > 0 do  -- the oldest first, so that the newest ends first; a thousand at a time (unpack's limit)
    local batch = {}
    for each = at, math.max(at - 999, 1), -1 do batch[#batch + 1] = lines[each] end
    redis.call('LPUSH', KEYS[5], unpack(batch))
    at = at - 1000
  end
  local last = nil  -- the oldest record left, once read
  if keep ~= '' then
    local kept = tonumber(keep)
    local older = redis.call('LRANGE', KEYS[5], math.max(kept - 1, 0), -1)  -- with the oldest record left
    if kept > 0 and #older > 0 then last = table.remove(older, 1) end
    if #older > 0 then
      if kept == 0 then redis.call('DEL', KEYS[5]) else redis.call('LTRIM', KEYS[5], 0, kept - 1) end
      for _, line in ipairs(gone) do table.insert(older, line) end
      gone = older
    end
  end
  if #gone == 0 then return end
  local used = {}
  if mode == 'set' then
    for _, line in ipairs(redis.call('LRANGE', KEYS[5], 0, -1)) do used[blob_of(line)] = true end
  else
    if not last then last = redis.call('LRANGE', KEYS[5], -1, -1)[1] end
    if last then used[blob_of(last)] = true end
  end
  for _, line in ipairs(gone) do
    local blob = blob_of(line)
    if blob ~= '' and not used[blob] then
      used[blob] = true
      redis.call('HDEL', KEYS[4], blob)
    end
  end
end
"""
"""``beside(mode, records, keep, listed)``: the session's kept records (the list KEYS[5], newest first) become
``records`` (lines, newest first: 'set') or ``records`` followed by the first ``listed`` stored ones ('' = all;
the rest go, as if cut off: 'add'), cut to ``keep`` records ('' = all); the blobs (fields of KEYS[4]) that only
records no longer listed are in are removed. Records that share a blob are written together by one save, so
they are next to each other: after an 'add' the oldest record left is the only one a record cut off can share
its blob with (read with those cut off, when the retention cuts). :func:`._history_beside.advance` in Python."""

KEEP = Script(MINE + FENCE + SAVE + REVISION + _BESIDE + f"""
local refused = fence(KEYS[3], ARGV[#ARGV - 3])
if refused then return refused end
local newline = string.find(ARGV[3], '\\n', 1, true) or 0
local kind, length, keep_as, mode, keep, listed, ttl =
  string.match(string.sub(ARGV[3], 1, newline - 1), '^(%a+) (%d*) (%S*) (%a*) (%d*) (%d*) (%w*)$')
if newline == 0 or not kind then return redis.error_reply('statekit: malformed history plan') end
local current = redis.call('GET', KEYS[1])
if kind == 'base' then
  if not current or #current ~= tonumber(length) then return 0 end
  if not string.find(string.sub(current, 1, {HEAD_BYTES}), ARGV[2], 1, true) then return 0 end
else
  local revision = ''
  if current then revision = revision_of(current) end
  if revision ~= ARGV[2] then return 0 end
end
save(ARGV[1], ttl)
if current and keep_as ~= '' then redis.call('HSETNX', KEYS[4], keep_as, current) end
for index = 4, #ARGV - 4 do redis.call('HDEL', KEYS[4], ARGV[index]) end
if mode ~= '' then beside(mode, string.sub(ARGV[3], newline + 1), keep, listed) end
stamp()
return 1
""")
"""``COMPARE_AND_SET`` keeping the old value: write ARGV[1] if the stored value is still the one expected, as
ARGV[3] says. Its first line is the plan (seven words, one space between each, see :func:`keep_args`), the rest
the records. The plan's kind 'revision': the stored value's SHA-1 is ARGV[2] ('' = no value); 'base': its head
holds ARGV[2] (the document's token) and its length is the second word. The seventh word is the TTL ('' or
'keep': the key's own). Then the old value (if any) becomes the field of KEYS[4] the third word names (none when
it is empty), the fields ARGV[4..] are removed, and, unless the fourth word is empty, the kept records change
(``beside(mode, records, keep, listed)``: the fourth to sixth words, KEYS[5]); both expire with the value. Then
the lease token and the write id, as in ``COMPARE_AND_SET``; it answers as that one does."""

PUT = Script(FENCE + ALIGN + """
local refused = fence(KEYS[2], ARGV[3])
if refused then return refused end
redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2])
align(KEYS[1], KEYS[3], KEYS[4])
return 1
""")
"""Store ARGV[2] as field ARGV[1] of KEYS[3] (the value KEYS[1]'s kept revisions; a field of that name already
holds the same bytes) unless the lease fence (KEYS[2], ARGV[3]: the token carried) refuses it; KEYS[3] and the
kept records (KEYS[4]) expire with the value. Answers 1 or the refusal; sent again, it changes nothing more."""

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


def records_key(name: str, cluster: bool) -> str:
    """The key of session key ``name``'s kept records; on a cluster, in ``name``'s slot."""
    return beside(name, RECORDS_SUFFIX, cluster)


def keep_args(data: bytes, expected: Expected, ttl: str, archive: Archive) -> tuple[Any, ...]:
    """:data:`KEEP`'s arguments before the lease token and the write id (``ttl``: the scripts' TTL argument):
    one tuple, held while the write waits. The new value, the check, then, in one argument, the plan and the
    records: the plan's line says what the script does besides the value (its kind, the base's length, the
    blob the old value becomes, the records' mode, retention and listed count, and the TTL, one space between
    each: every word a name or a number), the records follow it. A save that keeps history then sends as many
    arguments as one that does not: each costs a length line to pack and a string for the script to make."""
    index, keep_as = archive.index, archive.keep_as or ""
    if index is None:
        records, changes = b"", "  "
    else:
        keep, listed = "" if index.keep is None else index.keep, "" if index.listed is None else index.listed
        records, changes = index.records, f"{'set' if index.replace else 'add'} {keep} {listed}"
    if expected.only_base:
        base = expected.base
        assert base is not None
        check, plan = token_mark(base.token), f"base {base.doc_len + base.log_len} {keep_as} {changes} {ttl}\n"
    else:
        check, plan = expected.revision, f"revision  {keep_as} {changes} {ttl}\n"
    return (data, check, plan.encode() + records, *archive.drop)


def keep_plan(args: tuple[Any, ...]) -> tuple[bytes, tuple[str, str, int | None], Archive]:
    """:data:`KEEP`'s arguments (before the lease token and the write id) read back as the script reads them:
    the new value; the check (the kind, the revision or the token's mark, the base's length); the archive
    (for its ``WATCH`` twin, which therefore holds nothing of its own while the write waits; it takes the
    TTL from the session, as the script's caller does)."""
    data, check, planned, *drop = args
    plan, _, records = planned.partition(b"\n")
    kind, length, keep_as, mode, keep, listed, _ttl = plan.decode().split(" ")
    index = None
    if mode:
        index = IndexChange(records, mode == "set", int(keep) if keep else None, int(listed) if listed else None)
    return data, (kind, check, int(length) if length else None), Archive(keep_as or None, tuple(drop), index)


def blob_names(names: Any) -> list[str]:
    """``HKEYS``'s answer as the blobs' names."""
    return [name.decode("utf-8") if isinstance(name, bytes) else str(name) for name in names]


def records_text(lines: Any) -> bytes | None:
    """``LRANGE``'s answer (the kept records, newest first) as the index's text: one record per line."""
    return b"".join((line.encode("utf-8") if isinstance(line, str) else line) + b"\n" for line in lines) or None
