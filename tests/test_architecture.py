"""The house's layering, read from the source: which package of statekit may import which (docs/architecture.md).

Every ``import`` of every module under src/statekit counts, wherever it is
written: at the top, inside a function, or under ``if TYPE_CHECKING:``.
``python tests/test_architecture.py`` prints the graph the tests check: each
package with the packages it imports. The rooms of docs/architecture.md name
every module, one line each.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("statekit.errors", "statekit._limits"),
    ("statekit.codecs",),
    ("statekit.values",),
    ("statekit.state",),
    ("statekit.session",),
    ("statekit",),
    ("statekit.cli", "statekit.testing"),
    ("statekit.__main__",),
)
"""The packages from the ground up. A module imports modules of its own package
or of a lower layer, never one beside it or above it. ``statekit`` is the
package's ``__init__``: the public names, above the sessions it re-exports."""


@dataclass(frozen=True)
class Import:
    """One statekit-internal import: who imports what, and where it is written."""

    importer: str
    target: str
    names: tuple[str, ...]
    where: str

    def __str__(self) -> str:
        names = f" import {', '.join(self.names)}" if self.names else ""
        return f"{self.where}: from {self.target}{names}" if names else f"{self.where}: import {self.target}"


def module_name(path: Path) -> str:
    """``statekit.session._base`` for src/statekit/session/_base.py; a package is named by its folder."""
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(path): path for path in sorted((SRC / "statekit").rglob("*.py"))}


def package_of(module: str) -> str:
    """The entry of LAYERS that ``module`` belongs to (the longest that matches)."""
    owners = [pkg for layer in LAYERS for pkg in layer if module == pkg or module.startswith(pkg + ".")]
    assert owners, f"{module} belongs to no layer of LAYERS: add its package there and to docs/architecture.md"
    return max(owners, key=len)


def layer_of(module: str) -> int:
    """The index in LAYERS of the package ``module`` belongs to."""
    package = package_of(module)
    return next(index for index, layer in enumerate(LAYERS) if package in layer)


def imports_of(module: str) -> Iterator[Import]:
    """Every statekit import that ``module`` writes, at any depth of its syntax tree."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        where = f"{path.relative_to(SRC.parent)}:{node.lineno}" if isinstance(node, ast.stmt) else ""
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "statekit":
                    yield Import(module, alias.name, (), where)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] == "statekit":
                yield Import(module, target, tuple(alias.name for alias in node.names), where)


@functools.cache
def all_imports() -> list[Import]:
    """The statekit-internal imports of every module under src/statekit (read once; do not change the list)."""
    return [found for module in MODULES for found in imports_of(module)]


def modules_imported(found: Import) -> list[str]:
    """The modules an import runs: its target, or the submodules it names (``from statekit.codecs import json``)."""
    submodules = [f"{found.target}.{name}" for name in found.names if f"{found.target}.{name}" in MODULES]
    return submodules or [found.target]


def test_every_module_belongs_to_a_layer() -> None:
    assert len(MODULES) > 90
    for module in MODULES:
        package_of(module)


def upward(imports: list[Import]) -> list[str]:
    """The imports that run beside or up the layers, each named with its file and line."""
    return [
        f"{found} ({package_of(found.importer)} may not import {package_of(found.target)})"
        for found in imports
        if package_of(found.importer) != package_of(found.target) and layer_of(found.importer) <= layer_of(found.target)
    ]


def private(imports: list[Import]) -> list[str]:
    """The imports that take another package's underscore names, each named with its file and line."""
    return [
        f"{found} (a private name of {package_of(found.target)})"
        for found in imports
        if package_of(found.importer) != package_of(found.target)
        and any(name.startswith("_") and name != "__version__" for name in found.names)
    ]


def test_imports_run_one_way_down() -> None:
    """A module imports its own package or a lower layer: none beside it, none above, not even in a function."""
    assert upward(all_imports()) == []


def test_imports_are_counted_at_every_depth() -> None:
    """The reader sees function-level and TYPE_CHECKING imports too (so that a hidden one cannot slip past)."""
    found = {(i.importer, i.target) for i in all_imports()}
    assert ("statekit.session._open", "statekit.session.redis") in found  # inside open_session()
    assert ("statekit.session", "statekit.session.redis") in found  # under TYPE_CHECKING and in __getattr__


def test_no_private_names_imported_across_packages() -> None:
    """No module takes another package's underscore names (``from statekit.x import _helper``)."""
    assert private(all_imports()) == []


