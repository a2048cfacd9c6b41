"""The run report's WAL archiving section: the archiver, its lag, and memory over time.

Renders what pgdyno.analysis.archive computed: the archiver's counts and rates, the archive
command's time per segment, the archive lag over time, and the memory chart (bytes
in one binary prefix over seconds, stacked by category, the page cache split by directory).
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.analysis.archive import MIB, ArchiveSummary, MemorySeries
from pgdyno.reports.document import BulletList, Image, Paragraph, Section, Table
from pgdyno.units import MISSING, common_scale, fixed, scale_for

PLOT_MEMORY = "memory"
PLOT_ARCHIVE_LAG = "archive_lag"
STACK = (("anonymous memory", "anon"), ("shared memory (shared_buffers)", "shmem"),
         ("page cache: data directory", "data"), ("page cache: pg_wal", "wal"),
         ("page cache: archive directory", "archive"), ("page cache: other files", "other"),
         ("buffers", "buffers"), ("kernel and other", "kernel"))
"""Free memory is left out of the stack: on a large host it would flatten the rest."""


def memory_stack(m: MemorySeries) -> list[tuple[str, list[float]]]:
    """The stacked categories of the memory chart, MiB at each ``m.t``: /proc/meminfo's
    Cached split into shared memory, the three directories' residency and the rest."""
    n = len(m.t)

    def get(key: str) -> list[float]:
        return list(m.meminfo_mib.get(key, [0.0] * n))

    def cached(role: str) -> list[float]:
        return [v or 0.0 for v in m.cached_mib.get(role, [None] * n)]

    anon, shmem, cache = get("anon"), get("shmem"), get("cached")
    dirs = {role: cached(role) for role in ("data", "wal", "archive")}
    other = [max(0.0, cache[i] - shmem[i] - sum(d[i] for d in dirs.values())) for i in range(n)]
    free, buffers, total = get("free"), get("buffers"), get("total")
    kernel = [max(0.0, total[i] - free[i] - buffers[i] - cache[i] - anon[i]) for i in range(n)]
    values = {"anon": anon, "shmem": shmem, **dirs, "other": other, "buffers": buffers,
              "kernel": kernel, "free": free}
    return [(label, values[key]) for label, key in STACK]


def draw_memory(ax, m: MemorySeries, origin: float, title: str) -> bool:  # noqa: ANN001
    """The stacked memory chart on ``ax`` (seconds since ``origin``); False without data."""
    if len(m.t) < 2:
        return False
    xs = [t - origin for t in m.t]
    stack = memory_stack(m)
    # One prefix for the axis, from the top of the stack: GiB on a large host, MiB on a small.
    scale = common_scale(sum(v[i] for _, v in stack) * MIB for i in range(len(m.t)))

    def scaled(mib: list[float]) -> list[float]:
        return [scale.value(v * MIB) for v in mib]

    ax.stackplot(xs, *[scaled(v) for _, v in stack], labels=[label for label, _ in stack],
                 alpha=0.85)
    for key, style in (("dirty", "k--"), ("writeback", "k:")):
        if key in m.meminfo_mib:
            ax.plot(xs, scaled(m.meminfo_mib[key]), style, lw=1, label=key.capitalize())
    ax.set(xlabel="seconds since the iteration's start", ylabel=f"memory ({scale.unit})",
           title=title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return True


def archive_plots(a: ArchiveSummary, plots_dir: Path, origin: float) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pgdyno.reports.plots import save_png

    out: dict[str, Path] = {}
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=100)
    try:
        if draw_memory(ax, a.memory, origin, "Memory use over time (/proc/meminfo, mincore)"):
            fig.tight_layout()
            out[PLOT_MEMORY] = save_png(fig, plots_dir / f"{PLOT_MEMORY}.png")
    finally:
        plt.close(fig)
    if len(a.lag_t) >= 2:
        fig, ax = plt.subplots(figsize=(10, 3.5), dpi=100)
        try:
            ax.step([t - origin for t in a.lag_t], a.lag_segments, where="post")
            ax.set(xlabel="seconds since the iteration's start",
                   ylabel="segments not yet archived", title="WAL archive lag")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            fig.tight_layout()
            out[PLOT_ARCHIVE_LAG] = save_png(fig, plots_dir / f"{PLOT_ARCHIVE_LAG}.png")
        finally:
            plt.close(fig)
    return out


