"""A session method's arguments checked before anything is read: modules by name, at least one, options spelled right."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Mapping

from statekit.state.dump import check_modules
from statekit.state.flags import check_flag
from statekit.values.plain import describe
from statekit.state.base import is_module
from statekit.errors import SessionError
from statekit.session.document import META_KEY


def check_modules_by_name(
    method: str, positional: Mapping[str, object], modules: Mapping[str, object], options: tuple[str, ...]
) -> None:
    """Refuse a module passed by position, a misspelled option and anything but modules.

    Args:
        method: The method called, for the message (``"save"``).
        positional: Its positional parameters as given (``{"user_id": ...}``).
        modules: The keyword arguments taken as modules.
        options: The method's keyword options, for "did you mean".

    Raises:
        SessionError: A module given by position, or a keyword argument that is not
            a module and resembles an option, or the reserved metadata key.
        StatekitError: A keyword argument that is not a module (naming it).
    """
    for what, value in positional.items():
        if is_module(value):
            name = _snake(type(value).__name__)
            raise SessionError(
                f"{what} got {describe(value)}: modules are passed by name, "
                f"as in session.{method}({_id(positional.get('session_id'))}{_mutate(method)}, {name}={name})"
            )
    all_modules = True  # the usual case, checked once per value (this runs at every call)
    for name, value in modules.items():
        if is_module(value):
            continue
        all_modules = False
        close = difflib.get_close_matches(name, options, n=1)  # only values that are not modules: an error either way
        if close:
            raise SessionError(
                f"{method}() has no option {name}=; did you mean {close[0]}=? "
                "(the other keyword arguments are modules, StateModule instances)"
            )
    if not all_modules:
        check_modules(modules)  # names the first value that is not a module
    if META_KEY in modules:
        raise SessionError(f"{META_KEY!r} is reserved for statekit's own metadata; give the module another name")


def require_modules(method: str, session_id: object, modules: Mapping[str, object]) -> None:
    """Refuse a save or update that names no module (it would store an empty session).

    Raises:
        SessionError: Saying to pass the modules by name.
    """
    if not modules:
        raise SessionError(
            f"{method}() names no module, so there is nothing to save: pass the modules by name, "
            f"as in session.{method}({_id(session_id)}{_mutate(method)}, agent=agent)"
        )


def check_mutate(mutate: object) -> Callable[[], object]:
    """Refuse an ``update()`` ``mutate`` that is not a function callable without arguments.

    Raises:
        SessionError: Saying what ``mutate`` must be.
    """
    if not callable(mutate):
        raise SessionError(f"mutate must be a function of no arguments that changes the modules, got {describe(mutate)}")
    try:
        signature = inspect.signature(mutate)
    except (TypeError, ValueError):  # a builtin without a signature: called as it is
        return mutate
    try:
        signature.bind()
    except TypeError:
        name = getattr(mutate, "__name__", type(mutate).__name__)
        shown = signature.replace(return_annotation=inspect.Signature.empty)
        raise SessionError(
            f"mutate must take no arguments (it changes the modules it closes over), "
            f"but {name}{shown} needs some: use a closure or functools.partial"
        ) from None
    return mutate


def check_write_options(expected_revision: object, overwrite: object) -> None:
    """Refuse ``write_document()`` options that are not a revision string and ``True`` or ``False``, or both.

    Raises:
        SessionError: Saying which.
    """
    check_flag(overwrite, "overwrite", SessionError)
    if expected_revision is not None and overwrite:
        raise SessionError("give expected_revision or overwrite=True, not both")
    if expected_revision is not None and not isinstance(expected_revision, str):
        raise SessionError(f"expected_revision must be a revision string, got {describe(expected_revision)}")


def _id(session_id: object) -> str:
    return repr(session_id) if isinstance(session_id, str) else "'chat-1'"


def _mutate(method: str) -> str:
    return ", mutate" if method == "update" else ""


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
