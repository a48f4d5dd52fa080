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


def _imports() -> dict[tuple[str, str], set[str]]:
    """(part, module file) -> the wwwproxy parts it imports (TYPE_CHECKING blocks aside)."""
    out: dict[tuple[str, str], set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).parts
        part = rel[0].removesuffix(".py")
        package = ["wwwproxy", *rel[:-1]]
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
                module = [*base, *(node.module.split(".") if node.module else [])]
                names = [module + [alias.name] for alias in node.names]
                for name in [module, *names]:
                    if len(name) > 1 and name[0] == "wwwproxy":
                        targets.add(name[1])
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.name.split(".")
                    if len(name) > 1 and name[0] == "wwwproxy":
                        targets.add(name[1])
        out[(part, str(path.relative_to(PACKAGE)))] = {
            t for t in targets if t != part and t in LAYERS
        }
    return out


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
