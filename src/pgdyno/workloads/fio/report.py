"""The fio run's report sections: the storage baseline's tables and plots, the WAL sync tests, the
kernel's counters against fio's, and drive health with the endurance projection.

Figures come from ``results`` (recomputed from the raw json+ files) and ``smart``; this
module only lays them out and draws them. With several iterations the tables show the
iteration with the median peak random-read IOPS (the most typical, not the best), and a
table lists every iteration's headline figures.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from pgdyno.analysis.endurance import endurance_projection
from pgdyno.options import BenchOptions
from pgdyno.reports.document import Section, Table
from pgdyno.reports.plots import plt, save_figure
from pgdyno.results.rundir import RunDirectory, RunPlan
from pgdyno.units import (
    MIB,
    UNITS_NOTE,
    common_scale,
    count,
    format_bytes,
    mean_sd,
    number,
    rounded,
)
from pgdyno.workloads.fio.fsync import ONE_WRITE
from pgdyno.workloads.fio.jobs import MIX_READ_PCT, QD32, SEQ_DEPTH
from pgdyno.workloads.fio.metrics import iteration_metrics
from pgdyno.workloads.fio.results import AGREEMENT_PCT, FioIteration, JobResult, PlaceResult

KINDS = (("randread", "random read"), ("randwrite", "random write"),
         ("randrw", f"{MIX_READ_PCT}/{100 - MIX_READ_PCT} mix"))


def fio_sections(its: list[FioIteration], run_dir: RunDirectory, plan: RunPlan,
                 opts: BenchOptions, smart: list[tuple[int, dict]]) -> list[Section]:
    if not its:
        return [Section("Storage baseline (fio)", paragraphs=["No iteration finished a job."])]
    shown = _median(its)
    number = its.index(shown) + 1
    sections = [_overview(shown, plan, opts, number, len(its))]
    for place in shown.places:
        sections += _place_sections(place, run_dir, multi=len(shown.places) > 1)
    if len(its) > 1:
        sections.append(_per_iteration(its))
    sections.append(_kernel_section(shown))
    sections.append(smart_section(smart))
    return sections


def _median(its: list[FioIteration]) -> FioIteration:
    def head(it: FioIteration) -> float:
        peak = it.places[0].peak("randread") if it.places else None
        return peak.iops if peak else 0.0
    ranked = sorted(its, key=head)
    return ranked[(len(ranked) - 1) // 2]


def _overview(it: FioIteration, plan: RunPlan, opts: BenchOptions, number: int,
              total: int) -> Section:
    o = opts.workload_options
    where = [[p.label, p.path, p.device or "–", ", ".join(p.physical) or "–",
              "raw device" if p.raw_device else f"{format_bytes(p.size_bytes)} file"]
             for p in it.places]
    which = (f"Tables show iteration {number} of {total} (median peak random-read IOPS)."
             if total > 1 else "")
    return Section("Storage baseline (fio)", paragraphs=[
        f"{it.fio_version}, {it.engine}, O_DIRECT (the WAL test: buffered writes with "
        f"fdatasync, as PostgreSQL writes WAL); {it.runtime_s} s measured per job after a "
        f"{it.ramp_s} s ramp; {o.fio_jobs} jobs for the bandwidth and WAL tests; queue-depth "
        f"sweeps up to {o.max_depth}, stopped once doubling the depth gained less than 5%. "
        "Every figure is recomputed from fio's json+ files (IOPS = I/Os ÷ runtime; "
        "percentiles from the completion-latency histogram by fio's rule). " + which,
        UNITS_NOTE],
        tables=[Table(["Place", "Path", "Device (kernel counters)", "Physical", "Test area"],
                      where)])


def _place_sections(p: PlaceResult, run_dir: RunDirectory, multi: bool) -> list[Section]:
    title = f"fio on {p.label} ({p.device or p.path})" if multi or p.raw_device else \
        f"fio results: {p.label} ({p.device or p.path})"
    s = Section(title, level=3)
    s.tables.append(_headline_table(p))
    s.tables.append(_sweep_table(p))
    wal = _wal_table(p)
    if wal is not None:
        s.tables.append(wal)
    fsync_table = _fsync_table(p)
    if fsync_table is not None:
        s.tables.append(fsync_table)
    elif p.fsync_note:
        s.paragraphs.append(p.fsync_note + ".")
    if p.fsync is not None and p.fsync_note:
        s.paragraphs.append(p.fsync_note + ".")
    for name, caption, draw in (
            ("bandwidth", "Sequential bandwidth (1 MiB blocks)", _bandwidth_plot),
            ("iops", "Random 4 KiB IOPS at QD1 and at peak", _iops_plot),
            ("latency", "Latency average against p99 (QD1 and QD32)", _latency_plot),
            ("sweep", "IOPS against total queue depth", _sweep_plot)):
        rel = f"plots/fio_{_safe(p.label)}_{name}.png"
        if draw(p, run_dir.path / rel):
            s.images.append((caption, rel))
        else:
            (run_dir.path / rel).unlink(missing_ok=True)
    return [s]


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label)


def _lat(side_job: JobResult | None) -> list[str]:
    lat = side_job.main.latency if side_job and side_job.main else None
    if lat is None:
        return ["–"] * 4
    return [rounded(lat.avg_us, 1), rounded(lat.p50_us, 1), rounded(lat.p99_us, 1),
            rounded(lat.p99_9_us, 1)]


def _depth(job: JobResult) -> str:
    return f"{job.depth} ({job.numjobs} × QD{job.iodepth})"


def _headline_table(p: PlaceResult) -> Table:
    listed: list[tuple[list[str], JobResult, list[str]]] = []
    for name, label in (("seq-read", "Sequential read"), ("seq-write", "Sequential write")):
        job = p.job(name)
        if job:
            listed.append(([label, "1 MiB", f"{job.numjobs} × QD{SEQ_DEPTH}"], job,
                           ["–"] * 4))
    for kind, label in KINDS[:2]:
        for tag, job in (("QD1", p.at_depth(kind, 1)), ("QD32", p.qd32(kind))):
            if job:
                listed.append(([f"{label.capitalize()} {tag}", "4 KiB", _depth(job)], job,
                               _lat(job)))
    for kind, label in KINDS:
        job = p.peak(kind)
        if job:
            listed.append(([f"{label.capitalize()} at peak", "4 KiB", _depth(job)], job,
                           _lat(job)))
    # One prefix for the column: GiB/s when the sequential jobs pass 1,024 MiB/s.
    scale = common_scale(job.mib_s * MIB for _, job, _ in listed)
    rows = [[*head, count(job.iops), scale.number(job.mib_s * MIB), *lat]
            for head, job, lat in listed]
    return Table(["Test", "Block", "Depth (jobs × QD)", "IOPS", f"Bandwidth ({scale.rate_unit})",
                  "Latency avg (µs)", "p50 (µs)", "p99 (µs)", "p99.9 (µs)"], rows,
                 caption="Completion latency of the test's direction (reads for the mix)")


def _sweep_table(p: PlaceResult) -> Table:
    depths = sorted({j.depth for kind, _ in KINDS for j in p.sweep(kind)})
    rows = []
    for d in depths:
        row = [str(d)]
        for kind, _ in KINDS:
            job = p.at_depth(kind, d)
            peak = p.peak(kind)
            mark = " (peak)" if job is not None and peak is not None and job is peak else ""
            row.append(count(job.iops) + mark if job else "–")
            if kind != "randrw":
                row.append(rounded(job.main.latency.p99_us, 1)
                           if job and job.main and job.main.latency else "–")
        rows.append(row)
    return Table(["Depth", "Read IOPS", "Read p99 (µs)", "Write IOPS", "Write p99 (µs)",
                  "Mix IOPS"], rows,
                 caption="The sweeps: one job up to depth 32, then jobs of QD32 each; a sweep "
                         "ends where IOPS stopped rising")


def _wal_table(p: PlaceResult) -> Table | None:
    wal = sorted((j for j in p.jobs if j.kind == "wal" and not j.error),
                 key=lambda j: j.numjobs)
    if not wal:
        return None
    rows = []
    for j in wal:
        w = j.write
        rows.append([str(j.numjobs), count(j.iops),
                     rounded(w.latency.avg_us, 1) if w and w.latency else "–",
                     rounded(j.sync.avg_us, 1) if j.sync else "–",
                     rounded(j.sync.p99_us, 1) if j.sync else "–",
                     rounded(j.sync.p99_9_us, 1) if j.sync else "–"])
    return Table(["Jobs", "Writes + fdatasync /s", "Write avg (µs)", "fdatasync avg (µs)",
                  "fdatasync p99 (µs)", "fdatasync p99.9 (µs)"], rows,
                 caption="WAL-shaped test: 8 KiB sequential writes, fdatasync after each")


def _fsync_table(p: PlaceResult) -> Table | None:
    if p.fsync is None:
        return None
    group = p.fsync.group(ONE_WRITE)
    rows = [[r.name, rounded(r.ops_per_s, 1) if r.ops_per_s is not None else "n/a",
             str(r.usecs_per_op) if r.usecs_per_op is not None else "–"]
            for r in (group.rows if group else [])]
    return Table(["wal_sync_method", "ops/s", "µs/op"], rows,
                 caption=f"pg_test_fsync, one 8 kB write per sync, "
                         f"{p.fsync.seconds_per_test} s per test")


def _per_iteration(its: list[FioIteration]) -> Section:
    keys = (("randread_peak_iops", "Read IOPS peak"), ("randwrite_peak_iops", "Write IOPS peak"),
            ("seq_read_mib_s", "Seq read MiB/s"), ("seq_write_mib_s", "Seq write MiB/s"),
            ("randread_qd1_lat_avg_us", "Read QD1 avg µs"),
            ("wal_fdatasync_1job_ops_s", "fdatasync ops/s"))
    metrics = [iteration_metrics(it) for it in its]
    # The bandwidth columns (saved in MiB/s) in one binary prefix each, e.g. GiB/s.
    divisors, labels = {}, []
    for k, label in keys:
        divisors[k] = 1.0
        if k.endswith("_mib_s"):
            scale = common_scale(m[k] * MIB for m in metrics if m.get(k) is not None)
            divisors[k] = scale.factor / MIB
            label = label.replace("MiB/s", scale.rate_unit)
        labels.append(label)

    def shown(k: str, value: float | None) -> str:
        return rounded(None if value is None else value / divisors[k], 1)

    rows = [[str(n + 1), *[shown(k, m.get(k)) for k, _ in keys]] for n, m in enumerate(metrics)]
    means = []
    for k, _ in keys:
        values = [m[k] for m in metrics if k in m]
        sd = statistics.stdev(values) if len(values) > 1 else math.nan
        means.append(mean_sd(statistics.fmean(values) / divisors[k], sd / divisors[k], 1)
                     if values else "–")
    rows.append(["mean ± sd", *means])
    return Section("fio iterations", level=3, tables=[Table(
        ["Iteration", *labels], rows,
        caption="First place of each iteration")])


def _kernel_section(it: FioIteration) -> Section:
    checked = [j for p in it.places for j in p.jobs if j.kernel is not None]
    off = [j for j in checked if not j.kernel.agrees]
    s = Section("fio against the kernel's disk counters", level=3)
    if not checked:
        s.paragraphs.append("No job could be checked (the test file's device is unknown, or "
                            "the jobs were too short for two samples).")
        return s
    diffs = [abs(j.kernel.diff_pct) for j in checked if j.kernel.diff_pct is not None]
    s.paragraphs.append(
        f"/proc/diskstats of the device under each test, sampled every 0.1 s and read over "
        f"fio's measured window: {len(checked) - len(off)} of {len(checked)} jobs agree "
        f"within {AGREEMENT_PCT:g}% (largest difference {max(diffs):.1f}%). 4 KiB random "
        "jobs are compared by IOPS; the others by MiB/s, since large blocks are split or "
        "merged on their way to the device and WAL writes add the filesystem's journal.")
    if off:
        s.tables.append(Table(
            ["Place", "Job", "Basis", "fio", "Kernel", "Difference", "Kernel r/s", "Kernel w/s"],
            [[j.place, j.name, j.kernel.basis, rounded(j.kernel.fio_value, 1),
              rounded(j.kernel.kernel_value, 1), f"{j.kernel.diff_pct:+.1f}%",
              rounded(j.kernel.r_s, 1), rounded(j.kernel.w_s, 1)] for j in off],
            caption=f"Jobs where the kernel's figure differs from fio's by more than "
                    f"{AGREEMENT_PCT:g}%"))
    return s


# ----- SMART ------------------------------------------------------------------------------

SMART_ROWS = (
    ("Temperature (°C)", "temperature_c"), ("Available spare (%)", "available_spare_pct"),
    ("Percentage used (%)", "percent_used"), ("Media errors", "media_errors"),
    ("Critical warnings", "critical_warning"),
    ("Thermal throttle T1 transitions", "thermal_t1_transitions"),
    ("Thermal throttle T2 transitions", "thermal_t2_transitions"),
    ("Power-on hours", "power_on_hours"), ("Host reads", "host_read_bytes"),
    ("Host writes", "host_written_bytes"))
"""Host reads and writes are bytes: their rows name the binary prefix their values share."""


def smart_section(smart: list[tuple[int, dict]]) -> Section:
    """Drive health: each device's SMART before the first iteration and after the last, and
    the endurance projection; one line for a device without SMART."""
    s = Section("Drive health (SMART) and endurance", level=3)
    if not smart or not any(d for _, d in smart):
        s.paragraphs.append("No SMART readings were taken.")
        return s
    first = {r["device"]: r for r in (smart[0][1].get("before") or {}).get("readings", [])}
    last_phase = smart[-1][1].get("after") or {}
    last = {r["device"]: r for r in last_phase.get("readings", [])}
    elapsed_h = max(0.0, (float(last_phase.get("t", 0.0))
                          - float((smart[0][1].get("before") or {}).get("t", 0.0))) / 3600)
    for device in sorted(set(first) | set(last)):
        b, a = first.get(device, {}), last.get(device, {})
        if not (b.get("available") and a.get("available")):
            s.paragraphs.append(f"{device}: SMART not available: "
                                f"{(a or b).get('reason') or 'no reading'}.")
            continue
        rows = [_smart_row(label, key, b, a) for label, key in SMART_ROWS]
        rows[0][2] += f" (peak {rounded(_peak_temp(smart, device), 0)})"
        s.tables.append(Table(["SMART metric", "Before", "After"], rows,
                              caption=f"{device} ({a.get('reason')})"))
        proj = endurance_projection(b, a, elapsed_h)
        s.paragraphs.append(f"{device}: {proj.text}")
    return s


def _smart_row(label: str, key: str, before: dict, after: dict) -> list[str]:
    if key.startswith("host_"):  # lifetime bytes: TiB or PiB on a worn drive
        scale = common_scale([before.get(key), after.get(key)])
        return [f"{label} ({scale.unit})", scale.number(before.get(key)),
                scale.number(after.get(key))]
    return [label, _smart_value(key, before), _smart_value(key, after)]


def _smart_value(key: str, reading: dict) -> str:
    value = reading.get(key)
    if value is None:
        return "–"
    return rounded(float(value), 0) if isinstance(value, float) else count(value)


def _peak_temp(smart: list[tuple[int, dict]], device: str) -> float | None:
    temps = [r.get("temperature_c") for _, d in smart for phase in ("before", "after")
             for r in (d.get(phase) or {}).get("readings", []) if r.get("device") == device]
    temps = [t for t in temps if t is not None]
    return max(temps) if temps else None


# ----- plots ------------------------------------------------------------------------------

def _bar(ax, labels: list[str], values: list[float], ylabel: str, title: str) -> None:  # noqa: ANN001
    bars = ax.bar(labels, values, color=plt.rcParams["axes.prop_cycle"].by_key()["color"]
                  [:len(values)])
    ax.bar_label(bars, labels=[number(v) for v in values], fontsize=8)
    ax.set(ylabel=ylabel, title=title)
    ax.grid(axis="y", alpha=0.3)


def _bandwidth_plot(p: PlaceResult, path: Path) -> bool:
    jobs = [(label, p.job(name)) for name, label in (("seq-read", "read"),
                                                      ("seq-write", "write"))]
    jobs = [(label, j) for label, j in jobs if j]
    if not jobs:
        return False
    fig, ax = plt.subplots(figsize=(5, 4))
    scale = common_scale(j.mib_s * MIB for _, j in jobs)
    _bar(ax, [label for label, _ in jobs], [scale.value(j.mib_s * MIB) for _, j in jobs],
         f"bandwidth ({scale.rate_unit})", f"Sequential bandwidth, {p.label}")
    save_figure(fig, path)
    return True


def _iops_plot(p: PlaceResult, path: Path) -> bool:
    bars = [(f"{label}\nQD1", p.at_depth(kind, 1)) for kind, label in KINDS[:2]]
    bars += [(f"{label}\npeak", p.peak(kind)) for kind, label in KINDS]
    bars = [(label, j) for label, j in bars if j]
    if not bars:
        return False
    fig, ax = plt.subplots(figsize=(8, 4))
    _bar(ax, [label for label, _ in bars], [j.iops for _, j in bars], "IOPS",
         f"Random 4 KiB IOPS, {p.label}")
    save_figure(fig, path)
    return True


def _latency_plot(p: PlaceResult, path: Path) -> bool:
    points = [(f"{label} {tag}", j) for kind, label in KINDS[:2]
              for tag, j in (("QD1", p.at_depth(kind, 1)), ("QD32", p.qd32(kind)))]
    points = [(label, j) for label, j in points if j and j.main and j.main.latency]
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(8, 4))
    xs = range(len(points))
    avg = [j.main.latency.avg_us for _, j in points]
    p99 = [j.main.latency.p99_us for _, j in points]
    ax.bar([x - 0.2 for x in xs], avg, width=0.4, label="average")
    ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
    ax.set_xticks(list(xs), [label for label, _ in points])
    ax.set(ylabel="µs", title=f"Completion latency, {p.label}")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    save_figure(fig, path)
    return True


def _sweep_plot(p: PlaceResult, path: Path) -> bool:
    series = [(label, p.sweep(kind)) for kind, label in KINDS]
    series = [(label, points) for label, points in series if points]
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(8, 4))
    for label, points in series:
        ax.plot([j.depth for j in points], [j.iops for j in points], marker="o", label=label)
        peak = max(points, key=lambda j: j.iops)
        ax.annotate(f"{peak.iops:,.0f}", (peak.depth, peak.iops), fontsize=8,
                    textcoords="offset points", xytext=(0, 6), ha="center")
    ax.set_xscale("log", base=2)
    ax.set(xlabel=f"total queue depth (jobs × QD; one job up to {QD32})", ylabel="IOPS",
           title=f"IOPS against queue depth, {p.label}")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path)
    return True
