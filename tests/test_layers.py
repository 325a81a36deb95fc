"""Imports run one way: cli -> commands -> library (tying); the app reads through explorer only.

Every import statement counts, also those inside functions (a cycle through a deferred
import is still a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tying", "precompute", "explorer")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    files += list((ROOT / "views").rglob("*.py")) + [ROOT / "app.py"]
    modules = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t in modules and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    path: list[str] = []
    cycles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert len(graph) > 30  # the walk saw the project's modules
    assert cycles == [], "import cycles: " + "; ".join(cycles)


def test_layers_point_one_way():
    graph = _graph()
    for name, deps in graph.items():
        top = name.split(".")[0]
        for dep in deps:
            dep_top = dep.split(".")[0]
            if top == "tying":
                assert dep_top == "tying", f"the library {name} imports {dep}"
            if top in ("explorer", "views", "app"):
                assert dep_top != "precompute", f"the app's {name} imports the writer {dep}"
            if top == "precompute":
                assert dep_top in ("tying", "precompute"), f"{name} imports {dep}"
