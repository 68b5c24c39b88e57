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
    """

    codec: ClassVar[Codec] = YAML
