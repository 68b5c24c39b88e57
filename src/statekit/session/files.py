"""Session files for tools (the ``statekit`` command): one file read with its companion, the companion's path, safe reads, stems."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from statekit.codecs import JSON
from statekit.errors import DocumentError
from statekit.session._agentscope import legacy_files
from statekit.session._appends import merge
from statekit.session._companion import companion, read_session, split
from statekit.session._delta_load import check_token, is_joined, positioned
from statekit.session._loading import misplaced
from statekit.session._safe_files import read_regular
from statekit.session.document import token_of
from statekit.state.config import Document, read_document

__all__ = ["companion_path", "read_regular_file", "read_session_file", "session_stems"]


def companion_path(path: str | os.PathLike[str]) -> Path:
    """The companion of the JSON session file at ``path``: the file its appended items go to (``NAME.json.log``)."""
    return companion(Path(path))


def read_session_file(name: str) -> Document:
    """A session (or config) file by its path; a JSON session file reads merged with its companion's appended items.

    The document keeps its metadata as stored, and the bytes of the file itself
    (not of the merged data), so that problems are placed in the file on disk,
    or in its companion for an appended item: as a session load places them.

    Raises:
        DocumentError: As :func:`~statekit.state.config.read_document`, or a
            companion that belongs to another document.
    """
    document = read_document(name)
    if not name.endswith(JSON.suffix) or not isinstance(document.data, dict):
        return document
    path = Path(name)
    if path.is_symlink():  # followed, as read_document() did: the rule against links is a session folder's
        path = path.resolve()
    raw = read_session(path)
    if raw is None or not is_joined(raw):
        return document
    data = dict(document.data)
    _, log, token = split(raw)
    log_source = str(companion(path))
    if not log and token_of(data) is not None:  # a companion beside a document whose token is not at its top
        raise DocumentError(misplaced(data, deltas=True), source=name)
    check_token(data, token, name, log_source)
    merge(data, log, token or "", log_source)
    place = functools.partial(positioned, raw=raw, codec=JSON, source=name, log_source=log_source)
    return Document(data, name, raw, JSON, place)


def read_regular_file(path: str | os.PathLike[str]) -> bytes | None:
    """A whole regular file, read without following a link or waiting on a FIFO; ``None``: there is no file.

    Raises:
        SessionError: The path is a link or not a regular file.
        OSError: The file cannot be read.
    """
    return read_regular(Path(path))


def session_stems(folder: str | os.PathLike[str], suffix: str) -> list[str]:
    """The names (without ``suffix``) of the session files in ``folder``, sorted: no hidden or special files."""
    return legacy_files(Path(folder), suffix)
