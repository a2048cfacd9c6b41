"""--drivers: each driver host's own figures beside the merged ones (``analysis.merge``).

The table comes from ``drivers.json`` and each driver's own logs, so it is there with
telemetry off too; the load columns and plots come from the sampler each driver ran beside
pgbench.
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.analysis.merge import DriverFigures
from pgdyno.analysis.summary import IterationSummary
from pgdyno.reports.document import Section, Table, clients_words

NETWORK_NOTE = ("Network counts the bytes received and sent on every interface of the driver "
                "but loopback (lo): the load's traffic to a server on another host, not a "
                "server or a job on the driver itself.")


def drivers_sections(iterations: list[IterationSummary], plots_dir: Path,
                     run_path: Path) -> list[Section]:
    """One row a driver of every iteration: its clients, how it ended, its transactions,
    TPS and p99 over the window every driver covered, failures and retries, and its host's
    load; then, per client count, its drivers' load second by second (the iteration with the
    median TPS)."""
    ran = [it for it in iterations if it.drivers]
    if not ran:
        return []
    rows = [[f"c{it.clients}-i{it.iteration}", *_row(d)] for it in ran for d in it.drivers]
    section = Section("Driver hosts", paragraphs=[
        "The load ran on these hosts; the figures above are merged from their logs (TPS "
        "summed second by second, latency from their histograms added). Each row is one "
        "driver over the window every driver of its iteration covered (c4-i2: 4 clients in "
        "all, iteration 2); pgbench's CPU is "
        "against what it could use (its threads, its host's cores, its cgroup's cpu.max), "
        "\"at limit\" the seconds it used 90% or more of it. " + NETWORK_NOTE],
        tables=[Table(["iteration", "driver", "clients", "status",
                       "transactions", "TPS", "p99 ms", "failed", "retried", "pgbench cores",
                       "pgbench CPU", "at limit", "host CPU busy", "run queue",
                       "network MiB/s", "throttled"], rows)])
    for clients in sorted({it.clients for it in ran}):
        runs = sorted((it for it in ran if it.clients == clients), key=lambda it: it.tps_mean)
        it = runs[(len(runs) - 1) // 2]
        path = _load_plot(it, plots_dir / f"drivers-c{it.clients}-i{it.iteration}.png")
        if path is not None:
            section.images.append((f"Driver load, {clients_words(clients)} (iteration "
                                   f"{it.iteration}, median TPS)",
                                   str(path.relative_to(run_path))))
    return [section]


def _row(d: DriverFigures) -> list[str]:
    load = d.load
    return [
        d.name, str(d.clients), d.status, f"{d.transactions:,}", f"{d.tps:,.1f}",
        f"{d.p99_ms:.2f}" if d.p99_ms is not None else "-", f"{d.failed:,}", f"{d.retried:,}",
        f"{load.pgbench_cores:.2f} of {load.capacity_cores:g}" if load else "-",
        f"{load.pgbench_pct:.0f}%" if load else "-",
        f"{load.seconds_at_limit} of {load.seconds} s" if load and load.seconds else "-",
        f"{load.host_busy_pct:.0f}%" if load else "-",
        f"{load.run_queue:.1f}" if load else "-",
        f"{load.net_mib_s:.2f}" if load else "-",
        f"{load.throttled_pct:.0f}%" if load and load.throttled_pct is not None else "-"]


def _load_plot(it: IterationSummary, path: Path) -> Path | None:
    """pgbench's cores (its capacity dashed) and the network, one line a driver, over the
    iteration; None when no driver has a series."""
    drivers = [d for d in it.drivers if d.load is not None and d.load.series]
    if not drivers:
        path.unlink(missing_ok=True)
        return None
    from pgdyno.reports.plots import plt, save_figure  # matplotlib only when drawing

    fig, (cpu, net) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    for n, d in enumerate(drivers):
        assert d.load is not None
        colour = f"C{n % 10}"
        t = [x.t_s for x in d.load.series]
        cpu.plot(t, [x.pgbench_cores for x in d.load.series], color=colour, lw=1.2,
                 label=f"{d.name}: pgbench")
        cpu.axhline(d.load.capacity_cores, color=colour, lw=0.8, linestyle="--",
                    label=f"{d.name}: capacity")
        net.plot(t, [x.net_mib_s for x in d.load.series], color=colour, lw=1.2, label=d.name)
    for ax in (cpu, net):
        if it.warmup_s:
            ax.axvspan(0, it.warmup_s, color="grey", alpha=0.15)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    cpu.set(ylabel="pgbench CPU (cores)",
            title="Driver load, 1 s intervals (grey: warm-up, excluded)")
    net.set(xlabel="seconds since the driver launched pgbench",
            ylabel="network MiB/s (rx + tx, no lo)")
    return save_figure(fig, path)
