"""The journal of a context, generated from its runs (a "Benchmark Journal").

Every run in start order: what changed since the run before, its headline figures (pooled TPS
and latency for workloads with per-client rows: pgbench, TPROC-C, cpu; else the workload's
declared headline metric, such as TPROC-H's geometric mean of query times), a 5 s timeline,
the notes pgdyno can find by itself (warm-up incomplete, checkpoint during the run, outlier,
stability warnings), the user's notes (``pgdyno note``), and for failed runs
the root cause the run recorded and whether the next run rolled the change back.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from pgdyno.analysis.summary import five_second_table
from pgdyno.compare.core import compare_runs
from pgdyno.compare.runs import RunData
from pgdyno.compare.settings_diff import SettingChange, settings_diff
from pgdyno.compare.stats import SLOWER
from pgdyno.provision.journal import ProvisionEvent
from pgdyno.targets.local import NOT_THE_CAUSE  # pgdyno's own connection attempts' FATALs
from pgdyno.units import figure
from pgdyno.workloads import registry
from pgdyno.workloads.base import HIGHER, LOWER, headline_of

WARMUP_SHORTFALL = 0.85
"""The first part of a measured window below 85% of the rest: the warm-up was too short."""
OUTLIER_Z = 3.5
"""Robust z-score (MAD-based, as hyperfine) beyond which a run is an outlier among peers."""


@dataclass
class Headline:
    """A run's headline figure at its best client count.

    Runs with pooled per-client rows (pgbench workloads, TPROC-C, cpu) have TPS: the mean
    over every 1 s interval (summary.json per_clients[].tps_mean), with pooled latency and
    counts. Runs without (TPROC-H, fio) have their workload's declared headline metric:
    the best client count's mean over its iterations (``headline_of``), e.g. TPROC-H's
    geometric mean of query times, where lower is better."""

    clients: int
    value: float
    metric: str = "tps"
    label: str = "TPS"
    unit: str = "tx/s"
    direction: int = HIGHER
    latency_avg_ms: float = math.nan
    latency_stddev_ms: float = math.nan
    latency_p99_ms: float = math.nan
    transactions: int | None = None
    failed: int | None = None

    @property
    def is_tps(self) -> bool:
        """The pooled TPS of a run with per-client rows (a throughput to price, project and
        plan capacity with)."""
        return self.metric == "tps"

    @property
    def tps(self) -> float:
        return self.value if self.is_tps else math.nan

    @property
    def score(self) -> float:
        """The value signed so that more is better (for ranking whatever the direction)."""
        return (self.direction or HIGHER) * self.value

    @property
    def better(self) -> str:
        return better_words(self.direction)

    @property
    def prose_label(self) -> str:
        return prose(self.label)

    def amount(self, value: float | None = None) -> str:
        """A value of this figure with its unit: "1,234 TPS", "0.0123 s"."""
        value = self.value if value is None else value
        if self.is_tps:
            return f"{value:,.0f} TPS"
        return f"{figure(value)} {self.unit}".strip()


@dataclass
class JournalEntry:
    number: int
    run: str
    """Run directory (context/name)."""
    started_at: str
    label: str
    status: str
    headline: Headline | None
    changes: list[SettingChange] = field(default_factory=list)
    """Since the previous run of the same workload."""
    previous: int | None = None
    change_pct: float | None = None
    """The headline figure's change against the previous run, in % of the previous value
    (raw: for a lower-is-better figure a negative change is an improvement)."""
    change_verdict: str = ""
    """From a comparison with the previous run on the headline metric (needs >= 2 values
    each): faster/slower honour the metric's direction."""
    timeline: list[tuple[int, float]] = field(default_factory=list)
    """(end second, mean TPS) per block of ``timeline_block_s`` (5 s; 1 s for short runs)."""
    timeline_block_s: int = 5
    notes: list[str] = field(default_factory=list)
    user_notes: list[str] = field(default_factory=list)
    root_cause: str = ""
    rollback: str = ""
    os_events: list[ProvisionEvent] = field(default_factory=list)
    """OS changes (provision apply, verify, revert) made since the previous run started:
    the machine this run measured."""


def build_journal(runs: list[RunData],
                  os_events: Sequence[ProvisionEvent] = ()) -> list[JournalEntry]:
    """The runs' entries; ``os_events`` are placed before the first run started after them
    (those after the last run: ``os_events_after``)."""
    entries: list[JournalEntry] = []
    before_run, _ = place_os_events(runs, os_events)
    for number, run in enumerate(runs, start=1):
        prev_idx = _previous(runs, number - 1)
        entry = JournalEntry(number=number, run=run.name, started_at=run.started_at,
                             label=run.label, status=run.status, headline=headline(run),
                             user_notes=list(run.notes))
        if prev_idx is not None:
            prev = runs[prev_idx]
            entry.previous = prev_idx + 1
            entry.changes = [c for c in settings_diff(prev.manifest, run.manifest)
                             if c.layer != "host" or c.name != "hostname"]
            _against_previous(entry, prev, run)
        best = run.clients()
        if best is not None:
            its = run.iterations(best.clients)
            if its:
                block = 5 if len(its[0].timeline) >= 10 else 1
                entry.timeline = five_second_table(its[0].timeline, block)
                entry.timeline_block_s = block
        entry.notes = auto_notes(run, runs)
        entry.os_events = before_run[number - 1]
        if run.status != "ok":
            entry.root_cause = root_cause(str(run.manifest.get("reason") or
                                              f"status {run.status}"))
        entries.append(entry)
    _rollbacks(entries, runs)
    return entries


