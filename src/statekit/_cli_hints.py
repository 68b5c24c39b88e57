"""What the ``statekit`` command adds to a message when the user most likely meant something else."""

from __future__ import annotations

from pathlib import Path

from statekit.codecs import JSON
from statekit.session._companion import companion

STORE_OPTIONS = "--dir DIR (add --yaml for YAML files) or --redis-url URL"
"""How a command is told where stored sessions are."""


def show_target_hint(target: str) -> str:
    """Why ``statekit show TARGET`` (no store named) cannot read ``target`` as a file, and what to write.

    Empty when there is nothing to add to the suffix error.
    """
    path = Path(target)
    document = path.with_suffix("")
    if document.suffix == JSON.suffix and companion(document) == path:
        return (
            f"{target} is the companion of {document} (the items appended to its append-only lists): "
            f"show {document}, which includes them"
        )
    if not path.suffix:
        return f"to show a stored session by its id, say where the sessions are: {STORE_OPTIONS}"
    return ""
