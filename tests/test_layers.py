"""The package's layers point one way (../shared/DESIGN.md): pure rules -> archive -> the
recording engine -> proxy / fetch / commands -> app wiring -> CLI.  Read from the source with
``ast``, so a new upward import or cycle fails here before it tangles the code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "wwwproxy"

#: each top-level module or subpackage and its layer; an import may only go to a lower layer
#: or to a sibling of the same layer (without a cycle)
LAYERS = {
    "__init__": 0,
    "__main__": 6,
    "url": 0,
    "http": 0,
    "config": 0,
    "fsutil": 0,
    "allocator": 0,
    "archive": 1,
    "urldb": 1,
    "recording": 2,
    "proxy": 3,
    "fetch": 3,
    "commands": 4,
    "app": 5,
    "cli": 6,
}


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package's ``__init__`` by the
    package's)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _module_imports() -> dict[str, set[str]]:
    """Each module -> the package's modules it imports when it runs (TYPE_CHECKING blocks
    aside; anywhere in the file, a function's body too): for ``from X import y``, ``X.y``
    when that is a module, else ``X``."""
    modules = _modules()
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body
            for node in ast.walk(stmt)
        }
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
                for alias in node.names:
                    if f"{module}.{alias.name}" in modules:
                        targets.add(f"{module}.{alias.name}")
                    elif module in modules:
                        targets.add(module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in modules)
        out[name] = targets - {name}
    return out


def _part(module: str) -> str:
    """The top-level module or subpackage a module belongs to (its layer's key)."""
    return module.split(".")[1] if "." in module else "__init__"


def _imports() -> dict[tuple[str, str], set[str]]:
    """(part, module file) -> the wwwproxy parts it imports (TYPE_CHECKING blocks aside)."""
    modules = _modules()
    return {
        (_part(name), str(modules[name].relative_to(PACKAGE))): {
            _part(t) for t in targets if _part(t) != _part(name) and _part(t) in LAYERS
        }
        for name, targets in _module_imports().items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: each group of modules that import one another,
    directly or through others (sorted)."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph.get(start, ()))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return seen

    reached = {node: reach(node) for node in graph}
    groups = {
        tuple(sorted({node} | {other for other in reached[node] if node in reached[other]}))
        for node in graph
        if node in reached[node]
    }
    return sorted(list(group) for group in groups)


def test_every_part_has_a_layer():
    parts = {p.name.removesuffix(".py") for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert parts <= set(LAYERS), parts - set(LAYERS)


@pytest.mark.parametrize(("source", "path", "targets"), [(*k, v) for k, v in _imports().items()])
def test_imports_point_down(source, path, targets):
    upward = {t for t in targets if LAYERS[t] > LAYERS[source]}
    assert not upward, f"{path} imports {sorted(upward)} from a higher layer"


def test_no_cycles_between_parts():
    graph: dict[str, set[str]] = {}
    for (source, _), targets in _imports().items():
        graph.setdefault(source, set()).update(targets)
    both = sorted(
        f"{a}<->{b}" for a in graph for b in graph[a] if a < b and a in graph.get(b, set())
    )
    assert not both


@pytest.mark.parametrize(
    ("graph", "cycles"),
    [
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}, [["a", "b", "c"], ["d"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_cycles_are_found(graph, cycles):
    assert _cycles(graph) == cycles


def test_no_import_cycles_between_modules():
    """Inside a package too: a module that imports another which imports it back (at run
    time; a cycle only type checking sees is allowed) works only in one import order."""
    assert _cycles(_module_imports()) == []


def test_proxy_server_is_built_only_by_the_wiring():
    users = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "ProxyServer" in p.read_text(encoding="utf-8")
        and p.relative_to(PACKAGE).parts[0] not in ("proxy", "app.py")
    ]
    assert not users


def test_every_package_folder_is_a_package():
    """setuptools' find_packages (pyproject) ships only folders with an ``__init__.py``: a
    folder without one works from a checkout but is missing from ``pip install .``."""
    folders = [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    missing = [str(p.relative_to(PACKAGE)) for p in folders if not (p / "__init__.py").exists()]
    assert not missing