def place_os_events(runs: list[RunData], events: Sequence[ProvisionEvent]
                    ) -> tuple[list[list[ProvisionEvent]], list[ProvisionEvent]]:
    """Each event with the first run that started at or after it (times are UTC ISO 8601,
    so they order as text); the events after the last run's start, apart."""
    before_run: list[list[ProvisionEvent]] = [[] for _ in runs]
    after: list[ProvisionEvent] = []
    for event in sorted(events, key=lambda e: e.time):
        index = next((i for i, r in enumerate(runs) if r.started_at >= event.time), None)
        (after if index is None else before_run[index]).append(event)
    return before_run, after


def os_event_line(event: ProvisionEvent) -> str:
    """One journal line: ``2026-11-23T10:00:00Z provision apply (exit 0): applied ...``."""
    return f"{event.time} provision {event.action} (exit {event.exit_status}): {event.summary}"


SERIOUS_MARKERS = ("PANIC:", "FATAL:", "ERROR:")


def root_cause(reason: str, limit: int = 3) -> str:
    """The failure in a line: the reason's first clause and the server's error lines.

    A run's reason may carry server log lines (one per line, or a tail joined by ' | ')
    inside the runner's own wording and parentheses. Each error line is kept whole, from
    its severity (PANIC/FATAL/ERROR) or ``postgres:`` to the end of that log line: the
    parentheses in PostgreSQL's own messages ('... (3) plus ... (2)') are part of it, an
    unmatched ')' closes the runner's wording around it."""
    serious: list[str] = []
    for piece in _log_pieces(reason):
        line = _error_part(piece)
        if line and line not in serious and not any(n in line for n in NOT_THE_CAUSE):
            serious.append(line)
    head = _first_clause(reason)
    if not serious:
        first = reason.strip().splitlines()[0] if reason.strip() else reason
        return first if len(first) <= 300 else first[:300] + " …"
    if not head or any(head in line for line in serious):
        return "; ".join(serious[:limit])
    return f"{head}: " + "; ".join(serious[:limit])


def _log_pieces(reason: str) -> list[str]:
    return [piece.strip() for line in reason.splitlines() for piece in line.split(" | ")]


def _error_part(piece: str) -> str:
    """The error of one log line, from its marker to the end of the line ('' if none)."""
    starts = [piece.index(m) for m in SERIOUS_MARKERS if m in piece]
    for match in re.finditer(r"(?:^|[(\s])(postgres: )", piece):
        starts.append(match.start(1))
    if not starts:
        return ""
    start = min(starts)
    depth = 0
    for i in range(start, len(piece)):
        if piece[i] == "(":
            depth += 1
        elif piece[i] == ")":
            depth -= 1
            if depth < 0:  # closes a parenthesis opened before the log line: the wrapper's
                return piece[start:i].strip()
    return piece[start:].strip()


def _first_clause(reason: str) -> str:
    """The runner's own words before any detail: up to the first '(', ';' or line end."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    head = first.split("(")[0].split(";")[0].strip().rstrip(":").strip()
    return "" if any(m in head for m in SERIOUS_MARKERS) or head.startswith("postgres:") \
        else head


def better_words(direction: int) -> str:
    """"lower is better" / "higher is better" ("no direction" for a plain description)."""
    return {HIGHER: "higher is better", LOWER: "lower is better"}.get(direction,
                                                                     "no direction")


def prose(label: str) -> str:
    """A metric's label inside a sentence: "geometric mean of query times", but "TPS"."""
    return label[:1].lower() + label[1:] if label[1:2].islower() else label


def headline(run: RunData) -> Headline | None:
    """The run's pooled TPS when it has per-client rows, else its workload's declared
    headline metric (None without a summary, a known workload or a measured value)."""
    c = run.clients()
    if c is not None:
        return Headline(clients=c.clients, value=c.tps_mean,
                        latency_avg_ms=c.latency.mean_ms,
                        latency_stddev_ms=c.latency.stddev_ms,
                        latency_p99_ms=c.latency.percentiles_ms.get("p99", math.nan),
                        transactions=c.transactions, failed=c.failed)
    if run.summary is None or run.workload not in registry.names():
        return None
    metrics = registry.get(run.workload).metrics
    h = headline_of(run.summary, metrics)
    if h is None:
        return None
    direction = next((m.direction for m in metrics if m.name == h.metric), HIGHER)
    return Headline(clients=h.clients, value=h.value, metric=h.metric, label=h.label,
                    unit=h.unit, direction=direction,
                    latency_p99_ms=math.nan if h.p99_ms is None else h.p99_ms)


