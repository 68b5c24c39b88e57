"""``YAMLSession``: sessions as human-editable UTF-8 YAML files."""

from __future__ import annotations

from typing import ClassVar

from statekit.codecs import YAML, Codec
from statekit.session._files import FileSession


class YAMLSession(FileSession):
    """Sessions as YAML files under ``save_dir``, one per (user_id, session_id).

    Block style, keys in declaration order, multi-line text as literal blocks;
    read with a safe loader that refuses aliases and non-JSON tags.

    Args:
        save_dir: The folder (created on the first save).
        keep_history: How many past revisions of each session to keep (``None``: all;
            ``0``, the default: none), in ``.<name>.yaml.history/`` beside it (docs/history.md).
    """

    codec: ClassVar[Codec] = YAML
