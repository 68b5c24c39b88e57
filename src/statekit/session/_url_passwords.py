"""The user info of a store URL, found one way for every backend, so that no message shows a password."""

from __future__ import annotations

import re

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//)?")


def split_authority(url: str) -> tuple[str, str]:
    """``url`` cut before its user info: after the scheme and its ``//`` (if any), else at the start."""
    scheme = _SCHEME.match(url)
    return (url[: scheme.end()], url[scheme.end() :]) if scheme else ("", url)


def user_info(url: str) -> str | None:
    """The user info of ``url``: everything up to its last ``@`` (as redis-py and libpq read it,
    and whether or not a parser could make sense of the rest); ``None`` when it has none."""
    info, at, _ = split_authority(url)[1].rpartition("@")
    return info if at else None
