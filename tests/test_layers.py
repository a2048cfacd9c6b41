"""Imports go one way: a package imports only from itself and the packages below it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "pgdyno"
# Top to bottom; packages on one line share a rank (they may import each other).
LAYERS = [
    ["cli", "__main__"],
    ["fleet"],
    ["study"],
    ["campaign", "search"],
    ["provision"],
    ["compare"],
    ["runner"],
    ["workloads"],
    ["telemetry"],
    ["reports"],
    ["analysis"],
    ["results", "config", "targets"],
    ["options", "errors", "serde", "redact", "__init__"],
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, pgdyno module) of every import, at any depth (function-level included)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pgdyno"):
            out.append((node.lineno, node.module))
            if node.module == "pgdyno":  # from pgdyno import serde
                out += [(node.lineno, f"pgdyno.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("pgdyno")]
    return out


def backward_imports() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        own = _package(module)
        for line, target in _imports(path):
            other = _package(target)
            if other == "pgdyno" or other not in RANK or own not in RANK:
                continue
            if RANK[other] < RANK[own]:
                found.append(f"{path.relative_to(SRC)}:{line} ({own}) imports {target} "
                             f"({other})")
    return found


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert packages | modules <= set(RANK), sorted((packages | modules) - set(RANK))


def test_no_backward_imports() -> None:
    assert backward_imports() == []


def test_the_checker_sees_a_backward_import(tmp_path: Path) -> None:
    """The test above can fail: a results module importing the runner is caught."""
    bad = SRC / "results" / "_layer_probe.py"
    bad.write_text("def f():\n    from pgdyno.runner.bench import run_bench\n")
    try:
        assert any("_layer_probe" in line for line in backward_imports())
    finally:
        bad.unlink()
