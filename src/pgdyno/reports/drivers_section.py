"""--drivers: each driver host's own figures beside the merged ones (``analysis.merge``)."""

from __future__ import annotations

from pgdyno.analysis.merge import DriverFigures
from pgdyno.reports.document import Paragraph, Section, Table


def drivers_section(drivers: list[DriverFigures]) -> list[Section]:
    """One row a driver: its clients, how it ended, its transactions, TPS and p99 over the
    window every driver covered, failures and retries, and its host's load."""
    if not drivers:
        return []
    rows = []
    for d in drivers:
        load = d.load
        rows.append([
            d.name, str(d.clients), d.status, f"{d.transactions:,}", f"{d.tps:,.1f}",
            f"{d.p99_ms:.2f}" if d.p99_ms is not None else "-", f"{d.failed:,}",
            f"{d.retried:,}",
            f"{load.pgbench_cores:.2f} of {load.capacity_cores:g}" if load else "-",
            f"{load.pgbench_pct:.0f}%" if load else "-",
            f"{load.host_busy_pct:.0f}%" if load else "-",
            f"{load.run_queue:.1f}" if load else "-",
            f"{load.net_mib_s:.2f}" if load else "-",
            f"{load.throttled_pct:.0f}%" if load and load.throttled_pct is not None else "-"])
    return [Section("Driver hosts", body=[
        Paragraph("The load ran on these hosts; the figures above are merged from their logs "
                  "(TPS summed second by second, latency from their histograms added). Each "
                  "row is one driver over the same window; pgbench's CPU is against what it "
                  "could use (its threads, its host's cores, its cgroup's cpu.max)."),
        Table(["driver", "clients", "status", "transactions", "TPS", "p99 ms", "failed",
               "retried", "pgbench cores", "pgbench CPU", "host CPU busy", "run queue",
               "network MiB/s", "throttled"], rows)])]
