"""``JSONSession``: sessions as pretty-printed UTF-8 JSON files."""

from __future__ import annotations

from typing import ClassVar

from statekit.codecs import JSON, Codec
from statekit.session._files import FileSession


class JSONSession(FileSession):
    """Sessions as JSON files under ``save_dir``, one per (user_id, session_id).

    Args:
        save_dir: The folder (created on the first save).
        layout: ``"statekit"`` or ``"agentscope"`` (AgentScope 1.x's file
            names ``{user_id}_{session_id}.json``, to open its folders).
        keep_history: How many past revisions of each session to keep (``None``: all;
            ``0``, the default: none), in ``.<name>.json.history/`` beside it (docs/history.md).
    """

    codec: ClassVar[Codec] = JSON
    supports_appends: ClassVar[bool] = True
