"""Reading finished runs for comparisons, journals and context reports.

A run is read from its directory only (manifest.json, summary.json, optional telemetry and
notes.md), so every figure derived here can be traced back to a file of that run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno import serde
from pgdyno.analysis.summary import ClientSummary, IterationSummary, RunSummary, load_summary
from pgdyno.errors import UsageError
from pgdyno.results.index import find_run
from pgdyno.results.manifest import load_manifest, manifest_to_dict

NOTES_FILE = "notes.md"


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]
    summary: RunSummary | None
    telemetry: dict[str, Any] | None = None
    """A telemetry summary as a plain dict (optional: runs without samplers have none)."""
    notes: list[str] = field(default_factory=list)
    role: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    @property
    def status(self) -> str:
        return str(self.manifest.get("status", "unknown"))

    @property
    def started_at(self) -> str:
        return str(self.manifest.get("started_at") or "")

    @property
    def workload(self) -> str:
        return str(self.manifest.get("workload", "?"))

    @property
    def config_name(self) -> str:
        return str((self.manifest.get("config") or {}).get("name", "default"))

    @property
    def label(self) -> str:
        """The config as the user named it (a campaign's label, else config + --set)."""
        if self.role.get("label"):
            return str(self.role["label"])
        sets = sorted(self.pg_settings_overrides())
        return self.config_name + (" + " + ", ".join(sets) if sets else "")

    def pg_settings_overrides(self) -> list[str]:
        sources = (self.manifest.get("config") or {}).get("sources") or {}
        settings = (self.manifest.get("config") or {}).get("pg_settings") or {}
        return [f"{k}={settings.get(k)}" for k, src in sources.items()
                if str(src).startswith("--set")]

    def clients(self, clients: int | None = None) -> ClientSummary | None:
        """One client count's pooled summary; the highest-TPS one when not given."""
        if self.summary is None or not self.summary.per_clients:
            return None
        if clients is None:
            return max(self.summary.per_clients, key=lambda c: _num(c.tps_mean))
        return next((c for c in self.summary.per_clients if c.clients == clients), None)

    def iterations(self, clients: int) -> list[IterationSummary]:
        if self.summary is None:
            return []
        return [it for it in self.summary.iterations if it.clients == clients]


def load_run(path: Path) -> RunData:
    """A run from its directory; a damaged or unknown-version file is one clear line.

    A run without summary.json (its report was never built) loads with ``summary`` None;
    a summary.json that is there but cannot be read is an error, a directory in its place
    too."""
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not (manifest_path.exists() or manifest_path.is_symlink()):
        raise UsageError(f"{manifest_path}: missing; {path} is not a complete pgdyno run "
                         "directory")
    manifest = manifest_to_dict(load_manifest(path))
    summary = None
    summary_path = path / "summary.json"
    if summary_path.exists() or summary_path.is_symlink():
        summary = load_summary(summary_path)
    return RunData(path=path, manifest=manifest, summary=summary,
                   telemetry=_telemetry(summary), notes=read_notes(path),
                   role=dict(manifest.get("role") or {}))


def _telemetry(summary: RunSummary | None) -> dict[str, Any] | None:
    """The run's telemetry: that of its highest-TPS iteration, the one its headline comes
    from (None for runs without samplers)."""
    observed = [it for it in (summary.iterations if summary else []) if it.telemetry]
    if not observed:
        return None
    return serde.to_dict(max(observed, key=lambda it: _num(it.tps_mean)).telemetry)


def resolve_run(ref: str, results_dir: Path) -> Path:
    """A run given as a directory, or as an id / suffix known to the results index; its
    manifest is read, so that a damaged run is named before anything is done with it."""
    path = find_run(ref, results_dir)
    load_manifest(path)
    return path


def context_runs(results_dir: Path, context: str) -> list[RunData]:
    """Every run of a context, oldest first."""
    folder = results_dir / context
    if not folder.is_dir():
        raise UsageError(f"context {context}: no directory {folder}; contexts are the folders "
                         f"of {results_dir}")
    runs = [load_run(p) for p in sorted(folder.iterdir()) if (p / "manifest.json").is_file()]
    return sorted(runs, key=lambda r: (r.started_at, r.path.name))


# ----- notes ------------------------------------------------------------------------------

def read_notes(path: Path) -> list[str]:
    """Notes from ``notes.md``: one per ``- `` line (the file may be edited by hand)."""
    file = Path(path) / NOTES_FILE
    if not file.is_file():
        return []
    # Edited by hand: a stray byte that is not UTF-8 must not make the run unreadable.
    return [line[2:].strip() for line in file.read_text(errors="replace").splitlines()
            if line.startswith("- ") and line[2:].strip()]


def add_note(path: Path, text: str, stamp: str) -> Path:
    file = Path(path) / NOTES_FILE
    text = " ".join(text.split())
    if not text:
        raise UsageError("note: the text is empty")
    try:
        if not file.exists():
            file.write_text(f"# Notes on {Path(path).name}\n\nOne note per '- ' line; "
                            "edit freely.\n\n")
        with file.open("a") as fh:
            fh.write(f"- {stamp}: {text}\n")
    except OSError as exc:
        raise UsageError(f"{file}: cannot add the note ({exc.strerror or exc})") from None
    return file


def _num(value: float | None) -> float:
    return -math.inf if value is None or math.isnan(value) else value
