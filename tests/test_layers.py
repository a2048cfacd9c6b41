"""Imports go one way, and never round in a circle.

The layers (docs/development/layers.md, whose table is built from LAYERS), top to bottom:
a package imports only from the packages below it. Packages on one rank sit side by side and
import neither each other nor anything above them. Every import counts, at any depth
(function-level, TYPE_CHECKING): a deferred import is still a dependency.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "pgdyno"

LAYERS = [
    ["__main__"],
    ["cli"],
    ["fleet"],
    ["study"],
    ["campaign", "search"],
    ["compare"],
    ["runner"],
    ["workloads"],
    ["telemetry"],
    ["reports"],
    ["analysis"],
    ["provision"],
    ["targets"],
    ["config"],
    ["results"],
    ["options", "errors", "serde", "redact", "units", "__init__"],
]
"""Top to bottom; docs/development/layers.md shows this list and says what each holds."""
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}

KNOWN_CIRCLES: list[set[str]] = []
"""Circles through a deferred import that are known and owned; a new one fails, and an entry
that no longer holds fails too, so that the list only shrinks."""


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under ``root`` (a package ``pgdyno``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path, known: dict[str, Path], deferred: bool = True) -> list[tuple[int, str]]:
    """(line, pgdyno module) of every import in ``path``: at any depth, or (``deferred``
    False) those that run when the module is imported (outside functions). ``from a import
    b`` names the module a.b when there is one, else a."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) \
                    and not deferred:
                continue
            if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module \
                    and child.module.split(".")[0] == "pgdyno":
                for alias in child.names:
                    sub = f"{child.module}.{alias.name}"
                    out.append((child.lineno, sub if sub in known else child.module))
            elif isinstance(child, ast.Import):
                out.extend((child.lineno, a.name) for a in child.names
                           if a.name.split(".")[0] == "pgdyno")
            visit(child)

    visit(_parsed(path, path.stat().st_mtime_ns))
    return out


@functools.cache
def _parsed(path: Path, _mtime_ns: int) -> ast.Module:
    """Each source file parsed once for the tests that walk it (the modification time in
    the key: a file changed in between is parsed again)."""
    return ast.parse(path.read_text())


def _package(module: str) -> str:
    """The layer a module belongs to: its package under pgdyno, or the top-level module's
    name (``pgdyno`` itself, and its ``__version__``, are ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__version__" else "__init__"


def backward_imports(root: Path = SRC) -> list[str]:
    """Every import that runs up the layers, or sideways between packages of one rank."""
    known = _modules(root)
    found = []
    for module, path in known.items():
        own = _package(module)
        for line, target in _imports(path, known):
            other = _package(target)
            if other == own or own not in RANK or other not in RANK:
                continue
            if RANK[other] <= RANK[own]:
                way = "up" if RANK[other] < RANK[own] else "sideways"
                found.append(f"{path.relative_to(root)}:{line} ({own}) imports {target} "
                             f"({other}): {way}")
    return found


def import_circles(root: Path = SRC, deferred: bool = True) -> list[set[str]]:
    """The modules that import each other round in a circle (strongly connected components
    of more than one module), each a set of dotted names."""
    known = _modules(root)
    graph = {m: {t for _, t in _imports(p, known, deferred) if t in known and t != m}
             for m, p in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return circles


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert packages | modules <= set(RANK), sorted((packages | modules) - set(RANK))


def test_no_backward_imports() -> None:
    assert backward_imports() == []


def test_no_circle_when_modules_are_imported() -> None:
    """What runs at import time never goes round: a circle there breaks on the first
    import of its second module."""
    assert import_circles(deferred=False) == []


def test_no_circle_through_deferred_imports() -> None:
    circles = import_circles()
    assert [c for c in circles if c not in KNOWN_CIRCLES] == []
    assert [c for c in KNOWN_CIRCLES if c not in circles] == [], \
        "a known circle is gone: remove it from KNOWN_CIRCLES"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pgdyno"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_sees_an_import_up_or_sideways(tmp_path: Path) -> None:
    """The tests above can fail: a deferred import up the layers, an import between two
    packages of one rank, and one between results and targets (one rank before the layers
    followed the design) are each caught."""
    root = _tree(tmp_path, {
        "__init__.py": "", "runner/__init__.py": "", "runner/bench.py": "",
        "campaign/__init__.py": "", "search/__init__.py": "", "targets/__init__.py": "",
        "results/__init__.py": "",
        "results/probe.py": "def f():\n    from pgdyno.runner.bench import run_bench\n",
        "campaign/probe.py": "from pgdyno import search\n",
        "results/manifest.py": "from pgdyno.targets import TargetSpec\n",
        "runner/fine.py": "from pgdyno.results import probe\nfrom pgdyno import __version__\n",
    })
    found = backward_imports(root)
    assert len(found) == 3, found
    assert any("results/probe.py:2 (results) imports pgdyno.runner.bench" in f for f in found)
    assert any("campaign/probe.py:1 (campaign) imports pgdyno.search (search): sideways" in f
               for f in found)
    assert any("results/manifest.py:1 (results) imports pgdyno.targets (targets): up" in f
               for f in found)


def test_the_checker_sees_a_circle(tmp_path: Path) -> None:
    """A circle closed by a function-level import is a deferred circle only."""
    root = _tree(tmp_path, {
        "__init__.py": "", "telemetry/__init__.py": "",
        "telemetry/recorder.py": "def start():\n    from pgdyno.telemetry import archiver\n",
        "telemetry/archiver.py": "from pgdyno.telemetry.recorder import start\n",
    })
    assert import_circles(root) == [{"pgdyno.telemetry.recorder", "pgdyno.telemetry.archiver"}]
    assert import_circles(root, deferred=False) == []
