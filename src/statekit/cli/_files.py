"""The files named on the command line: their codec, their data as one whole document, writing them atomically."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from statekit.state.config import codec_for
from statekit.cli._shared import UsageError
from statekit.codecs import Codec
from statekit.errors import DocumentError, StatekitError
from statekit.session.document import without_token
from statekit.session.files import read_session_file


def file_codec(path: str) -> Codec:
    """The codec of a file named on the command line.

    Raises:
        UsageError: The suffix is not one statekit reads.
    """
    try:
        return codec_for(path)
    except DocumentError as exc:
        raise UsageError(str(exc)) from None


def read_whole(name: str) -> Any:
    """The data of a file to write elsewhere as one whole document.

    A JSON session loses the token that ties it to its companion of appended
    items (they are merged in): a copy has no companion, and a YAML session
    refuses the token.

    Raises:
        DocumentError: As :func:`~statekit.session.files.read_session_file`.
    """
    data = read_session_file(name).data
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
