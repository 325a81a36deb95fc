"""Imports run one way: cli -> commands -> library (tying); the app reads through explorer only.

Every import statement counts, also those inside functions (a cycle through a deferred
import is still a cycle). Inside the library the sub-packages run one way too: loading,
analysis and cache (what the app reads with) never import the torch-heavy lens or toylab.
The app may start the writer only as a child process, and only where listed below.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tying", "precompute", "explorer")
APP = ("explorer", "views", "app")

LIBRARY_DEPENDS_ON = {
    "loading": set(),  # reading weights, tokenizers, logs and corpora: nothing else of the library
    "analysis": set(),  # the numerics: pure functions on arrays (their device from tying.device)
    "cache": {"analysis"},  # summary statistics; the analyses' summary fields
    "lens": {"loading", "analysis", "cache"},  # models on a device; convergence; atomic lens files
    "toylab": {"loading", "analysis"},  # the corpus and tokenizers; row cosines of the trained matrices
}
"""Which of the library's sub-packages each may import (besides itself and the library's root
modules: tying.errors, tying.device, tying.memory, tying.registry). lens and toylab (torch
models) import neither each other nor are imported by the rest."""

TORCH = ("torch", "transformers", "safetensors.torch")
"""Imports that load torch."""

TORCH_AT_TOP = {
    "tying.analysis.align": "the alignment maps are fitted with torch (on the GPU when present)",
    "tying.analysis.align_table": "Table 1's products are accumulated with torch in one pass (on the GPU when present)",
    "tying.analysis.neighbours": "exact k-NN runs in torch on the GPU when present",
}
"""The modules of tying.analysis and tying.cache that import torch when imported, and why.
The rest stay torch-free, so the app (and a command that only reads a cache) never loads it."""

CHILD_PROCESSES = {
    "explorer.trajectory_worker": "the Lens page (through explorer.live) traces visitors' own texts in one warm "
                                  "child process per cache (`python -m precompute serve-trajectory`): the writer "
                                  "loads the models there, and the app process stays torch-free",
}
"""App modules that start the writer (precompute) as a child process, and why: not an
import, but an edge from the reader to the writer all the same. A new one must be listed."""

RENDER = "explorer.render"
"""The render layer: the cache readers, chart builders, tables, figure registry, figure pack,
spec export and tour, with no Streamlit. The app draws with it, and the writer's read-side
commands (the figure pack, the static site) import it and nothing else of the app."""

_LAUNCH_MODULES = ("subprocess", "multiprocessing", "runpy", "pty")
_LAUNCH_OS = re.compile(r"^(system|popen|exec\w*|spawn\w*|posix_spawn\w*|fork\w*)$")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    files += list((ROOT / "views").rglob("*.py")) + [ROOT / "app.py"]
    return {_module_name(p): p for p in files}


@cache
def _tree(name: str) -> ast.Module:
    return ast.parse(_modules()[name].read_text())


def _imports(tree: ast.AST, *, top_only: bool = False) -> list[str]:
    """Every module an import statement names (``from a import b`` names a and a.b); with
    ``top_only`` only those that run on import (not inside a function)."""
    found = []

    def visit(node: ast.AST) -> None:
        if top_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.extend([node.module] + [f"{node.module}.{a.name}" for a in node.names])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {t for t in _imports(_tree(name)) if t in modules and t != name} for name in modules}


def _loads_torch(imports: list[str]) -> list[str]:
    return sorted({t for t in imports if any(t == m or t.startswith(m + ".") for m in TORCH)})


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
            if top in APP:
                assert dep_top != "precompute", f"the app's {name} imports the writer {dep}"
            if top == "precompute":
                assert dep_top in ("tying", "precompute") or _in_render(dep), f"{name} imports {dep}"
            if _in_render(name):
                assert dep_top == "tying" or _in_render(dep), f"the render layer's {name} imports {dep}"


def test_pages_import_the_app_only():
    """views/*.py read through explorer (the readers, the render layer, explorer.words for the
    paper's names and numbers), never the library or the writer."""
    for name in _modules():
        if name.startswith("views."):
            for dep in _imports(_tree(name)):
                top = dep.split(".")[0]
                assert top not in ("tying", "precompute"), f"the page {name} imports {dep}: read it through explorer"


def _in_render(name: str) -> bool:
    return name == RENDER or name.startswith(RENDER + ".")


def test_the_render_layer_imports_no_streamlit():
    """Every import of explorer.render (deferred ones too): no Streamlit, so a command that draws
    figures runs without it."""
    for name in _modules():
        if _in_render(name):
            found = [t for t in _imports(_tree(name)) if t.split(".")[0] == "streamlit"]
            assert not found, f"{name} imports {found}"


def _sub_package(name: str) -> str | None:
    """``tying.cache.store`` -> ``cache``; None for tying itself and its top-level modules (tying.errors)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (ROOT / "tying" / parts[1]).is_dir()) else None


def test_the_library_sub_packages_point_one_way():
    graph = _graph()
    seen = set()
    for name, deps in graph.items():
        if not name.startswith("tying"):
            continue
        sub = _sub_package(name)
        seen.add(sub)
        for dep in deps:
            dep_sub = _sub_package(dep)
            if dep_sub is None or dep_sub == sub:
                continue  # tying.errors (and the package itself) sit under every sub-package
            assert sub is not None, f"{name}, at the library's root, imports the sub-package module {dep}"
            assert sub in LIBRARY_DEPENDS_ON, f"a new sub-package tying.{sub}: give it its place in LIBRARY_DEPENDS_ON"
            assert dep_sub in LIBRARY_DEPENDS_ON[sub], (
                f"{name} imports {dep}: tying.{sub} may import only "
                f"{', '.join(sorted(LIBRARY_DEPENDS_ON[sub]))} (and tying.errors)")
    assert set(LIBRARY_DEPENDS_ON) <= seen  # the walk saw every sub-package


def test_analysis_and_cache_import_no_torch_at_the_top():
    loaders = {}
    for name in _modules():
        if name.startswith(("tying.analysis", "tying.cache")):
            found = _loads_torch(_imports(_tree(name), top_only=True))
            if found:
                loaders[name] = found
    assert sorted(loaders) == sorted(TORCH_AT_TOP), (
        f"modules of tying.analysis / tying.cache importing torch when imported: {loaders}; import it inside "
        "the function that computes, or list the module in TORCH_AT_TOP with the reason")


def test_nothing_the_app_imports_loads_torch():
    """Follow every import of the app (deferred ones too: the app process runs them): none loads torch."""
    modules = _modules()
    todo = [m for m in modules if m.split(".")[0] in APP]
    reached: dict[str, str] = {m: m for m in todo}  # module -> the app module it was reached from
    while todo:
        name = todo.pop()
        imports = _imports(_tree(name))
        assert not _loads_torch(imports), (
            f"{name} (imported by the app, from {reached[name]}) imports {_loads_torch(imports)}")
        for dep in imports:
            for mod in (dep, dep.rpartition(".")[0]):  # `from tying.cache import reference`: the module
                if mod in modules and mod not in reached:
                    reached[mod] = reached[name]
                    todo.append(mod)
    assert "tying.cache.store" in reached and "explorer.live" in reached


def _launcher(tree: ast.Module) -> str | None:
    """How a module can start another process, if it can: a process module imported, or os.system & co."""
    for target in _imports(tree):
        if target.split(".")[0] in _LAUNCH_MODULES:
            return target
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" \
                and _LAUNCH_OS.match(node.attr):
            return f"os.{node.attr}"
        if isinstance(node, ast.ImportFrom) and node.module == "os" \
                and any(_LAUNCH_OS.match(a.name) for a in node.names):
            return "os"
    return None


def _names_precompute(tree: ast.Module) -> bool:
    """Whether a command line in the module runs precompute: ``[..., "-m", "precompute", ...]``,
    ``["precompute", ...]`` (the console script), or one string "... -m precompute ..."."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in node.elts]
            if words[:1] == ["precompute"] or any(a == "-m" and (b == "precompute" or (b or "").startswith(
                    "precompute.")) for a, b in pairwise(words)):
                return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and re.search(r"-m\s+precompute\b", node.value):
            return True
    return False


def test_the_app_starts_the_writer_only_in_the_listed_child_processes():
    """An app module that can start a process and names precompute's command line is an edge from
    the reader to the writer: allowed only in CHILD_PROCESSES. One that starts anything else fails too."""
    found = {}
    for name in _modules():
        if name.split(".")[0] not in APP:
            continue
        tree = _tree(name)
        how = _launcher(tree)
        if how:
            found[name] = "precompute" if _names_precompute(tree) else f"another program (via {how})"
    assert found == dict.fromkeys(CHILD_PROCESSES, "precompute"), (
        f"app modules that start processes: {found}; the app may run the writer only in a child process listed, "
        "with its reason, in CHILD_PROCESSES")


def test_the_launch_check_sees_a_child_process():
    """The detector itself: a module like explorer/trajectory_worker.py is found, a displayed command is not."""
    live = ast.parse('import subprocess, sys\ncmd = [sys.executable, "-m", "precompute", "trajectory"]\n'
                     "subprocess.run(cmd)\n")
    shown = ast.parse('HELP = "python -m precompute demo"\n')
    shell = ast.parse('import os\nos.system("python -m precompute pair --tied a --untied b")\n')
    assert _launcher(live) == "subprocess" and _names_precompute(live)
    assert _launcher(shown) is None
    assert _launcher(shell) == "os.system" and _names_precompute(shell)


def test_no_benchmark_imports_the_tests():
    """bench/ runs from the library and its own helpers (bench/screenshots.py): tests/ is no
    library of theirs, so a change to a test cannot break a benchmark."""
    found = {p.name: [t for t in _imports(ast.parse(p.read_text())) if t.split(".")[0] == "tests"]
             for p in sorted((ROOT / "bench").glob("*.py"))}
    assert len(found) > 10  # the walk saw the benchmarks
    assert {name: t for name, t in found.items() if t} == {}, "benchmarks importing tests/"


def test_the_benchmark_check_sees_an_import_of_the_tests():
    """The detector itself: deferred imports count, a path in a docstring does not."""
    for source in ("from tests.tiny_models import tiny_config\n", "import tests.webgl\n",
                   "def main():\n    from tests import webgl\n"):
        assert any(t.split(".")[0] == "tests" for t in _imports(ast.parse(source))), source
    assert _imports(ast.parse('"""Builds models as tests/tiny_models.py does."""\n')) == []


ABOVE_THE_LIBRARY = re.compile(r"\b(precompute|explorer|views)[./][A-Za-z_]")
"""A module or file of the writer, the render layer or the app, as a string names it."""


def _strings(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_string_in_the_library_names_a_module_above_it():
    """tying/ is imported by the writer, the render layer and the app and names none of them, in code
    or in a docstring: no "module:function" for a layer above to resolve, no path of its files (the
    registry is one entry per layer, joined by the analysis's name)."""
    found = {name: hits for name in _modules() if name.split(".")[0] == "tying"
             if (hits := [s for s in _strings(_tree(name)) if ABOVE_THE_LIBRARY.search(s)])}
    assert found == {}, found


def test_the_string_check_sees_a_module_above():
    tree = ast.parse('"""Built by precompute/stages.py."""\nx = "explorer.render.cka:FIGURES"\ny = "python -m precompute demo"\n')
    assert [s for s in _strings(tree) if ABOVE_THE_LIBRARY.search(s)] == ["Built by precompute/stages.py.",
                                                                          "explorer.render.cka:FIGURES"]


def test_the_app_imports_nothing_that_reads_model_files():
    """The app finds a cache's models through the cache folder's layout (tying.layout) and runs them
    only in its child process: nothing of the explorer, the pages or app.py imports tying.loading."""
    found = {name: deps for name in _modules() if name.split(".")[0] in APP
             if (deps := [d for d in _imports(_tree(name)) if d.startswith("tying.loading")])}
    assert found == {}, found


def test_every_analysis_has_a_stage_figures_and_a_page():
    """The four registries joined by name: the cache's (tying.registry), the writer's stages
    (precompute.stages.STAGES, in the registry's order), the render layer's figures (by the stages
    they draw) and the app's pages (explorer.render.pages)."""
    from explorer.render import figures, pages
    from precompute.stages import STAGES
    from tying import registry

    names = [a.name for a in registry.ANALYSES]
    assert list(STAGES) == names
    assert all(STAGES[a].build is not None for a in registry.PAIR_STAGES)
    assert {a: bool(figures.BY_ANALYSIS[a]) for a in names} == dict.fromkeys(names, True)
    assert {a: pages.page_of(a) is not None for a in names} == dict.fromkeys(names, True)
    for page in pages.PAGES:
        assert (ROOT / "views" / page.script).is_file(), page
        assert set(page.shows) <= set(names), page
        assert not page.needs or (page.lacks and page.command), page  # what a cache lacks, and the command that adds it
        script = (ROOT / "views" / page.script).read_text()  # its title and needs come from its entry, once
        assert "st.title(" not in script and "frame.require(" not in script, page.path
        assert f'frame.opened("{page.path}"' in script or page.path == "tour", page.path  # a slide has no page title


LIGHT = ("torch", "transformers", "streamlit")
"""What a command that reads a cache (or only prints its help) never loads."""


@pytest.mark.slow
def test_commands_that_read_a_cache_load_neither_torch_nor_streamlit(tmp_path):
    """``--help``, ``summary``, ``figures`` and ``site`` run in a fresh interpreter; afterwards
    none of LIGHT is in sys.modules (the CLI loads a command's modules only when it runs)."""
    import subprocess
    import sys

    from precompute.fixtures import build_synthetic_cache

    cache = build_synthetic_cache(tmp_path, lens=False, training=False)
    runs = [["--help"], ["summary", str(cache), "--json"],
            ["figures", str(cache), "--out", str(tmp_path / "fig"), "--format", "svg"],
            ["site", str(cache), "--out", str(tmp_path / "site"), "--formats", "svg"]]
    # one interpreter runs the four in turn and reads sys.modules after each: a module a command
    # loaded stays loaded, so each reading holds what that command or one before it brought in
    probe = ("import contextlib, io, json, sys\nfrom precompute.cli import main\n"
             "for argv in json.loads(sys.argv[1]):\n"
             "    with contextlib.redirect_stdout(io.StringIO()):\n"
             "        try:\n            code = main(argv)\n"
             "        except SystemExit as e:\n            code = e.code\n"
             f"    print(json.dumps([argv[0], code, sorted({{m.split('.')[0] for m in sys.modules}} & "
             f"set({list(LIGHT)!r}))]), flush=True)\n")
    out = subprocess.run([sys.executable, "-c", probe, json.dumps(runs)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    readings = [json.loads(line) for line in out.stdout.strip().splitlines() if line.startswith("[")]
    assert [r[0] for r in readings] == [argv[0] for argv in runs], out.stderr[-2000:]
    for command, code, loaded in readings:
        assert code == 0, (command, out.stderr[-2000:])
        assert loaded == [], f"precompute {command} loaded {loaded}"


MAX_LINES = 450


def test_no_module_is_over_450_lines():
    """A module that grows past this is split along a seam (the pack into provenance, typesetting,
    formats and assembly; the claims beside their verdict rules)."""
    long = {str(p.relative_to(ROOT)): n for p in _modules().values()
            if p.relative_to(ROOT).parts[0] in ("tying", "explorer", "precompute", "views")
            and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines: {long}"
