"""ISO 8601 ``pattern``s for the JSON Schema of ``datetime`` and ``time`` fields.

They accept what ``isoformat()`` writes and only strings ``fromisoformat()``
reads (on Python 3.11+, which reads more forms than these): a zone only after
a time, and every field within its range, February 29 in leap years only.
Plain groups, not ``(?:``: JSON Schema only recommends a small regex subset.
"""

from __future__ import annotations

_YEAR = r"([1-9]\d{3}|0[1-9]\d\d|00[1-9]\d|000[1-9])"  # year 0 does not exist
_MONTH_DAY = (
    r"((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])"
    r"|(0[469]|11)-(0[1-9]|[12]\d|30)"
    r"|02-(0[1-9]|1\d|2[0-8]))"
)
_LEAP_DAY = r"(\d\d(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29"
_DATE = rf"({_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})"
_TIME = r"([01]\d|2[0-3])(:[0-5]\d(:[0-5]\d([.,]\d+)?)?)?"
_ZONE = r"(Z|[+-]([01]\d|2[0-3])(:?[0-5]\d(:?[0-5]\d([.,]\d+)?)?)?)"  # under 24 hours; seconds as isoformat() writes them

DATETIME_PATTERN = rf"^{_DATE}([T ]{_TIME}{_ZONE}?)?$"
"""A date, optionally followed by a time of day and a zone."""

TIME_PATTERN = rf"^{_TIME}{_ZONE}?$"
"""A time of day, optionally followed by a zone."""
