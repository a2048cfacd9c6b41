"""The run report: summary.json, plots, report.md and report.html from a computed summary.

The numbers come from the workload's ``summarise`` (``pgdyno.runner.report`` calls it);
this module only draws and writes them.
"""

from __future__ import annotations

import re

from pgdyno import serde
from pgdyno.analysis.summary import RunSummary
from pgdyno.reports import html, markdown, plots
from pgdyno.reports.document import RunView, Section, Table, build_document, fmt
from pgdyno.reports.telemetry_sections import telemetry_markdown, telemetry_plots
from pgdyno.results.rundir import RunDirectory


def write_run_report(summary: RunSummary, run: RunView, run_dir: RunDirectory,
                     workload_sections: list[Section], transactions: bool = True) -> None:
    """summary.json, plots/, report.md and report.html of one run."""
    run_dir.write_json("summary.json", serde.to_dict(summary))
    images = plots.make_plots(summary, run_dir.plots) if transactions else {}
    extra = workload_sections + telemetry_report_sections(summary, run_dir, transactions)
    doc = build_document(summary, run, images, extra, transactions)
    (run_dir.path / "report.md").write_text(markdown.render_document(doc))
    (run_dir.path / "report.html").write_text(html.render_document(doc, run_dir.path))


def telemetry_report_sections(summary: RunSummary, run_dir: RunDirectory,
                              transactions: bool = True) -> list[Section]:
    """A verdict table for every iteration, then full telemetry for one per client count.

    The iteration shown in full is the one with the median TPS at that client count:
    the most typical, not the best.
    """
    observed = [it for it in summary.iterations if it.telemetry is not None]
    if not observed:
        return []
    rows = []
    for it in observed:
        v = it.verdict
        rows.append([str(it.clients), str(it.iteration), fmt(it.tps_mean, 1),
                     v.label if v else "–", (v.evidence[0] if v and v.evidence else "")])
    sections = [Section("Bottleneck verdicts", tables=[Table(
        ["Clients", "Iteration", "TPS", "Verdict", "Main evidence"], rows)])]
    for clients in summary.client_counts:
        runs = sorted((it for it in observed if it.clients == clients), key=lambda i: i.tps_mean)
        if not runs:
            continue
        it = runs[(len(runs) - 1) // 2]
        assert it.telemetry is not None
        label = f"c{it.clients}-i{it.iteration}"
        tps = ([(it.window_start_epoch - it.warmup_s + p.t_s, p.tps) for p in it.timeline]
               if transactions else [])
        made = telemetry_plots(it.telemetry, run_dir.plots / label, tps)
        names = {k: str(v.relative_to(run_dir.path)) for k, v in made.items()}
        sections.append(Section(
            f"Telemetry: {it.clients} clients (iteration {it.iteration}, median TPS)",
            markdown=_demote(telemetry_markdown(it.telemetry, it.verdict, names))))
    return sections


def _demote(text: str) -> str:
    """Nest another module's Markdown headings one level under the section holding them."""
    return re.sub(r"^(#{1,5}) ", r"#\1 ", text, flags=re.MULTILINE)
