"""Secret fields (``state_field(secret=True)``): never written in clear.

Without a key, a secret field is left out of what is saved (and a strict load
does not require it). With a key given to the session, its JSON value is
stored as ``{"__secret__": "v1:<token>"}``: AES-256-GCM (``cryptography``, the
``statekit[crypto]`` extra) with a synthetic nonce, an HMAC of the value, so
that re-saving unchanged state writes the same bytes (revisions are content
hashes) while any change to the token, or a wrong key, fails authentication.
Several keys rotate one: the first seals, each opens what it sealed.

The session tells the state layer its key through a context variable for the
duration of one synchronous dump or load, so the hot path pays nothing for
classes without secrets.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import hashlib
import hmac
import os
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from statekit._limits import depth_message, too_deep_below
from statekit.errors import MissingExtraError, PathSegment, Problem, SecretError, StateDumpError, StateVersionError

SECRET_KEY = "__secret__"
"""The only key of the object that stands for an encrypted secret in a document."""

MASK = "<secret>"
"""What ``statekit show`` prints instead of an encrypted secret."""

_VERSION = "v1:"
_NONCE = 12


def generate_secret_key() -> str:
    """A new random key for ``secret_key=``: 32 bytes, URL-safe base64 (44 characters).

    Keep it out of the code and out of the session store (an environment
    variable, a secrets manager).
    """
    return base64.urlsafe_b64encode(os.urandom(32)).decode("ascii")


SecretKey = str | bytes
"""One key: 32 bytes, or their URL-safe base64 (what :func:`generate_secret_key` returns)."""

SecretKeys = SecretKey | Sequence[SecretKey]
"""What ``secret_key=`` takes: one key, or a list or tuple of keys (the first encrypts; every one decrypts)."""


class SecretBox:
    """Seals secret values with one key and opens them with any of its keys.

    Args:
        key: One key, or a non-empty list or tuple of keys: the first seals,
            and each opens what it sealed (so that a key can be rotated: new
            first, old after). A key is 32 bytes, or their URL-safe base64
            (what :func:`generate_secret_key` returns).

    Raises:
        SecretError: No key, or a key that is not 32 bytes (the message never shows it).
        MissingExtraError: ``cryptography`` is not installed.
    """

    def __init__(self, key: SecretKeys) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:
            raise MissingExtraError("secret_key= needs the cryptography package: pip install 'statekit[crypto]'") from None
        raws = _keys_bytes(key)
        self._ciphers = tuple(AESGCM(hmac.digest(raw, b"statekit secret encryption", hashlib.sha256)) for raw in raws)
        self._nonce_key = hmac.digest(raws[0], b"statekit secret nonce", hashlib.sha256)

    def __repr__(self) -> str:
        hidden = "<key hidden>" if len(self._ciphers) == 1 else f"<{len(self._ciphers)} keys hidden>"
        return f"SecretBox({hidden})"

    def seal(self, value: Any) -> dict[str, str]:
        """The stored form of a JSON value, sealed with the first key: ``{"__secret__": "v1:..."}``."""
        plain = orjson.dumps(value)
        nonce = hmac.digest(self._nonce_key, plain, hashlib.sha256)[:_NONCE]
        token = base64.urlsafe_b64encode(nonce + self._ciphers[0].encrypt(nonce, plain, None))
        return {SECRET_KEY: _VERSION + token.decode("ascii")}

    def open(self, sealed: Any) -> Any:
        """The JSON value a sealed secret holds, opened with whichever key sealed it.

        Raises:
            SecretError: Not a token this statekit wrote, sealed with none of the
                keys, or an altered token.
        """
        return self.opened(sealed)[0]

    def opened(self, sealed: Any) -> tuple[Any, int]:
        """The JSON value a sealed secret holds, and the position of the key that opened it (0: the first).

        Raises:
            SecretError: As :meth:`open`.
        """
        from cryptography.exceptions import InvalidTag

        token = sealed.get(SECRET_KEY) if is_sealed(sealed) else None
        if not isinstance(token, str) or not token.startswith(_VERSION):
            raise SecretError("not an encrypted secret written by statekit")
        try:
            data = base64.urlsafe_b64decode(token[len(_VERSION) :])
        except (binascii.Error, ValueError):
            data = b""
        for index, cipher in enumerate(self._ciphers):
            try:
                plain = cipher.decrypt(data[:_NONCE], data[_NONCE:], None)
            except (ValueError, InvalidTag):  # ValueError: too short to hold a nonce
                continue
            return orjson.loads(plain), index
        if len(self._ciphers) == 1:
            raise SecretError("cannot decrypt the secret: wrong secret_key, or the stored value was altered")
        raise SecretError(
            f"cannot decrypt the secret with any of the {len(self._ciphers)} keys of secret_key: "
            "it was sealed with another key, or the stored value was altered"
        )


def _keys_bytes(keys: object) -> list[bytes]:
    """The raw bytes of one key or of a list or tuple of keys, checked (never quoted)."""
    if isinstance(keys, str | bytes):
        return [_key_bytes(keys)]
    if not isinstance(keys, Sequence):
        if isinstance(keys, set | frozenset | dict):  # no order: which key would encrypt?
            raise SecretError(
                f"secret_key must be one key or a list of keys in order (the first encrypts), "
                f"got a {type(keys).__name__}"
            )
        return [_key_bytes(keys)]
    if not keys:
        raise SecretError(
            "secret_key is an empty list: give at least one key (the first encrypts, every one decrypts)"
        )
    return [_key_bytes(key, f"secret_key[{index}]") for index, key in enumerate(keys)]


def _key_bytes(key: object, name: str = "secret_key") -> bytes:
    if isinstance(key, str):
        if not key.isascii():  # encoding it would make every such key the same (or fail)
            raise SecretError(f"{name} must be ASCII: 32 random bytes as URL-safe base64, from statekit.generate_secret_key()")
        key = key.encode("ascii")
    if isinstance(key, bytes) and len(key) == 44:
        with contextlib.suppress(binascii.Error, ValueError):
            key = base64.urlsafe_b64decode(key)
    if not isinstance(key, bytes) or len(key) != 32:
        raise SecretError(
            f"{name} must be 32 random bytes or their URL-safe base64 (44 characters); "
            "make one with statekit.generate_secret_key()"
        )
    return key


def is_sealed(data: Any) -> bool:
    """Whether ``data`` is the stored form of an encrypted secret."""
    return type(data) is dict and len(data) == 1 and SECRET_KEY in data


def mask_secrets(data: Any) -> Any:
    """A copy of plain data with every encrypted secret replaced by :data:`MASK`."""
    if is_sealed(data):
        return MASK
    if type(data) is dict:
        return {key: mask_secrets(value) for key, value in data.items()}
    if type(data) is list:
        return [mask_secrets(value) for value in data]
    return data


_BOX: contextvars.ContextVar[SecretBox | None] = contextvars.ContextVar("statekit_secret_box", default=None)


def current_box() -> SecretBox | None:
    """The key of the session dumping or loading right now (``None``: no key)."""
    return _BOX.get()


class _With:
    """The context manager :func:`secrets_with` returns (a class: a generator costs three times as much,
    at every save and load)."""

    __slots__ = ("_box", "_token")

    def __init__(self, box: SecretBox | None) -> None:
        self._box = box

    def __enter__(self) -> None:
        self._token = _BOX.set(self._box)

    def __exit__(self, *exc: object) -> None:
        _BOX.reset(self._token)


def secrets_with(box: SecretBox | None) -> _With:
    """Let the dumps and loads inside the block seal and open secrets with ``box``."""
    return _With(box)


def open_secret(data: Any) -> Any:
    """The JSON value of a secret field as loaded: opened with the current key.

    Raises:
        SecretError: Encrypted but no key, a wrong key, or clear text where
            the session has a key (it would replace the secret unauthenticated).
    """
    box = current_box()
    if not is_sealed(data):
        if box is not None:
            raise SecretError("expected an encrypted secret (the session has a secret_key); a value in clear is refused")
        return data
    if box is None:
        raise SecretError("the secret is encrypted: give the session the secret_key it was saved with")
    return box.open(data)


def hidden(problems: list[Problem], since: int, path: tuple[PathSegment, ...]) -> None:
    """Replace the messages of a secret field's problems (they could quote the value)."""
    for index in range(since, len(problems)):
        problems[index] = Problem(path, "not a valid value for this secret field (details hidden)")


