"""Where a bench script works: a scratch directory of its own, removed when it ends, a
kept directory for runs read again later, and a check of the disk before anything starts.

Nothing goes into the current directory: scratch and kept directories live under
/var/tmp (the servers' data can be large, and the server's OS user must be able to enter
them), the figures under bench/results/ (``results.RESULTS_DIR``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pgdyno.config.units import human_bytes

BENCH_DIR = Path(__file__).resolve().parents[1]
ROOT = BENCH_DIR.parent
SCRATCH_ROOT = Path("/var/tmp")
"""Where scratch and kept directories go unless a script is told otherwise."""


def _enterable(path: Path) -> Path:
    # An embedded server runs as an unprivileged OS user, which must enter the directory.
    path.chmod(0o755)
    return path


@contextmanager
def scratch(name: str, parent: Path | None = None, keep: bool = False) -> Iterator[Path]:
    """A new directory ``pgdyno-bench-NAME-*`` under ``parent`` (/var/tmp), removed with
    everything in it when the block ends, unless ``keep`` (then its path is printed)."""
    root = Path(parent or SCRATCH_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    path = _enterable(Path(tempfile.mkdtemp(prefix=f"pgdyno-bench-{name}-", dir=root)))
    try:
        yield path
    finally:
        if keep:
            print(f"kept: {path}", file=sys.stderr)
        else:
            shutil.rmtree(path, ignore_errors=True)


def kept_dir(name: str, parent: Path | None = None) -> Path:
    """``/var/tmp/pgdyno-bench/NAME``, made if missing: for runs or searches a script
    leaves behind to be read again (another script, a report)."""
    path = Path(parent or SCRATCH_ROOT) / "pgdyno-bench" / name
    path.mkdir(parents=True, exist_ok=True)
    _enterable(path.parent)
    return _enterable(path)


def require_free(path: Path, need_bytes: int, what: str) -> None:
    """Exit with one line (code 1) when the file system of ``path`` (or its nearest
    existing parent) has less than ``need_bytes`` free for ``what``."""
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < need_bytes:
        sys.exit(f"{what} needs about {human_bytes(need_bytes)} free in {path}; "
                 f"{human_bytes(free)} is free (choose another directory or a smaller size)")