def private_session(imports: list[Import]) -> list[str]:
    """The imports of ``cli/`` and ``testing/`` that reach a private module or name of ``statekit.session``."""
    return [
        f"{found} (not the public session API)"
        for found in imports
        if package_of(found.importer) in ("statekit.cli", "statekit.testing")
        and package_of(found.target) == "statekit.session"
        and (
            any(part.startswith("_") for part in found.target.split("."))
            or any(name.startswith("_") for name in found.names)
        )
    ]


def test_cli_and_testing_use_the_public_session_api_only() -> None:
    """The command and the test kit import public modules and names of ``statekit.session`` only (issue 25)."""
    assert private_session(all_imports()) == []


def test_a_private_session_import_is_named() -> None:
    """The check sees a private session module or name, and names its file and line."""
    module = Import("statekit.cli._files", "statekit.session._companion", ("split",), "statekit/cli/_files.py:4")
    name = Import("statekit.testing._models", "statekit.session", ("_base",), "statekit/testing/_models.py:5")
    public = Import("statekit.cli._files", "statekit.session.files", ("companion_path",), "statekit/cli/_files.py:6")
    inside = Import("statekit.session.json", "statekit.session._files", ("FileSession",), "statekit/session/json.py:7")
    assert private_session([module, name, public, inside]) == [
        "statekit/cli/_files.py:4: from statekit.session._companion import split (not the public session API)",
        "statekit/testing/_models.py:5: from statekit.session import _base (not the public session API)",
    ]


def test_no_import_circles() -> None:
    """No module reaches itself through imports: the graph of modules is a tree of layers, no loops."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for found in all_imports():
        graph[found.importer].update(target for target in modules_imported(found) if target != found.importer)
    circles = [circle for circle in strongly_connected(graph) if len(circle) > 1]
    assert circles == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively; each circle as a sorted list of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def test_every_module_has_its_line_in_the_rooms() -> None:
    """docs/architecture.md's rooms name every module under src/statekit, and no module that is gone."""
    text = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rooms = text.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^- `([\w/]+\.py)`: \S", rooms, flags=re.MULTILINE))
    files = {str(path.relative_to(SRC / "statekit")) for path in MODULES.values()}
    assert sorted(files - named) == [], "add a line '- `path.py`: its one job' to the rooms of docs/architecture.md"
    assert sorted(named - files) == [], "docs/architecture.md's rooms name modules that do not exist"


def test_a_wrong_import_is_named() -> None:
    """The checks see an import that runs back up, and name it with its file and line."""
    up = Import("statekit.values.plain", "statekit.session", ("SessionBase",), "statekit/values/plain.py:9")
    beside = Import("statekit.testing._models", "statekit.cli._shared", ("OK",), "statekit/testing/_models.py:3")
    taken = Import("statekit.cli._show", "statekit.session._loading", ("_helper", "misplaced"), "statekit/cli/_show.py:7")
    within = Import("statekit.session._base", "statekit.session._saving", ("_helper",), "statekit/session/_base.py:2")
    assert upward([up, beside, taken, within]) == [
        "statekit/values/plain.py:9: from statekit.session import SessionBase"
        " (statekit.values may not import statekit.session)",
        "statekit/testing/_models.py:3: from statekit.cli._shared import OK (statekit.testing may not import statekit.cli)",
    ]
    assert private([up, beside, taken, within]) == [
        "statekit/cli/_show.py:7: from statekit.session._loading import _helper, misplaced"
        " (a private name of statekit.session)"
    ]
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"], ["d"]]


if __name__ == "__main__":
    edges: dict[str, set[str]] = {}
    for found in all_imports():
        if package_of(found.importer) != package_of(found.target):
            edges.setdefault(package_of(found.importer), set()).add(package_of(found.target))
    for layer in reversed(LAYERS):
        for package in layer:
            sys.stdout.write(f"{package:20} -> {', '.join(sorted(edges.get(package, ()))) or '(nothing)'}\n")


MAX_MODULE_LINES = 400
"""A module longer than this holds more than one job: split it along a real seam (issue 25)."""


def test_every_module_is_short_and_says_its_job_first() -> None:
    too_long, silent = [], []
    for path in sorted((SRC / "statekit").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
        if not isinstance(ast.get_docstring(ast.parse(text)), str):
            silent.append(str(path.relative_to(SRC)))
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"
    assert not silent, f"modules without a docstring saying their job: {silent}"
