"""What to say when a Redis server wants a password that the client was not given."""

from __future__ import annotations

from typing import Any

NEEDS_PASSWORD = (
    "the server needs a password and none was given: put it in the URL "
    "(redis://:PASSWORD@host:6379/0, or redis://USER:PASSWORD@host:6379/0 for an ACL user) "
    "or pass password=... to RedisSession"
)


def password_hint(client: Any) -> str:
    """``"; <how to give a password>"`` when ``client`` (``Redis`` or ``RedisCluster``) has none, else ``""``."""
    pool = getattr(client, "connection_pool", None)
    settings = getattr(pool, "connection_kwargs", None)
    if settings is None:  # a cluster keeps the settings of its nodes' connections here
        settings = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None)
    if not isinstance(settings, dict) or settings.get("password") or settings.get("credential_provider"):
        return ""
    return f"; {NEEDS_PASSWORD}"