def hidden_version_error(error: StateVersionError) -> StateVersionError:
    """``error`` (a secret field's value failed to migrate) without its reason, which could quote the value."""
    reason = "the value of this secret field could not be brought to its class's version (details hidden)"
    return StateVersionError(reason, path=error.path, found=error.found, expected=error.expected, source=error.source)


HIDDEN_BUILD = "refused while building the module (details hidden: the module holds secret fields)"
"""The problem reported when the constructor of a module holding secrets refuses: its message could quote them."""


def seal_into(
    out: dict[str, Any], name: str, dump: Callable[[Any], Any], value: Any, path: tuple[PathSegment, ...]
) -> StateDumpError | None:
    """Put a secret field's sealed value in ``out``, or nothing when there is no key.

    Returns:
        The error to raise when the value cannot be dumped (it quotes nothing): the
        caller raises it once its own frame lets go of the value. Made outside any
        exception handler, it has no context that could hold the value.
    """
    box = current_box()
    if box is None:
        return None
    sealed = _sealed(box, dump, value, len(path))
    if isinstance(sealed, Problem):
        return StateDumpError([Problem(path, sealed.message)])
    out[name] = sealed
    return None


def _sealed(box: SecretBox, dump: Callable[[Any], Any], value: Any, depth: int) -> dict[str, str] | Problem:
    """The sealed value, or the problem (no exception is left on a context, no plaintext in a frame)."""
    failed = ""
    try:
        data = dump(value)
        sealed = box.seal(data)  # orjson refuses what JSON cannot hold (a 65-bit integer, a lone surrogate)
    except Exception as exc:  # noqa: BLE001 - the message might quote the secret
        failed = type(exc).__name__
    if failed:
        return Problem((), f"the secret's value cannot be saved ({failed}; details hidden)")
    if too_deep_below(data, depth) is not None:  # sealed, it would pass any depth check
        return Problem((), f"the secret's value is {depth_message()}")
    return sealed