def archive_sections(a: ArchiveSummary, plot_names: dict[str, str]) -> list[Section]:
    """"WAL archiving" (the archiver's figures, why it is marked, the lag chart) and under it
    "Page cache" (the directories' residency at the end, the memory chart)."""
    c = a.commands
    state = ("FAILING" if a.failing else "FELL BEHIND" if a.fell_behind else "kept up")
    rows = [
        ["method", "", a.method or MISSING],
        ["archiver", "", state],
        ["segments archived", "", str(a.archived)],
        ["failed attempts", "", str(a.failed)],
        _rate_row("archive rate", a.archived_bytes_per_s),
        _rate_row("WAL written", a.wal_written_bytes_per_s),
        ["lag at start / end / max", "segments",
         f"{_n(a.lag_start)} / {_n(a.lag_end)} / {_n(max(a.lag_segments, default=None))}"],
        [".ready files at end", "", _n(a.ready_end)],
        ["last archived segment", "", a.last_archived_wal or MISSING],
        ["last failed segment", "", a.last_failed_wal or MISSING],
        ["archive command runs", "", str(c.runs) + (" (" + ", ".join(
            f"{n} {k}" for k, n in sorted(c.outcomes.items())) + ")" if c.outcomes else "")],
        ["archive command p50 / p90 / max", "ms",
         f"{fixed(c.p50_ms)} / {fixed(c.p90_ms)} / {fixed(c.max_ms)}"],
    ]
    archiving = Section("WAL archiving", body=[
        Table(["item", "unit", "value"], rows), BulletList(list(a.evidence)),
        Paragraph("Lag = segments completely written but not yet archived (the segment being "
                  "written, from pg_current_wal_lsn, less the last archived one, from "
                  "pg_stat_archiver). Command times are pgdyno's archive command's own, one "
                  "line per segment in its log (none for your own COMMAND)."),
        *_image(plot_names, PLOT_ARCHIVE_LAG, "WAL archive lag")])
    return [archiving, _page_cache(a, plot_names)]


def _page_cache(a: ArchiveSummary, plot_names: dict[str, str]) -> Section:
    m = a.memory
    at_end: list[tuple[str, float | None]] = [
        (f"page cache: {role}", a.cache_mib.get(role)) for role in ("data", "wal", "archive")]
    for key, label in (("cached", "Cached"), ("dirty", "Dirty"), ("writeback", "Writeback"),
                       ("active_file", "Active(file)"), ("inactive_file", "Inactive(file)")):
        values = m.meminfo_mib.get(key)
        at_end.append((label, values[-1] if values else None))
    in_bytes = [(label, None if mib is None else mib * MIB) for label, mib in at_end]
    scale = common_scale(v for _, v in in_bytes)
    return Section("Page cache", level=3, body=[
        Table(["item", f"{scale.unit} at the end"],
              [[label, scale.number(v)] for label, v in in_bytes]),
        Paragraph("Directories' residency by mincore(2) every few seconds"
                  + (f" ({a.cache_sample_ms:.0f} ms per sample of all three)"
                     if a.cache_sample_ms is not None else "") + "; the rest from "
                  "/proc/meminfo every second."),
        *_image(plot_names, PLOT_MEMORY, "Memory use over time")])


def _image(plot_names: dict[str, str], name: str, caption: str) -> list[Image]:
    return [Image(caption, plot_names[name])] if name in plot_names else []


def _rate_row(item: str, bytes_per_s: float | None) -> list[str]:
    """A row of the unit-and-value table: the rate's own binary prefix in the unit column."""
    scale = scale_for(bytes_per_s)
    return [item, scale.rate_unit if bytes_per_s is not None else "", scale.number(bytes_per_s)]


def _n(value: int | None) -> str:
    """A segment count as the archiver reports it (no thousands separator: a file count)."""
    return MISSING if value is None else str(value)
