"""What to say when a Redis server wants a password that the client was not given."""

from __future__ import annotations

from typing import Any


def password_hint(client: Any) -> str:
    """``"; <how to give a password>"`` when ``client`` (``Redis`` or ``RedisCluster``) has none, else ``""``."""
    settings = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    scheme = "redis"
    if settings is None:  # a cluster keeps the settings of its nodes' connections here
        settings, scheme = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None), "redis+cluster"
    if not isinstance(settings, dict) or settings.get("password") or settings.get("credential_provider"):
        return ""
    return (
        f"; the server needs a password and none was given: put it in the URL ({scheme}://:PASSWORD@host:6379/0, "
        f"or {scheme}://USER:PASSWORD@host:6379/0 for an ACL user) or pass password=... to RedisSession"
    )
