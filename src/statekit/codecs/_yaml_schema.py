"""Which plain YAML scalars are numbers, booleans and null: the YAML 1.2 core schema.

PyYAML resolves plain scalars by YAML 1.1: ``no``, ``on`` and ``yes`` are
booleans, ``10:30`` is the base-60 integer 630 (built digit group by digit
group, in quadratic time), ``1_000`` is an integer. Editors, the YAML language
server that checks configs against statekit's JSON Schema, and most modern
tools read YAML 1.2, where all of these are text. The loader reads by the 1.2
core schema; the writer quotes any text that *either* version would read as
something else, so other tools, old and new, read it back as text.

An explicit tag (``!!int``, ``!!float``, ``!!bool``, ``!!null``) must fit the
same forms; anything else is a ``ConstructorError`` at the node.
"""

from __future__ import annotations

import math
import re
import sys

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import Node

_TAG = "tag:yaml.org,2002:"
BOOL = re.compile(r"(?:true|True|TRUE|false|False|FALSE)\Z")
NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
INT = re.compile(r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
FLOAT = re.compile(r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z")

# In this order: an integer also matches FLOAT.
CORE: tuple[tuple[str, re.Pattern[str], list[str]], ...] = (
    (_TAG + "bool", BOOL, list("tTfF")),
    (_TAG + "int", INT, list("-+0123456789")),
    (_TAG + "float", FLOAT, list("-+0123456789.")),
    (_TAG + "null", NULL, ["~", "n", "N", ""]),
)
_SPECIAL_FLOATS = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}
_BASES = {"0o": 8, "0x": 16}


def read_core_schema(loader: type[yaml.SafeLoader]) -> None:
    """Make ``loader`` resolve and build scalars by the YAML 1.2 core schema only.

    ``<<`` still resolves to a merge key, so that the loader can refuse it by name.

    Args:
        loader: The loader class; its resolvers and scalar constructors are replaced.
    """
    loader.yaml_implicit_resolvers = {}
    for tag, pattern, first in CORE:
        loader.add_implicit_resolver(tag, pattern, first)
    loader.add_implicit_resolver(_TAG + "merge", re.compile(r"<<\Z"), ["<"])
    loader.add_constructor(_TAG + "int", construct_int)
    loader.add_constructor(_TAG + "float", construct_float)
    loader.add_constructor(_TAG + "bool", construct_bool)
    loader.add_constructor(_TAG + "null", construct_null)


def quote_for_every_reader(dumper: type[yaml.SafeDumper]) -> None:
    """Make ``dumper`` quote text that YAML 1.2 *or* 1.1 would read as a non-string.

    Its YAML 1.1 resolvers (PyYAML's) stay first, so the numbers, booleans and
    nulls it writes keep their plain form.

    Args:
        dumper: The dumper class; the core schema's resolvers are added to its own.
    """
    for tag, pattern, first in CORE:
        dumper.add_implicit_resolver(tag, pattern, first)


def construct_int(loader: yaml.SafeLoader, node: Node) -> int:
    """Build an integer: ``42``, ``-7``, ``0x2a`` or ``0o52``.

    Raises:
        ConstructorError: Another form (under an explicit ``!!int``), or more
            digits than Python converts (``sys.get_int_max_str_digits``), in
            decimal, as the number would be written back.
    """
    text = _core_text(loader, node, INT, "an integer (like 42, 0x2a or 0o52)")
    base = _BASES.get(text[:2], 10)
    try:
        number = int(text) if base == 10 else int(text[2:], base)
        if base != 10:
            str(number)  # fails as the decimal text would have: saving writes it in decimal
    except ValueError:
        message = f"an integer of more than {sys.get_int_max_str_digits()} digits (Python's limit); quote it to keep it as text"
        raise ConstructorError(None, None, message, node.start_mark) from None
    return number


def construct_float(loader: yaml.SafeLoader, node: Node) -> float:
    """Build a float: ``1.5``, ``1e-3``, ``.5``, ``7``, ``.inf``, ``-.inf``, ``.nan``.

    Raises:
        ConstructorError: Another form (under an explicit ``!!float``).
    """
    text = _core_text(loader, node, FLOAT, "a number (like 1.5, 1e-3 or .inf)")
    special = _SPECIAL_FLOATS.get(text.lower())
    return float(text) if special is None else special


def construct_bool(loader: yaml.SafeLoader, node: Node) -> bool:
    """Build ``true`` or ``false`` (as ``true``, ``True`` or ``TRUE``).

    Raises:
        ConstructorError: Another word (under an explicit ``!!bool``).
    """
    return _core_text(loader, node, BOOL, "true or false").lower() == "true"


def construct_null(loader: yaml.SafeLoader, node: Node) -> None:
    """Build ``None`` from ``null``, ``~`` or nothing at all.

    Raises:
        ConstructorError: Anything else (under an explicit ``!!null``).
    """
    _core_text(loader, node, NULL, "null")


def _core_text(loader: yaml.SafeLoader, node: Node, form: re.Pattern[str], kind: str) -> str:
    """The scalar's text, which must have ``form`` (it can only fail to under an explicit tag)."""
    text = loader.construct_scalar(node)  # type: ignore[arg-type]  # a collection: ConstructorError
    if form.match(text) is None:
        shown = repr(text if len(text) <= 40 else text[:40] + "...")
        tag = node.tag.rsplit(":", 1)[-1]
        message = f"the tag !!{tag} needs {kind}, not {shown}; remove the tag, or fix the value"
        raise ConstructorError(None, None, message, node.start_mark)
    return text
