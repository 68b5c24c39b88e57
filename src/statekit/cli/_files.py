"""The files named on the command line: their codec, reading them (a JSON session with its appended items), writing them atomically."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from statekit.state.config import Document, codec_for, read_document
from statekit.cli._shared import UsageError
from statekit.codecs import JSON, Codec
from statekit.errors import DocumentError, StatekitError
from statekit.session._appends import merge
from statekit.session._loading import misplaced
from statekit.session._companion import companion, split
from statekit.session._companion import read_session as read_stored
from statekit.session._delta_save import check_token, is_joined, positioned
from statekit.session.document import token_of, without_token


def file_codec(path: str) -> Codec:
    """The codec of a file named on the command line.

    Raises:
        UsageError: The suffix is not one statekit reads.
    """
    try:
        return codec_for(path)
    except DocumentError as exc:
        raise UsageError(str(exc)) from None


def read_file(name: str) -> Document:
    """A file named on the command line; a JSON session file reads merged with its appended items.

    The document keeps its metadata as stored, and the bytes of the file itself
    (not of the merged data), so that problems are placed in the file on disk.

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
    raw = read_stored(path)
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
    return Document(data, name, raw, JSON, place)  # problems placed as a session load places them


def read_whole(name: str) -> Any:
    """The data of a file to write elsewhere as one whole document.

    A JSON session loses the token that ties it to its companion of appended
    items (they are merged in): a copy has no companion, and a YAML session
    refuses the token.

    Raises:
        DocumentError: As :func:`read_file`.
    """
    data = read_file(name).data
    return without_token(data) if isinstance(data, dict) else data


def output(name: str, *, force: bool) -> Path:
    """An output file the command may write: its folder exists, and it does not unless ``force``.

    Raises:
        UsageError: The file exists and ``force`` is false.
        StatekitError: Its folder does not exist.
    """
    target = Path(name)
    if target.exists() and not force:
        raise UsageError(f"{target} exists; add --force to replace it")
    if not target.parent.is_dir():
        raise StatekitError(f"cannot write {target}: there is no folder {str(target.parent)!r}")
    return target


def write_bytes(target: Path, payload: bytes, *, mode: int | None = None) -> None:
    """Write through a temporary file, so that a failed write leaves OUT as it was.

    Args:
        target: The file to (re)place.
        payload: Its new content.
        mode: Its permission bits (``convert`` passes the source file's);
            ``None``: the usual ones, after the umask.
    """
    temporary = target.with_name(f".{target.name}.statekit-tmp")
    try:
        private = 0o666 if mode is None else mode & 0o600  # never readable by others before chmod
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, private)
        with open(descriptor, "wb") as file:
            file.write(payload)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
