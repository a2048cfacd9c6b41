"""The context report rendered: sections in an instance report's order, as Markdown, HTML
and JSON.

The figures come from :mod:`pgdyno.campaign.context`; this module only lays them out in the
report model (``pgdyno.reports.document``) that the Markdown and HTML renderers share, as
:mod:`pgdyno.compare.render` does for a comparison. A section without data says which
command would provide it.
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.campaign.context import ContextReport, journal_context, report_json
from pgdyno.campaign.cpu_baseline import BASELINE_PRIME
from pgdyno.campaign.journal import better_words, headline, os_event_line, prose
from pgdyno.campaign.ranking import Finding, config_labels
from pgdyno.campaign.recommendations import (
    AVOID,
    DURABILITY_RISK,
    FAILED_RUN,
    KEEP,
    LINEAR,
    NOISY_SCALING,
    PREWARM,
    SIZE_HEADROOM,
    SUBLINEAR,
    USE,
    Recommendation,
    linear_verdict,
)
from pgdyno.campaign.scaling import ScalingCheck
from pgdyno.compare.render import interval, verdict_text
from pgdyno.compare.runs import RunData
from pgdyno.compare.settings_diff import changes_block, settings_diff
from pgdyno.compare.stats import FASTER, SLOWER
from pgdyno.config.units import settings_with_stock
from pgdyno.reports import html
from pgdyno.reports.document import (
    BulletList,
    Code,
    Document,
    Inline,
    Paragraph,
    Section,
    Strong,
    Table,
    Text,
)
from pgdyno.results.rundir import write_json_atomic
from pgdyno.units import figure, rounded, signed_pct
from pgdyno.workloads import registry


def context_document(rep: ContextReport) -> Document:
    sections = [
        _summary(rep), _config_matrix(rep), _sizing(rep), _journal(rep), _validation(rep),
        _key_findings(rep), _price_performance(rep), _against(rep), _hardware_limits(rep),
        _scaling(rep), _recommendations(rep), _references(rep),
    ]
    return Document(title=f"Benchmark report: {rep.context}", sections=sections)


def _summary(rep: ContextReport) -> Section:
    s = Section("1. Summary")
    runs_ok = sum(r.status == "ok" for r in rep.runs)
    s.paragraphs.append(Text.of("Context ", Code(rep.context),
                                f": {len(rep.runs)} runs ({runs_ok} ok), "
                                f"{rep.runs[0].started_at if rep.runs else '–'} → "
                                f"{rep.runs[-1].started_at if rep.runs else '–'}."))
    v = rep.validation
    if v is not None and v.state("cold") and v.state("warm"):
        cold, warm = v.state("cold"), v.state("warm")
        s.tables.append(Table(["Metric", "Cold cache", "Warm cache"], [
            ["TPS", rounded(cold.tps, 1), rounded(warm.tps, 1)],
            ["Latency avg (ms)", rounded(cold.latency_avg_ms, 3), rounded(warm.latency_avg_ms, 3)],
            ["Transactions", str(cold.transactions), str(warm.transactions)],
            ["Failed", str(cold.failed), str(warm.failed)],
        ], caption=f"Validation run {Path(v.run_dir).name}, {v.clients} clients "
                   "(timeline slices of its summary.json)"))
    else:
        s.paragraphs.append(Text.of("No validation run in this context: ",
                                    Code("pgdyno validate WORKLOAD --context NAME"),
                                    " measures cold and warm cache."))
    rows = []
    others: dict[tuple[str, str, str], list[list[str]]] = {}
    """Runs whose headline is not pooled TPS, by (metric, label, unit): a table each."""
    for label in config_labels(rep.runs):
        for r in rep.runs:
            h = headline(r)
            if r.label != label or h is None or r.status != "ok":
                continue
            if h.is_tps:
                rows.append([label, r.path.name, str(h.clients), rounded(h.tps, 1),
                             rounded(h.latency_avg_ms, 3), rounded(h.latency_stddev_ms, 3),
                             rounded(h.latency_p99_ms, 3), str(h.transactions), str(h.failed)])
            else:
                n = sum(1 for it in r.iterations(h.clients)
                        if it.status == "ok" and h.metric in it.metrics)
                others.setdefault((h.metric, h.label, h.unit), []).append(
                    [label, r.path.name, r.workload, str(h.clients), figure(h.value), str(n)])
    if rows or not others:
        s.tables.append(Table(["Config", "Run", "Clients", "TPS", "Latency avg (ms)",
                               "Latency stddev (ms)", "p99 (ms)", "Transactions", "Failed"],
                              rows, caption="Headline results: per run, the client count "
                                            "with the highest TPS (summary.json per_clients)"))
    for (metric, label, unit), table in others.items():
        better = _direction_words(metric, table)
        s.tables.append(Table(
            ["Config", "Run", "Workload", "Clients", f"{label} ({unit})", "Iterations"], table,
            caption=f"Headline results: per run, the client count with the best "
                    f"{prose(label)} ({better}; the mean of summary.json iterations' "
                    f"metrics[\"{metric}\"])"))
    if rep.best is not None:
        names = ", ".join(r.path.name for r in rep.best_runs)
        h = rep.best_headline
        if h is None or h.is_tps:
            result = Text.of(Strong(f"{rounded(rep.best_tps, 1)} TPS"))
        else:
            result = Text.of(f"{h.prose_label} ", Strong(h.amount(rep.best_value)),
                             f" ({h.better})")
        s.paragraphs.append(Text.of(
            "Best config: ", Strong(rep.best.label), ", ", result, ": the mean of "
            f"its {len(rep.best_runs)} run(s) above ({names}); its median run "
            f"{rep.best.path.name} stands for it below. Configs are ranked like with like, "
            f"over runs of {rep.ranked_on}."))
    s.paragraphs += [f"Note: {n}" for n in rep.notes]
    if rep.hardware_overview:
        s.tables.append(_hardware_table(rep))
    return s


def _direction_words(metric: str, table: list[list[str]]) -> str:
    """"lower is better" for the metric of a headline table (its first run's workload)."""
    workload = table[0][2] if table else ""
    if workload not in registry.names():
        return "direction unknown"
    return better_words(next((m.direction for m in registry.get(workload).metrics
                              if m.name == metric), 1))


def _not_throughput(rep: ContextReport) -> str:
    """Why a TPS-only figure is missing: the ranked workload's headline is something else
    ('' when the headline is TPS or there is no ranked run)."""
    h = rep.best_headline
    if rep.best is None or h is None or h.is_tps:
        return ""
    return (f"{rep.best.workload}'s headline is the {h.prose_label} ({h.unit}, {h.better}), "
            "not a throughput in TPS")


def _host_only(rep: ContextReport) -> str:
    """Why no config is ranked in a context whose finished runs measure the host only
    (fio, cpu), '' otherwise."""
    if rep.best is not None:
        return ""
    host = sorted({r.workload for r in rep.runs if r.status == "ok"
                   and r.workload in registry.names()
                   and not registry.get(r.workload).needs_server})
    if not host:
        return ""
    return (f"the finished runs here ({', '.join(host)}) measure the host, not a PostgreSQL "
            "config")


def _hardware_table(rep: ContextReport) -> Table:
    """The opening table: every workload measured on this hardware."""
    rows = [[w.workload, f"{figure(w.headline_value)} {w.headline_unit}",
             rounded(w.qps, 1) if w.qps is not None else "–",
             rounded(w.latency_avg_ms, 3) if w.latency_avg_ms is not None else "–",
             w.bottleneck or "–", str(w.clients), f"{w.context}/{Path(w.run).name}"]
            for w in rep.hardware_overview]
    hardware = rep.context.split("--")[0]
    return Table(["Benchmark", "Headline", "QPS", "Latency avg (ms)", "Bottleneck",
                  "Clients", "Run"], rows,
                 caption=f"Executive summary: every workload on {hardware} (contexts "
                         f"{hardware}--*), the best finished run of each at its best client "
                         "count")


def _plan_of(run: RunData | None) -> dict | None:
    if run is None:
        return None
    return (run.manifest.get("config") or {}).get("plan")


def _config_matrix(rep: ContextReport) -> Section:
    s = Section("2. Configuration matrix")
    plan = _plan_of(rep.best)
    if plan and plan.get("settings"):
        from pgdyno.config.model import GROUP_TITLES

        groups: dict[str, list[dict]] = {}
        for setting in plan["settings"]:
            groups.setdefault(setting.get("group", "pg_other"), []).append(setting)
        s.paragraphs.append(Text.of("Config ", Strong(str(plan.get("name"))), " of the best "
                                    f"run ({sum(len(v) for v in groups.values())} "
                                    "parameters)."))
        for group in [g for g in GROUP_TITLES if g in groups] + \
                [g for g in groups if g not in GROUP_TITLES]:
            rows = [[x.get("key") or x.get("name"), str(x.get("value")),
                     str(x.get("rationale") or "")] for x in groups[group]]
            s.tables.append(Table(["Parameter", "Value", "Rationale"], rows,
                                  caption=GROUP_TITLES.get(group, group)))
    else:
        s.paragraphs.append(Text.of("The best run used stock PostgreSQL settings (no config "
                                    "plan); the server's non-default settings follow. ",
                                    Code("pgdyno tune"), " prints the full matrix for a "
                                    "machine."))
    if rep.best is not None:
        server = rep.best.manifest.get("server") or {}
        settings = settings_with_stock(server.get("non_default_settings") or {},
                                       server.get("stock_settings"))
        cfg = rep.best.manifest.get("config") or {}
        rows = [[k, v, str((cfg.get("sources") or {}).get(k, ""))]
                for k, v in settings.items() if k not in ("port", "unix_socket_directories")]
        s.tables.append(Table(["Setting", "Value", "Source"], rows,
                              caption=f"{rep.best.label}: effective non-default settings "
                                      f"(run {rep.best.path.name})"))
        for label in config_labels(rep.runs):
            run = next(r for r in rep.runs if r.label == label)
            if label == rep.best.label:
                continue
            diff = [c for c in settings_diff(rep.best.manifest, run.manifest)
                    if c.layer in ("postgresql", "config")]
            s.tables.append(Table(["Setting", rep.best.label, label],
                                  [[c.name, c.before, c.after] for c in diff],
                                  caption=f"{label}: differences from {rep.best.label}"))
    return s


def _sizing(rep: ContextReport) -> Section:
    s = Section("3. Sizing math")
    plan = _plan_of(rep.best)
    lines = (plan or {}).get("sizing") or []
    if lines:
        s.tables.append(Table(["Section", "Figure", "Formula", "Value"],
                              [[x["section"], x["label"], x["formula"], x["value"]]
                               for x in lines]))
    else:
        s.paragraphs.append("No sizing math: the best run's config was not produced by the "
                            "config engine (use --config pgtune|tuned|FILE).")
    if _not_throughput(rep):
        s.paragraphs.append(f"No TPS per vCPU: {_not_throughput(rep)}.")
    if rep.per_core_tps is not None:
        s.preformatted.append(
            f"CPU: {rounded(rep.best_tps, 1)} TPS / {rep.host_vcpus} vCPU "
            f"= {rounded(rep.per_core_tps, 1)} TPS per vCPU (mean of the best config's runs)")
        s.preformatted.append(
            f"CPU-bound TPS on this host: {rep.host_vcpus} vCPU x {rounded(rep.per_core_tps, 1)} "
            f"TPS per vCPU (measured) = {rounded(rep.per_core_tps * (rep.host_vcpus or 0), 1)}")
    b = rep.cpu_baseline
    if b is not None:
        s.preformatted.append(
            f"CPU baseline: sysbench cpu, {b.threads} threads, primes up to {b.max_prime:,}: "
            f"{rounded(b.events_per_s_per_core, 1)} events/s per vCPU ({Path(b.run).name})")
        if rep.per_core_tps is not None:
            s.preformatted.append(
                f"Cost: {rounded(rep.per_core_tps, 1)} TPS / {rounded(b.events_per_s_per_core, 1)} "
                f"events/s = {rounded(1000 * rep.per_core_tps / b.events_per_s_per_core, 1)} "
                "TPS per 1,000 CPU events/s (what a faster core is projected to buy)")
    return s


def _journal(rep: ContextReport) -> Section:
    s = Section("4. Benchmark journal")
    for e in rep.journal:
        body = [f"OS: {os_event_line(ev)}" for ev in e.os_events]
        body += [f"Run {e.number}: {e.label} ({e.status})", f"Date: {e.started_at}",
                 f"Run: {e.run}"]
        h = e.headline
        if h is not None and h.is_tps:
            body.append(f"TPS {rounded(h.tps, 1)} at {h.clients} clients, latency "
                        f"{rounded(h.latency_avg_ms, 3)} ms "
                        f"(stddev {rounded(h.latency_stddev_ms, 3)})")
        elif h is not None:
            body.append(f"{h.label} {h.amount()} at {h.clients} clients")
        if e.previous is not None:
            body.append(f"Changes since run {e.previous}:\n{changes_block(e.changes)}")
            if e.change_pct is not None and h is not None and h.is_tps:
                body.append(f"TPS change vs run {e.previous}: {signed_pct(e.change_pct)} "
                            f"({e.change_verdict or 'no interval'})")
            elif e.change_pct is not None and h is not None:
                body.append(f"{h.label} change vs run {e.previous}: {signed_pct(e.change_pct)} "
                            f"({h.better}; {e.change_verdict or 'no interval'})")
        if e.timeline:
            body.append(f"Timeline (iteration 1, {e.timeline_block_s} s means):\n" + "\n".join(
                f"{end:>4}s: {tps:>10,.0f} TPS" for end, tps in e.timeline))
        body += [f"Note: {n}" for n in e.notes]
        body += [f"User note: {n}" for n in e.user_notes]
        if e.root_cause:
            body.append(f"Root cause: {e.root_cause}")
        if e.rollback:
            body.append(f"Action: {e.rollback}")
        s.preformatted.append("\n".join(body))
    if rep.os_events_after:
        last = f"After run {rep.journal[-1].number}" if rep.journal else "OS changes"
        s.preformatted.append("\n".join([f"{last}:"] + [f"OS: {os_event_line(ev)}"
                                                        for ev in rep.os_events_after]))
    if not rep.journal:
        s.paragraphs.append("No runs.")
    return s


def _validation(rep: ContextReport) -> Section:
    s = Section("5. Validation runs")
    v = rep.validation
    if v is None:
        s.paragraphs.append(Text.of("None: ", Code("pgdyno validate WORKLOAD"), " runs cold, "
                                    "warming, warm and after-CHECKPOINT states on one "
                                    "server."))
        return s
    s.tables.append(Table(["State", "TPS", "Latency avg (ms)", "Seconds", "Slice"], [
        [st.name, rounded(st.tps, 1), rounded(st.latency_avg_ms, 3), str(st.seconds),
         f"iteration {st.iteration}, t {st.first_s}–{st.last_s} s: {st.description}"]
        for st in v.states], caption=f"Run {v.run_dir}"))
    s.paragraphs += [f"Note: {n}" for n in v.notes]
    cold, warm = v.state("cold"), v.state("warm")
    if cold and warm and warm.tps:
        s.paragraphs.append(f"Cold cache ran at {100 * cold.tps / warm.tps:.0f}% of warm.")
    return s


def _key_findings(rep: ContextReport) -> Section:
    """Each config against the baseline: a table of every finding, the clear ones in words
    above it."""
    s = Section("6. Key findings")
    rows = [[f"{f.config}: {m.title}", str(m.clients or "run"), _value(f, m.baseline_mean),
             _value(f, m.candidate_mean), signed_pct(m.change_pct), interval(m),
             verdict_text(m)] for f in rep.findings for m in [f.comparison]]
    if rows:
        values = "per-iteration values" if all(f.comparison.sample == "iteration"
                                               for f in rep.findings) else (
            "per-iteration values, or per-stream ones where the workload has streams")
        s.body.append(Paragraph(Text.of(
            "Each config against ", Strong(rep.baseline_label), f" (Welch interval on "
            f"{values}, see ", Code("pgdyno compare"), ").")))
    elif _host_only(rep):
        s.body.append(Paragraph(f"No configs to compare: {_host_only(rep)}."))
    else:
        s.body.append(Paragraph("Only one config was measured: nothing to compare."))
    clear: list[Inline] = []
    for f in rep.findings:
        m = f.comparison
        if f.headline and m.verdict in (FASTER, SLOWER):
            what = "TPS" if f.is_tps else f"{prose(m.label)} ({better_words(m.direction)})"
            clear.append(Text.of(f"{f.config} is ", Strong(m.verdict), f" than "
                                 f"{rep.baseline_label} at {m.clients} clients: "
                                 f"{signed_pct(m.change_pct)} {what}, interval {interval(m)}."))
    t = (rep.best.telemetry if rep.best else None) or {}
    busy = ((t.get("cpu") or {}).get("busy") or {}).get("avg")
    if busy is not None:
        clear.append(f"CPU busy {busy:.0f}% on average during the best run.")
    if clear:
        s.body.append(BulletList(clear))
    if rows:
        s.body.append(Table(["Config: metric", "Clients", "Baseline", "Config", "Change",
                             "Interval", "Verdict"], rows))
    return s


def _value(f: Finding, value: float) -> str:
    """A finding's mean: TPS and latency as ever, other headlines with the decimals their
    size needs (a 0.0093 s geometric mean, not "0.009")."""
    return rounded(value, 3) if f.is_tps or f.comparison.unit == "ms" else figure(value)


def _price_performance(rep: ContextReport) -> Section:
    s = Section("7. Price/performance")
    if not rep.prices:
        why = _not_throughput(rep) or _host_only(rep)
        s.paragraphs.append(f"Does not apply: {why}; prices are projected from TPS per vCPU."
                            if why else "No measured TPS to price.")
        return s
    rows = []
    for p in rep.prices:
        rows.append([p.instance, str(p.vcpus), rounded(p.tps, 1), p.tps_basis,
                     _usd(p.price_month_usd), rounded(p.tps_per_usd, 2), _usd(p.spot_month_usd),
                     rounded(p.spot_tps_per_usd, 2)])
    s.tables.append(Table(["Instance", "vCPU", "TPS", "TPS basis", "On-demand $/mo",
                           "TPS per $/mo", "Spot $/mo", "Spot TPS per $/mo"], rows))
    s.paragraphs.append(
        f"The first row is this host ({rep.host_vcpus} vCPU), measured. An instance counts as "
        "measured only when it has this host's vCPUs and CPU model; the others are projected "
        "linearly from the measured TPS per vCPU (section 10), scaled by core speed where "
        "this context has a CPU baseline and the profile a per-core figure (\"CPU-adjusted\"). "
        "Prices come from the hardware catalogue (spot prices are estimates that vary by zone "
        "and hour). A CPU model other than this host's changes more than raw core speed "
        "(caches, memory): measure on the instance to confirm.")
    if rep.size_scaling is not None and rep.size_scaling.exponent is not None:
        s.paragraphs.append("Here other machines of the results tree measured this workload: "
                            "their sizes are \"measured on\" them, and the rest are projected "
                            "from the fit of those measurements, not linearly (section 10).")
    if rep.hardware is None:
        s.paragraphs.append("No hardware profile was given (--hardware NAME): every catalogue "
                            "instance is listed.")
    return s


def _usd(value: float | None) -> str:
    return f"${value:,.2f}" if value else "–"


def _against(rep: ContextReport) -> Section:
    s = Section("8. Differences against another context")
    other = rep.against
    if other is None:
        s.paragraphs.append("No other context given (--against CONTEXT).")
        return s
    if rep.best is None or other.best is None:
        s.paragraphs.append(f"{other.context}: no finished run to compare.")
        return s
    changes = settings_diff(other.best.manifest, rep.best.manifest)
    s.paragraphs.append(Text.of("Best run of ", Code(other.context), " → best run of ",
                                Code(rep.context), "."))
    s.tables.append(Table(["Layer", "Setting", other.context, rep.context],
                          [[c.layer, c.name, c.before, c.after] for c in changes]))
    ha, hb = other.best_headline, rep.best_headline
    if ha is None or hb is None or ha.is_tps or hb.is_tps or ha.metric != hb.metric:
        a, b = other.best_tps, rep.best_tps
        first = ["TPS", rounded(a, 1), rounded(b, 1),
                 f"{b / a:.2f}" if a and b is not None else "–"]
    else:
        a, b = other.best_value, rep.best_value
        first = [f"{hb.label} ({hb.unit}, {hb.better})", figure(a), figure(b),
                 f"{b / a:.2f}" if a and b is not None else "–"]
    s.tables.append(Table(["Metric", other.context, rep.context, "Ratio"], [
        first,
        ["vCPU", str(other.host_vcpus), str(rep.host_vcpus),
         f"{rep.host_vcpus / other.host_vcpus:.2f}" if other.host_vcpus else "–"]]))
    return s


def _hardware_limits(rep: ContextReport) -> Section:
    s = Section("9. Hardware limits")
    t = (rep.best.telemetry if rep.best else None) or {}
    limits = t.get("hardware_limits") or []
    if not limits:
        s.paragraphs.append("No telemetry in the best run (run without --no-telemetry to get "
                            "CPU, IOPS and bandwidth against their limits).")
        return s
    s.tables.append(Table(
        ["Resource", "Limit", "Basis", "Used avg", "Used peak", "% of limit", "Note"],
        [[x.get("resource", ""), f"{rounded(x.get('capacity'))} {x.get('unit')}",
          x.get("basis") or "–", rounded(x.get("used_avg")), rounded(x.get("used_peak")),
          rounded(x.get("pct_avg"), 1), x.get("note", "")] for x in limits],
        caption=Text.of("Basis: measured = the host's fio baseline (",
                        Code("pgdyno bench fio"), "), catalogue = the hardware profile's "
                        "published figure; – = the resource's own bound")))
    if not any(x.get("basis") == "measured" for x in limits):
        s.paragraphs.append(Text.of("The devices' IOPS and bandwidth limits are not measured "
                                    "on this host: ", Code("pgdyno bench fio"), " measures "
                                    "them, and later runs read their figures against them."))
    return s


def _scaling(rep: ContextReport) -> Section:
    s = Section("10. Scaling projection")
    if rep.per_core_tps is None:
        why = _not_throughput(rep) or _host_only(rep)
        s.paragraphs.append(f"Does not apply: {why}; the projection scales TPS per vCPU."
                            if why else "No finished run.")
        return s
    sizes = rep.size_scaling
    if sizes is not None and sizes.exponent is not None:
        s.paragraphs.append(Text.of(
            f"Measured, not assumed: this workload's best config on {len(sizes.fitted)} "
            f"machines with this host's CPU grows as TPS ∝ vCPU^{sizes.exponent:.2f} "
            f"(least squares on the logarithms; 1 would be linear, "
            f"{100 * 2 ** (sizes.exponent - 1):.0f}% of linear per doubling). Sizes not "
            f"measured are projected from the nearest measured size along that curve "
            f"(its exponent capped at 1: growth faster than linear between small machines "
            "does not carry on), ", _speed_assumption(rep), "; beyond the sizes measured the "
            "projection is an extrapolation and says so."))
    else:
        s.paragraphs.append(Text.of(
            f"Assumption: throughput grows linearly with vCPUs at the measured "
            f"{rounded(rep.per_core_tps, 1)} TPS per vCPU (best config, {rep.host_vcpus} "
            "vCPU), ", _speed_assumption(rep), ", and storage and locks that keep up. Lock and "
            "WAL contention at higher concurrency make real scaling sub-linear."))
    if sizes is not None:
        s.tables.append(Table(
            ["Machine", "Context", "vCPU", "CPU", "TPS", "In the fit"],
            [[m.hardware, m.context, str(m.vcpus), m.cpu_model or "–", rounded(m.tps, 1),
              "yes" if m.context in sizes.fitted else "no"] for m in sizes.points],
            caption="The same workload and parameters measured on each machine of the "
                    "results tree (its best config's mean TPS)"))
        s.paragraphs += [f"Note: {n}" for n in sizes.notes]
    rows = [[p.instance, str(p.vcpus), rounded(p.tps, 1), p.tps_basis] for p in rep.prices]
    s.tables.append(Table(["Instance", "vCPU", "Est. TPS", "Basis"], rows))
    c = rep.scaling
    if c is None:
        s.paragraphs.append(Text.of("The assumption was not checked here: ",
                                    Code("pgdyno scaling-check WORKLOAD"), " runs the workload "
                                    "with the server on 1 and 2 cores."))
    else:
        rows = [[str(n), rounded(t, 1), Path(d).name] for n, t, d in
                zip(c.cores, c.tps, c.run_dirs, strict=True)]
        s.tables.append(Table(["Server cores", "TPS", "Run"], rows,
                              caption=f"Measured check, {c.clients} clients, workload "
                                      f"{_workload_of(rep, c.run_dirs[0])}, server pinned "
                                      "by CPU affinity (pgbench not pinned)"))
        if c.efficiency is not None:
            s.paragraphs.append(_efficiency_text(c))
        s.paragraphs += [f"Note: {n}" for n in c.notes]
    return s


def _speed_assumption(rep: ContextReport) -> Inline:
    b = rep.cpu_baseline
    if b is None:
        return Text.of("the same CPU speed per core (run ", Code("pgdyno bench cpu"), " in "
                       "this context to adjust for instances whose profile gives their "
                       "sysbench events/s per core)")
    if b.max_prime != BASELINE_PRIME:
        return (f"the same CPU speed per core (the CPU baseline used primes up to "
                f"{b.max_prime:,}; profiles give events/s at {BASELINE_PRIME:,}, so no "
                "adjustment)")
    return (f"a core speed scaled by the instance's sysbench cpu events/s per core over this "
            f"host's measured {rounded(b.events_per_s_per_core, 1)} where its profile gives one "
            "(\"CPU-adjusted\"), else the same speed")


_LINEARITY_WORDS = {"holds": "holds here", "fails": "does not hold here",
                    "undetermined": "cannot be confirmed or rejected at this noise",
                    "plausible": "looks plausible", "doubtful": "looks doubtful"}


def _efficiency_text(c: ScalingCheck) -> Text:
    text = Text.of(f"Scaling efficiency {min(c.cores)}→{max(c.cores)} cores: ",
                   Strong(f"{100 * c.efficiency:.0f}%"), " of linear")
    words = _LINEARITY_WORDS[linear_verdict(c) or "doubtful"]
    if c.efficiency_low is None:
        return text + Text.of(f" (one run per core count: no interval; the linear assumption "
                              f"{words} here, {100 * LINEAR:.0f}% threshold; ",
                              Code("--pairs 3"), " measures it with an interval).")
    interval_text = f"95% interval {100 * c.efficiency_low:.0f}–{100 * c.efficiency_high:.0f}%"
    return text + (f" ({interval_text}): the linear assumption {words} "
                   f"({100 * LINEAR:.0f}%).")


def _workload_of(rep: ContextReport, run_dir: str) -> str:
    return next((r.workload for r in rep.runs if str(r.path) == run_dir), "?")


def _recommendations(rep: ContextReport) -> Section:
    s = Section("11. Recommendations")
    s.body.append(BulletList([_recommendation(r, rep.baseline_label)
                              for r in rep.recommendations]))
    return s


def _recommendation(r: Recommendation, baseline: str) -> Inline:
    """One recommendation in words (``pgdyno.campaign.recommendations`` decides them)."""
    f = r.finding
    m = f.comparison if f is not None else None
    if r.kind == USE and f is not None and m is not None:
        return Text.of("Use ", Strong(r.config), f": {signed_pct(m.change_pct)} {_what(f)} "
                       f"over {baseline} at {m.clients} clients (interval {interval(m)}).")
    if r.kind == DURABILITY_RISK:
        return (f"But {', '.join(r.settings)}=off trades durability for speed: a crash can "
                "lose committed transactions" + (" or corrupt data" if r.corrupts else "")
                + "; use it only where that is acceptable.")
    if r.kind == AVOID and f is not None and m is not None:
        return (f"Avoid {r.config}: {signed_pct(m.change_pct)} {_what(f)} against {baseline} "
                f"(interval {interval(m)}).")
    if r.kind == KEEP:
        return (f"No config beat {baseline} beyond the noise: keep it, or measure "
                "longer/more iterations before changing.")
    if r.kind == FAILED_RUN:
        return f"Do not reuse run {r.run}'s changes ({r.config}): {r.reason}"
    if r.kind == SIZE_HEADROOM:
        return (f"This size: sustained load under ~{rounded(r.limit_tps, 0)} TPS "
                f"({100 * (r.share or 0):.0f}% of the best config's mean "
                f"{rounded(r.tps, 0)}); move up a size when the load is above it, or when "
                "cold starts must meet the warm figure.")
    if r.kind == PREWARM:
        return (f"Cold cache runs at {100 * (r.share or 0):.0f}% of warm: pre-warm after "
                "restarts (pg_prewarm) or size for the cold figure.")
    if r.kind == SUBLINEAR:
        return ("Measured scaling looks sub-linear: expect less than the projected TPS on "
                "larger sizes; measure there before buying.")
    if r.kind == NOISY_SCALING:
        return Text.of("The scaling check was too noisy to confirm the projection: repeat "
                       "it (", Code("pgdyno scaling-check --pairs 3"), ") on a quiet machine.")
    raise ValueError(f"recommendation {r.kind}: no wording")


def _what(f: Finding) -> str:
    """The measure a recommendation names: "TPS", or another headline's label."""
    return "TPS" if f.is_tps else prose(f.comparison.label)


def _references(rep: ContextReport) -> Section:
    rows = [[str(i), r.label, r.status, str(r.path / "summary.json"),
             str(r.path / "report.md") if (r.path / "report.md").exists() else "–"]
            for i, r in enumerate(rep.runs, start=1)]
    s = Section("12. File references", tables=[Table(
        ["Run", "Config", "Status", "Summary", "Report"], rows)])
    if rep.best is not None:
        server = rep.best.manifest.get("server") or {}
        engine = (registry.get(rep.best.workload).engine
                  if rep.best.workload in registry.names() else "?")
        s.paragraphs.append(f"PostgreSQL {server.get('version', '–')}; workload "
                            f"{rep.best.workload} ({engine}).")
    return s


def journal_document(results_dir: Path, context: str) -> Document:
    """The journal section alone (``pgdyno journal CONTEXT``)."""
    rep = journal_context(results_dir, context)
    return Document(title=f"Journal: {context}", sections=[_journal(rep)])


# ===== files ==================================================================================

def write_context_report(rep: ContextReport, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = context_document(rep)
    html.write_document(doc, out_dir, "context-report")
    write_json_atomic(out_dir / "context-report.json", report_json(rep))
    return out_dir / "context-report.md"
