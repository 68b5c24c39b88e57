"""The lease fence every RedisSession write checks before it writes: in Lua, in a ``WATCH``/``MULTI`` twin, and its answer.

A session's live lease is a key beside the session's (see :mod:`._redis_leases`)
holding the lease's token, which Redis expires (``PX``). A write carries the
token of the lease its session object holds (:data:`NO_TOKEN`: none), and the
write's script (or twin) compares it with the stored one first, in the same
atomic step as the write: the rule of :func:`statekit.session._fence.fence_verdict`,
with Redis's expiry deciding what is live. A refused write changes nothing and
answers ``[verdict, held_until_ms]`` instead of its usual integer; :func:`fenced`
turns that into the error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline
from redis.client import NEVER_DECODE

from statekit.errors import SessionError, WriteOutcomeUnknownError
from statekit.session._fence import FENCE_HELD, FENCE_LOST, FENCE_OK, check_fence

Answer = int | list[int]
"""A write's answer: a script's integer (``DONE``...), or ``[verdict, held_until_ms]`` when the fence refused it."""

NO_TOKEN = ""
"""The token a write carries when its session object holds no lease on the session."""

CLOCK = """
local function now_ms()
  local now = redis.call('TIME')
  return now[1] * 1000 + math.floor(now[2] / 1000)
end
"""
"""``now_ms()``: the server's clock (``TIME``), in milliseconds since the epoch. Scripts read it after their
writes, never before (a server replicating scripts verbatim refuses writes after ``TIME``)."""

FENCE = CLOCK + f"""
local function fence(lease, carried)
  local held = redis.call('GET', lease)
  if held == carried or (not held and carried == '{NO_TOKEN}') then return nil end
  local verdict = {FENCE_LOST}
  if held and carried == '{NO_TOKEN}' then verdict = {FENCE_HELD} end
  local left = redis.call('PTTL', lease)
  if left < 0 then return {{verdict, -1}} end
  return {{verdict, now_ms() + left}}
end
"""
"""Prepended to the write scripts: ``fence(lease_key, carried_token)`` is ``nil`` when the write may go ahead,
else ``{verdict, held_until_ms}`` (-1: unknown) for the script to return before it writes anything. ``TIME``
is read only on a refusal, after which the script writes nothing."""


def carried(token: int | None) -> str:
    """The scripts' fence argument for the token a write carries."""
    return NO_TOKEN if token is None else str(token)


async def fence_watching(pipe: Pipeline | ClusterPipeline, lease: str, token: int | None) -> list[int] | None:
    """What ``fence()`` answers, on the ``WATCH`` path (``lease`` watched, before ``MULTI``): ``None`` or the refusal."""
    held: Any = await pipe.execute_command("GET", lease, **{NEVER_DECODE: True})
    stored = None if held is None else int(held)
    if stored == token:
        return None
    verdict = FENCE_HELD if token is None else FENCE_LOST
    left = await pipe.pttl(lease)
    if left < 0:
        return [verdict, -1]
    return [verdict, now_ms(await pipe.time()) + left]


def now_ms(time: Any) -> int:
    """``TIME``'s answer (seconds, microseconds) in milliseconds."""
    seconds, micros = time
    return int(seconds) * 1000 + int(micros) // 1000


def fenced(answer: Any, source: Callable[[], str], token: int | None, resent: bool = False) -> int:
    """A write's answer (a script's or a twin's) when the fence let it through (``source``: names the session, for
    the error; ``resent``: the answer is that of a write without a write id, sent again after its reply was lost).

    Raises:
        LeaseHeldError: Another session object holds the live lease; nothing was written.
        LeaseLostError: The carried token's lease expired or was taken over; nothing was written.
        WriteOutcomeUnknownError: ``resent``, and refused: the first send may have landed before the lease changed.
    """
    if not isinstance(answer, list):
        return int(answer)
    code, until = int(answer[0]), int(answer[1])
    if resent:
        raise WriteOutcomeUnknownError(
            f"{source()}: a save was sent but its reply was lost; sent again, it was refused by the session's lease, "
            "which may have changed since the first send: that one may or may not have been applied "
            "(load the session to see which)"
        )
    if code != FENCE_OK:
        check_fence(code, source(), token, None if until < 0 else until / 1000)
    raise SessionError(f"{source()}: the store refused a write with no lease verdict ({answer!r})")
