"""The run report: summary.json, plots, report.md and report.html from a computed summary.

The numbers come from the workload's ``summarise`` (``pgdyno.runner.report`` calls it);
this module only draws and writes them.
"""

from __future__ import annotations

from pgdyno import serde
from pgdyno.analysis.summary import IterationSummary, RunSummary
from pgdyno.reports import html, plots
from pgdyno.reports.document import RunView, Section, Table, build_document, clients_words
from pgdyno.reports.drivers_section import drivers_sections
from pgdyno.reports.evidence import evidence_words
from pgdyno.reports.telemetry_sections import telemetry_plots, telemetry_sections
from pgdyno.results.rundir import RunDirectory
from pgdyno.units import count, figure


def write_run_report(summary: RunSummary, run: RunView, run_dir: RunDirectory,
                     workload_sections: list[Section], transactions: bool = True,
                     headline: tuple[str, str] = ("tps", "TPS")) -> None:
    """summary.json, plots/, report.md and report.html of one run; ``headline`` is the
    workload's headline metric (its key in the iterations' metrics, and its label)."""
    # Every file goes through a temporary name and a rename: a Ctrl-C while rebuilding
    # leaves each one old or new, whole (the plots too, in plots.save_png).
    run_dir.write_json("summary.json", serde.to_dict(summary))
    # The scaling curve draws the answer's TPS by clients when TPS is the headline.
    curve = run.by_clients if headline[0] == "tps" and run.by_clients else None
    images = plots.make_plots(summary, run_dir.plots, curve) if transactions else {}
    # The drivers' own figures come from their logs: shown with telemetry off too.
    extra = (workload_sections + drivers_sections(summary.iterations, run_dir.plots,
                                                  run_dir.path)
             + telemetry_report_sections(summary, run_dir, transactions, headline,
                                         run.clients))
    doc = build_document(summary, run, images, extra, transactions)
    html.write_document(doc, run_dir.path)


def telemetry_report_sections(summary: RunSummary, run_dir: RunDirectory,
                              transactions: bool = True,
                              headline: tuple[str, str] = ("tps", "TPS"),
                              named: dict[int, str] | None = None) -> list[Section]:
    """A verdict table for every iteration, then full telemetry for one per client count
    (``named``: each count in the workload's words, "8 clients" by default).

    The iteration shown in full is the one with the median headline value (TPS, NOPM,
    events/s) at that client count: the most typical, not the best.
    """
    observed = [it for it in summary.iterations if it.telemetry is not None]
    if not observed:
        return []
    key, metric_label = headline

    def value(it: IterationSummary) -> float:
        return float(it.metrics.get(key, it.tps_mean))

    rows = []
    for it in observed:
        v = it.verdict
        rows.append([count(it.clients), str(it.iteration), figure(value(it)),
                     v.label if v else "–",
                     evidence_words(v.evidence[0]) if v and v.evidence else ""])
    sections = [Section("Bottleneck verdicts", tables=[Table(
        ["Clients", "Iteration", metric_label, "Verdict", "Main evidence"], rows)])]
    if all(it.verdict is None for it in observed):  # host-only telemetry: no verdicts
        sections = []
    for clients in summary.client_counts:
        runs = sorted((it for it in observed if it.clients == clients), key=value)
        if not runs:
            continue
        it = runs[(len(runs) - 1) // 2]
        assert it.telemetry is not None
        label = f"c{it.clients}-i{it.iteration}"
        # One time axis for every series: seconds since the iteration's first transaction
        # (warm-up included), each value at the middle of its complete interval.
        start = it.window_start_epoch - it.warmup_s
        tps = ([(start + p.t_s + 0.5, p.tps) for p in plots.complete_seconds(it)]
               if transactions else [])
        made = telemetry_plots(it.telemetry, run_dir.plots / label, tps, start=start,
                               warmup_s=it.warmup_s)
        names = {k: str(v.relative_to(run_dir.path)) for k, v in made.items()}
        sections.append(Section(
            f"Telemetry: {(named or {}).get(it.clients) or clients_words(it.clients)} "
            f"(iteration {it.iteration}, median {metric_label})", folded=True))
        # The telemetry's own sections one level under the heading that names the iteration
        # (folded with it: a dozen tables and plots per client count).
        sections += telemetry_sections(it.telemetry, it.verdict, names, level=3)
    return sections