def _previous(runs: list[RunData], index: int) -> int | None:
    for j in range(index - 1, -1, -1):
        if runs[j].workload == runs[index].workload:
            return j
    return None


def _against_previous(entry: JournalEntry, prev: RunData, run: RunData) -> None:
    a, b = headline(prev), headline(run)
    if a is None or b is None or a.clients != b.clients or a.metric != b.metric \
            or not a.value:
        return
    entry.change_pct = 100.0 * (b.value / a.value - 1.0)
    cmp = compare_runs([prev], [run])
    m = cmp.metric(a.metric, a.clients)
    if m is not None:
        entry.change_verdict = m.verdict if m.verdict != "undetermined" else (
            f"undetermined: {m.reason}")


def auto_notes(run: RunData, runs: list[RunData]) -> list[str]:
    notes: list[str] = []
    notes += _warmup_notes(run)
    notes += _checkpoint_notes(run)
    outlier = _outlier_note(run, runs)
    if outlier:
        notes.append(outlier)
    if run.summary is not None:
        notes += [f"{w.code}: {w.message}" for w in run.summary.warnings
                  if w.code in ("other-load", "high-tps-cv", "failures", "incomplete",
                                "slow-first-iteration")]
    notes += [str(n) for n in run.manifest.get("notes") or []]
    return notes


def _warmup_notes(run: RunData) -> list[str]:
    out = []
    if run.summary is None:
        return out
    for it in run.summary.iterations:
        tps = it.interval_tps
        if len(tps) < 3:
            continue
        head = max(1, len(tps) // 3)
        first, rest = statistics.fmean(tps[:head]), statistics.fmean(tps[head:])
        if rest > 0 and first < WARMUP_SHORTFALL * rest:
            out.append(f"warm-up incomplete: {it.clients} clients #{it.iteration} ran its first "
                       f"{head} s at {100 * first / rest:.0f}% of the rest of the window")
    return out


def _checkpoint_notes(run: RunData) -> list[str]:
    """Checkpoints inside measured windows (pgdyno's own CHECKPOINT precedes each window)."""
    out = []
    for it in run.summary.iterations if run.summary else []:
        cp = it.telemetry.checkpoints if it.telemetry is not None else None
        if cp is not None and (cp.timed or cp.wal_triggered):
            out.append(f"checkpoint during the run: {it.clients} clients #{it.iteration}: "
                       f"{cp.timed} timed, {cp.wal_triggered} forced by max_wal_size")
    if not out and run.telemetry and not (run.summary and any(
            it.telemetry for it in run.summary.iterations)):
        cp = run.telemetry.get("checkpoints") or {}
        timed, wal = cp.get("timed") or 0, cp.get("wal_triggered") or 0
        if timed or wal:
            out.append(f"checkpoint during the run: {timed} timed, {wal} forced by "
                       "max_wal_size")
    return out


def _outlier_note(run: RunData, runs: list[RunData]) -> str:
    mine = headline(run)
    if mine is None:
        return ""
    peers = [h.value for r in runs
             if r.label == run.label and r.workload == run.workload and r.status == "ok"
             and (h := headline(r)) is not None and h.clients == mine.clients
             and h.metric == mine.metric]
    if len(peers) < 3:
        return ""
    med = statistics.median(peers)
    mad = statistics.median(abs(p - med) for p in peers)
    if mad == 0:
        return ""
    z = 0.6745 * (mine.value - med) / mad
    if abs(z) > OUTLIER_Z:
        if mine.is_tps:
            return (f"outlier: {mine.tps:,.0f} TPS against a median of {med:,.0f} over "
                    f"{len(peers)} runs of {run.label} (robust z {z:+.1f})")
        return (f"outlier: {mine.prose_label} {mine.amount()} against a median of "
                f"{mine.amount(med)} over {len(peers)} runs of {run.label} (robust z "
                f"{z:+.1f}, {mine.better})")
    return ""


def _pg_state(run: RunData) -> dict[str, str]:
    settings = (run.manifest.get("server") or {}).get("non_default_settings") or \
        (run.manifest.get("config") or {}).get("pg_settings") or {}
    return {k: str(v) for k, v in settings.items()
            if k not in ("port", "unix_socket_directories", "data_directory")}


def _rollbacks(entries: list[JournalEntry], runs: list[RunData]) -> None:
    """After a failed or slower run, the next run going back to an earlier run's settings."""
    for i in range(1, len(entries) - 1):
        bad = entries[i]
        if bad.status == "ok" and bad.change_verdict != SLOWER:
            continue
        after = _pg_state(runs[i + 1])
        if after == _pg_state(runs[i]):
            continue
        good = [j for j in range(i) if runs[j].status == "ok" and _pg_state(runs[j]) == after]
        if good:
            bad.rollback = (f"rolled back: run {i + 2} returned to the settings of run "
                            f"{good[-1] + 1}")
