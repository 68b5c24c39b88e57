"""What a YAML 1.1 reader would have made of a plain scalar that statekit's YAML 1.2 reader takes as text.

``flag: yes`` and ``n: 1_000`` are a boolean and an integer in YAML 1.1 (PyYAML,
older tools) but text in YAML 1.2, which statekit reads: a field that expects a
boolean or a number then gets a string. The hint says what to write instead.
"""

from __future__ import annotations

import orjson
import yaml
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

_TAG = "tag:yaml.org,2002:"
_KINDS = {_TAG + "bool": "a boolean", _TAG + "int": "an integer", _TAG + "float": "a number"}
_LONGEST = 40
"""Longer scalars are not looked at (YAML 1.1's base-60 numbers are read in quadratic time)."""

_YAML_1_1 = Resolver()


def yaml11_hint(text: str, message: str) -> str | None:
    """``"YAML 1.2 reads yes as text, not a boolean: write true"``, or ``None``.

    Args:
        text: A plain scalar that was read as text.
        message: The problem with it (``expected a boolean, got a string``):
            there is a hint only when YAML 1.1's reading is what was expected.
    """
    if len(text) > _LONGEST:
        return None
    kind = _KINDS.get(_YAML_1_1.resolve(ScalarNode, text, (True, False)))  # type: ignore[no-untyped-call]  # PyYAML is untyped here
    expected = message.partition(", got")[0]
    if kind is None or not (kind in expected or (kind == "an integer" and _KINDS[_TAG + "float"] in expected)):
        return None
    meant = yaml.safe_load(text)  # PyYAML's own reading is YAML 1.1's
    return f"YAML 1.2 reads {text} as text, not {kind}: write {orjson.dumps(meant).decode()}"
