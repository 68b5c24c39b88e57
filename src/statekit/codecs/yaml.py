"""YAML codec: plain JSON data <-> human-editable UTF-8 YAML, with libyaml.

What it writes, so that a person can read and fix a session file by hand:

- block style, keys in the order they were given (never sorted);
- multi-line text as literal blocks (``key: |``) wherever YAML allows it (text
  with trailing spaces, tabs or control characters falls back to a
  double-quoted string, which is always exact);
- non-ASCII text as itself, no ``\\u`` escapes; lines are never folded;
- no tags, anchors or aliases;
- text that YAML 1.1 or 1.2 would read as a number, boolean or null, quoted.

Saving, loading and saving again gives the same bytes.

What it reads: the safe subset only (no ``!!python`` tags, nothing runs), and
only what JSON could hold: aliases are refused (no "billion laughs"), and so
are merge keys (``<<``), ``!!binary``, ``!!set``, ``!!omap``, ``!!pairs`` and
``!!timestamp``; an unquoted date stays a string. An anchor that no alias
uses changes nothing and is let through. Plain scalars are resolved by the YAML
1.2 core schema (``no`` and ``10:30`` are text); see ``_yaml_schema``.

libyaml's C classes are used when PyYAML was built with them; the pure-Python
ones (four to six times slower) otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import yaml
from yaml.constructor import ConstructorError
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.representer import RepresenterError, SafeRepresenter

from statekit._limits import MAX_DEPTH, depth_message, too_deep
from statekit.codecs._positions import Path, Position, first_bad_value, nearest
from statekit.codecs._yaml_errors import marked_error, reader_error
from statekit.codecs._yaml_hints import yaml11_hint
from statekit.codecs._yaml_schema import quote_for_every_reader, read_core_schema
from statekit.errors import DocumentError, StateDumpError

if TYPE_CHECKING:
    _BaseDumper = yaml.SafeDumper
    _BaseLoader = yaml.SafeLoader
else:
    _BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SUFFIX = ".yaml"
WITH_LIBYAML: bool = _BaseLoader is not yaml.SafeLoader
"""Whether the fast libyaml classes are in use."""

_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_KINDS = {"int": "an integer", "float": "a number", "bool": "true/false", "null": "null", "seq": "a list", "map": "a mapping"}
_STR_ONLY = {str}
_NOT_JSON_TAGS = ("binary", "omap", "pairs", "set", "timestamp")
_MAX_WIDTH = 1 << 30
_ALIAS_REFUSED = "aliases are not allowed: this anchored node is reused by an alias (write it out again)"


class _Dumper(_BaseDumper):
    """A safe dumper that knows only JSON types and never writes aliases."""

    yaml_representers = {}  # noqa: RUF012 (PyYAML's class-level registry)
    yaml_multi_representers = {}  # noqa: RUF012

    def ignore_aliases(self, data: Any) -> bool:
        """Never write an anchor: a shared list is written out twice."""
        return True


def _represent_str(dumper: SafeRepresenter, value: str) -> ScalarNode:
    style = "|" if "\n" in value else None
    if not value.isascii() and WITH_LIBYAML:
        value = _HIDE.sub(_hide, value)
    return dumper.represent_scalar(_STR_TAG, value, style=style)


def _represent_dict(dumper: SafeRepresenter, value: dict[Any, Any]) -> MappingNode:
    if value and set(map(type, value)) != _STR_ONLY:
        raise RepresenterError("mapping keys must be strings", value)
    return dumper.represent_mapping(_MAP_TAG, value)


# libyaml takes characters beyond U+FFFF (emoji) for unprintable and would
# write "\U0001F600" in a double-quoted string, losing the literal block. Such
# a character (and, to stay reversible, any in U+E000..U+EBFF) is handed to
# libyaml as a pair of private-use characters, which it writes as they are,
# and the pair is turned back into the character in the output bytes.
_HIDE = re.compile("[\ue000-\uebff\U00010000-\U0010ffff]")
_SHOWN = re.compile(b"\xee[\x80-\x9f][\x80-\xbf]\xee[\xa0-\xaf][\x80-\xbf]")


def _hide(match: re.Match[str]) -> str:
    code = ord(match.group())
    code = code - 0x10000 if code >= 0x10000 else code - 0xE000 + 0x100000
    return chr(0xE000 + (code >> 10)) + chr(0xE800 + (code & 0x3FF))


def _show(match: re.Match[bytes]) -> bytes:
    pair = match.group().decode("utf-8")
    code = ((ord(pair[0]) - 0xE000) << 10) | (ord(pair[1]) - 0xE800)
    code = code + 0x10000 if code < 0x100000 else code - 0x100000 + 0xE000
    return chr(code).encode("utf-8")


_Dumper.add_representer(type(None), SafeRepresenter.represent_none)
_Dumper.add_representer(bool, SafeRepresenter.represent_bool)
_Dumper.add_representer(int, SafeRepresenter.represent_int)
_Dumper.add_representer(float, SafeRepresenter.represent_float)
_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(list, SafeRepresenter.represent_list)
_Dumper.add_representer(tuple, SafeRepresenter.represent_list)
_Dumper.add_representer(dict, _represent_dict)


class _Loader(_BaseLoader):
    """A safe loader that builds JSON data only and refuses aliases."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """Construct a node, refusing any node met a second time (an alias)."""
        if node in self.constructed_objects:
            raise ConstructorError(None, None, _ALIAS_REFUSED, node.start_mark)
        return super().construct_object(node, deep)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """Construct a mapping, refusing a key written twice (at the second one)."""
        if isinstance(node, MappingNode):
            _refuse_duplicates(node)
        return super().construct_mapping(node, deep=deep)


read_core_schema(_Loader)
quote_for_every_reader(_Dumper)


def _refuse_duplicates(node: MappingNode) -> None:
    """Refuse a key written twice, or one that is not a string (``1:``, ``null:``), as JSON would."""
    seen: set[str] = set()
    for key_node, _ in node.value:
        message = _key_problem(key_node, seen)
        if message is not None:
            raise ConstructorError(None, None, message, key_node.start_mark)
        seen.add(key_node.value)


def _key_problem(key_node: Node, seen: set[str]) -> str | None:
    """Why a mapping key cannot be a JSON key, or ``None``."""
    if key_node.tag == _MERGE_TAG:
        return "a merge key (<<) is YAML only (JSON has no such thing); write the keys out, or quote it"
    if not isinstance(key_node, ScalarNode):  # a collection, even one tagged !!str
        kind = "a list" if isinstance(key_node, SequenceNode) else "a mapping"
        return f"the key here is {kind}; keys must be strings"
    if key_node.tag != _STR_TAG:
        kind = _KINDS.get(key_node.tag.rsplit(":", 1)[-1], "not a string")
        return f"the key {key_node.value!r} is read as {kind}; keys must be strings (quote a scalar key)"
    if key_node.value in seen:
        return f"the key {key_node.value!r} appears twice in this mapping (the second would replace the first)"
    return None


def _refuse_tag(loader: yaml.SafeLoader, node: Node) -> Any:
    tag = node.tag.rsplit(":", 1)[-1]
    raise ConstructorError(None, None, f"the tag !!{tag} is not JSON data; write a plain value", node.start_mark)


for _tag in _NOT_JSON_TAGS:
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


def dumps(data: Any) -> bytes:
    """Encode plain JSON data as block-style UTF-8 YAML.

    Args:
        data: Plain JSON data.

    Returns:
        The bytes, ending with a newline.

    Raises:
        StateDumpError: A value is not JSON data (a lone surrogate, a non-``str``
            key, an object); the problem names its path.
    """
    if too_deep(data):
        raise StateDumpError([first_bad_value(data, int64=False)])
    try:
        out: bytes = yaml.dump(
            data,
            Dumper=_Dumper,
            allow_unicode=True,
            sort_keys=False,
            default_flow_style=False,
            width=_MAX_WIDTH,
            encoding="utf-8",
        )
    except (yaml.YAMLError, ValueError, RecursionError) as err:
        raise StateDumpError([first_bad_value(data, int64=False)]) from err
    return _SHOWN.sub(_show, out) if b"\xee" in out else out


def loads(raw: bytes, source: str | None = None) -> Any:
    """Decode YAML bytes with the safe loader (UTF-8, or UTF-16 with a BOM).

    Args:
        raw: The document.
        source: Where it came from (a file name), for error messages.

    Returns:
        The plain JSON data (``None`` for an empty document).

    Raises:
        DocumentError: A syntax error, an alias, a ``!!python`` or other
            non-JSON tag, a key written twice, nesting past ``MAX_DEPTH``;
            names the line and column.
    """
    try:
        check_depth(raw, source)
        return yaml.load(raw, Loader=_Loader)  # noqa: S506 (a safe loader)
    except yaml.MarkedYAMLError as err:
        raise marked_error(err, raw, source) from None
    except yaml.reader.ReaderError as err:
        raise reader_error(raw, err, source) from None


# libyaml's composer recurses in C and crashes the process on deep enough
# nesting, so depth is checked before composing. A block collection's column
# grows by at least one every two levels, and every flow level needs a bracket:
# when no line starts with a long run of spaces and "- "/"? "/": " indicators
# and there are few brackets, the document cannot be too deep (a few C-speed
# scans). Otherwise the parser's events are counted (iterative, about 10% of a
# load).
# (A flow level can take two levels, "[a: [b: ...": a list and a mapping.)


def check_depth(raw: bytes, source: str | None) -> None:
    """Refuse a document nested past ``MAX_DEPTH`` before libyaml composes it.

    Raises:
        DocumentError: Too deep; names the line and column where the limit is passed.
    """
    brackets = raw.count(b"[") + raw.count(b"{")
    if brackets < MAX_DEPTH // 4:
        run = re.compile(rb"^[ \t?:-]{%d}" % (MAX_DEPTH // 2 - 2 - brackets), re.MULTILINE)
        if run.search(raw) is None:
            return
    _count_depth(raw, source)


def _count_depth(raw: bytes, source: str | None) -> None:
    depth = 0
    for event in yaml.parse(raw, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
                raise DocumentError(depth_message(), source=source, line=line, column=column)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def locate(raw: bytes, paths: Iterable[Path]) -> dict[Path, Position]:
    """Find where paths sit in a YAML document (for error messages only).

    Args:
        raw: The document, as it was loaded.
        paths: The paths of the problems.

    Returns:
        ``path -> (line, column)``; a mapping member is placed at its key, a
        path missing from the document at its nearest existing ancestor.
    """
    targets = [tuple(path) for path in paths]
    try:
        root = yaml.compose(raw, Loader=_Loader)
    except yaml.YAMLError:
        return {}
    found: dict[Path, Position] = {}
    members: dict[int, dict[str, tuple[Node, Mark]]] = {}
    for target in targets:
        _walk(root, target, found, members)
    return nearest(found, targets)


def explain(raw: bytes, problems: Iterable[tuple[Path, str]]) -> dict[Path, str]:
    """Hints for values read as text that YAML 1.1 reads as what was expected (``yes``, ``1_000``), for error messages only.

    Args:
        raw: The document, as it was loaded.
        problems: The path and message of each problem about a string.

    Returns:
        ``path -> hint`` for each path whose value is such a plain scalar.
    """
    try:
        root = yaml.compose(raw, Loader=_Loader)
    except yaml.YAMLError:
        return {}
    hints: dict[Path, str] = {}
    members: dict[int, dict[str, tuple[Node, Mark]]] = {}
    for path, message in problems:
        node: Node | None = root
        for segment in path:
            step = _child(node, segment, members) if node is not None else None
            node = step[0] if step is not None else None
        if isinstance(node, ScalarNode) and not node.style and node.tag == _STR_TAG:  # plain: not quoted
            hint = yaml11_hint(node.value, message)
            if hint is not None:
                hints[tuple(path)] = hint
    return hints


def _walk(root: Node | None, target: Path, found: dict[Path, Position], members: dict[int, dict[str, tuple[Node, Mark]]]) -> None:
    if root is None:
        return
    node, found[()] = root, _position(root.start_mark)
    for depth, segment in enumerate(target, 1):
        step = _child(node, segment, members)
        if step is None:
            return
        node, mark = step
        found[target[:depth]] = _position(mark)


def _child(node: Node, segment: str | int, members: dict[int, dict[str, tuple[Node, Mark]]]) -> tuple[Node, Mark] | None:
    """The child at ``segment`` and where to point at it (a member's key).

    A mapping's members are indexed once (``members``), so that thousands of
    problems in one mapping cost one pass, not one each.
    """
    if isinstance(node, SequenceNode) and isinstance(segment, int) and 0 <= segment < len(node.value):
        item: Node = node.value[segment]
        return item, item.start_mark
    if isinstance(node, MappingNode) and isinstance(segment, str):
        index = members.get(id(node))
        if index is None:
            index = members[id(node)] = {}
            for key, value in reversed(node.value):  # the first of equal keys wins, as in a scan
                if isinstance(key, ScalarNode):
                    index[key.value] = (value, key.start_mark)
        return index.get(segment)
    return None


def _position(mark: Mark) -> Position:
    return mark.line + 1, mark.column + 1
