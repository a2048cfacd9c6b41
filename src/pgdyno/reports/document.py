"""The report as data: sections of typed blocks (paragraphs, bullet lists, tables, images,
preformatted text) whose words are typed too (plain words, stressed words, code, links),
and the run report built from a summary.

Markdown (``reports.markdown``) and HTML (``reports.html``) render the same ``Document``,
each from the data and neither from the other's text, so the two formats can never
disagree about a number, and a link is a link in both.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from pgdyno.analysis.summary import RunSummary, five_second_table
from pgdyno.config.units import setting_value, shown_value
from pgdyno.options import BenchOptions
from pgdyno.reports.platform_rows import platform_rows
from pgdyno.results.load import LoadRecord
from pgdyno.results.load import seconds as load_seconds
from pgdyno.results.rundir import RunPlan
from pgdyno.targets import class_of_kind
from pgdyno.targets.local import BASE_SETTINGS
from pgdyno.units import alike, count, mean_sd, rounded

PCT_COLUMNS = ("p50", "p75", "p80", "p90", "p95", "p99", "p99.9")
MISSING = ("", "–", "-", "n/a")
"""Cells that hold no value: they do not decide whether a column is numeric."""
_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SEPARATORS = re.compile(r"[\s±/()→–\-~≈<>≤≥×,;:\[\]]+")
_MEASURES = frozenset({
    "%", "%util", "us", "µs", "ms", "s", "min", "h", "d", "b", "kb", "mb", "gb", "tb", "kib",
    "mib", "gib", "tib", "pib", "8kb", "mb/s", "gb/s", "kb/s", "b/s", "kib/s", "mib/s", "gib/s",
    "tib/s", "pib/s", "iops", "x", "cores",
    "backends", "pages", "°c", "w/s", "r/s", "ops/s",
})
"""Words of the measures pgdyno's own telemetry and settings print ("12.5 ms", "3 cores",
"7.2 MiB/s"); lower case. A workload's units are not listed here: a figure shown with its
metric's unit is a ``Quantity`` (``MetricSpec.cell``), a number whatever the unit says."""


CHANGE_SIGN = (
    "Sign convention: a change is B/A − 1 of the metric's own value, whatever the metric: "
    "+5.7% on a time (a geometric mean of query times, a latency) means B took 5.7% longer, "
    "+5.7% on a throughput that B did 5.7% more. Whether that is better or worse is the word "
    "beside it (faster or slower; higher or lower for a metric that has no better "
    "direction), never the sign.")
"""The one sign convention of every comparison pgdyno writes (compare, TPROC-H's speedup
sections): stated in each report that shows a change."""


def change_text(change_pct: float | None, direction: int) -> str:
    """A change in % under CHANGE_SIGN with its word: "+5.7% (slower)" for a time that grew
    (``direction`` -1: lower is better), "+5.7% (faster)" for a throughput; a description
    of the two means, not a verdict."""
    if change_pct is None or math.isnan(change_pct):
        return "–"
    if round(change_pct, 1) == 0:
        return f"{change_pct:+.1f}% (same)"
    up = change_pct > 0
    word = ("higher" if up else "lower") if direction == 0 else (
        "faster" if up == (direction > 0) else "slower")
    return f"{change_pct:+.1f}% ({word})"


class Quantity(str):
    """A table cell holding a figure and the unit its spec declares ("5,120 new orders/min",
    "812 events/s"): right-aligned as a number, whatever the unit's words."""


def quantity(text: str, unit: str) -> str:
    """``text`` (a formatted figure) with ``unit``; a missing figure stays missing."""
    if text.strip() in MISSING:
        return text
    return Quantity(f"{text} {unit}".strip())


# ----- inline content: the words of a paragraph, a list item or a table cell -------------

@dataclass(frozen=True)
class Strong:
    """Words a sentence stresses: a status, a verdict, the question a study answers."""

    text: str


@dataclass(frozen=True)
class Code:
    """A command, an option or a name as it is typed: ``pgdyno bench fio``."""

    text: str


@dataclass(frozen=True)
class Link:
    """Words that lead elsewhere: ``target`` is ``#anchor`` (a section of the same page) or
    a path relative to the page's directory."""

    text: str
    target: str


Span = str | Strong | Code | Link
"""One piece of inline content; a plain ``str`` is words, shown as they are."""


@dataclass(frozen=True)
class Text:
    """Inline content in order: ``Text.of("Status ", Strong("ok"), ".")``."""

    spans: tuple[Span, ...] = ()

    @classmethod
    def of(cls, *parts: Inline) -> Text:
        """The parts in order, a ``Text`` among them opened into its spans."""
        spans: list[Span] = []
        for part in parts:
            spans.extend(part.spans if isinstance(part, Text) else [part])
        return cls(tuple(s for s in spans if s != ""))

    def plain(self) -> str:
        return "".join(plain(s) for s in self.spans)

    def __contains__(self, words: str) -> bool:
        """Whether the text says ``words`` (markup aside), as ``in`` asks of a str."""
        return words in self.plain()

    def __add__(self, other: Inline) -> Text:
        return Text.of(self, other)

    def __radd__(self, other: Inline) -> Text:
        return Text.of(other, self)


Inline = Span | Text
"""What a paragraph, a list item or a table cell holds."""


def plain(content: Inline) -> str:
    """The words alone, without their markup: for the terminal, and to classify a cell."""
    if isinstance(content, str):
        return content
    if isinstance(content, Text):
        return content.plain()
    return content.text


# ----- blocks: what a section holds -----------------------------------------------------

@dataclass
class Table:
    headers: list[str]
    rows: list[list[Inline]]
    caption: Inline = ""

    def numeric_columns(self) -> list[bool]:
        """Per column: right-align it (numbers) or not (text). Markdown and HTML both ask."""
        return [is_numeric_column([row[i] for row in self.rows if i < len(row)])
                for i in range(len(self.headers))]


def is_numeric_cell(cell: Inline) -> bool:
    """A number, possibly with thousands separators, a unit, %, ±, a range or a peak in
    brackets ("3,838", "12.5 ms", "4 (13)", "3,838 ± 12", "0 / 0 (0)", "15.4%")."""
    if isinstance(cell, Quantity):
        return True
    text = plain(cell).strip()
    if not _NUMBER.search(text):
        return False
    rest = _SEPARATORS.split(_NUMBER.sub(" ", text))
    return all(word.lower() in _MEASURES for word in rest if word)


def is_numeric_column(cells: list[Inline]) -> bool:
    """Numeric when every cell that holds a value is a number (missing cells do not count)."""
    values = [c for c in cells if plain(c).strip() not in MISSING]
    return bool(values) and all(is_numeric_cell(c) for c in values)


@dataclass
class Paragraph:
    text: Inline


@dataclass
class BulletList:
    items: list[Inline]


@dataclass
class Image:
    caption: str
    path: str
    """Relative to the page's directory (the HTML page embeds the file)."""


@dataclass
class Preformatted:
    text: str
    """Shown as it is, in a fixed-width font: a log, a diff, a timeline."""


@dataclass
class Beside:
    """Two columns side by side where the page is wide enough (the HTML page): ``main``
    and, at its right, ``aside`` (a chart beside the figures it draws). Markdown shows one
    after the other."""

    main: list[Block]
    aside: list[Block]


Block = Paragraph | BulletList | Table | Image | Preformatted | Beside


@dataclass
class Section:
    title: str
    level: int = 2
    paragraphs: list[Inline] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    """(caption, path relative to the run directory)."""
    preformatted: list[str] = field(default_factory=list)
    anchor: str = ""
    """An id other sections link to (``Link(text, "#anchor")``); none when empty."""
    body: list[Block] = field(default_factory=list)
    """Blocks in an order of their own (words between two tables, a list under a table),
    shown after the paragraphs, tables and preformatted text, before the images."""
    folded: bool = False
    """Long and for the curious (a client count's full telemetry): the HTML page shows its
    title and folds the rest (the section and the deeper-level sections after it) until
    the reader opens it; Markdown shows it as any other."""

    def blocks(self) -> list[Block]:
        """Everything the section shows, in order: the one list both renderers walk."""
        return [*(Paragraph(p) for p in self.paragraphs), *self.tables,
                *(Preformatted(p) for p in self.preformatted), *self.body,
                *(Image(caption, path) for caption, path in self.images)]


@dataclass
class Document:
    title: str
    sections: list[Section]
    contents: bool = False
    """A table of contents (the top-level sections) after the first section, on the HTML
    page: a long report's way to what a reader looks for."""


@dataclass(frozen=True)
class ClientHeadline:
    """The headline metric at one client count, as the run's outcome computed it: the mean
    of its iterations and the 95% t interval of that mean."""

    clients: int
    at: str
    """The client count in the workload's words ("8 clients", "4 warehouses' terminals")."""
    mean: float
    interval: tuple[float, float] | None
    """None with fewer than two iterations."""
    iterations: int
    p99_ms: float | None = None


@dataclass
class RunView:
    """What the run report shows besides the summary: its record and options."""

    manifest: dict
    plan: RunPlan
    opts: BenchOptions
    dataset: str
    """The workload's words for its dataset: "scale 10", "10 warehouses"."""
    answer: list[tuple[str, str]] = field(default_factory=list)
    """The run's outcome as (item, statement) pairs, the report's first section: the lines
    ``pgdyno bench`` printed when the run ended (``runner.outcome.answer_rows``)."""
    load: LoadRecord | None = None
    """The dataset's load (``results.load``); None when the workload builds none."""
    clients_label: str = "Clients"
    clients: dict[int, str] = field(default_factory=dict)
    """Client count -> what ran at it, in the workload's words ("8 clients")."""
    by_clients: list[ClientHeadline] = field(default_factory=list)
    """The headline at each client count (``runner.outcome``), shown beside its chart."""
    headline: tuple[str, str] = ("TPS", "tx/s")
    """The headline metric's label and unit."""


def build_document(summary: RunSummary, run: RunView, images: dict[str, str],
                   insights: list[Section] | tuple = (), transactions: bool = True) -> Document:
    """The report; ``insights`` (the workload's own, telemetry, verdicts) go after the
    throughput and latency. ``transactions``: whether the pgbench-style transaction sections
    apply (a program workload such as cpu brings all its figures in ``insights``)."""
    answer, chart = _answer(run, images)
    sections = [answer, _overview(summary, run, transactions), _environment(run)]
    if run.load is not None:
        sections.append(_load(run.load))
    if transactions:
        elsewhere = {k: v for k, v in images.items() if k != chart}  # each plot once
        sections += [_tps(summary, elsewhere), _latency(summary, elsewhere)]
        if run.opts.rate_tps is not None:
            sections.append(_fixed_rate(summary, run.opts))
        if any(c.scripts for c in summary.per_clients):
            sections.append(_scripts(summary))
    sections += list(insights)
    if transactions:
        sections += [_iterations(summary), _timeline(summary)]
    if summary.warnings:
        sections.append(_warnings(summary))
    sections.append(_files(run.manifest, run.plan))
    return Document(title=f"pgdyno: {run.plan.workload} on {run.plan.context}",
                    sections=sections, contents=True)


ANSWER_CHARTS = (("scaling", "TPS and p99 latency against clients"),
                 ("tps_timeline", "TPS over time"))
"""The chart shown beside the headline by clients, the first the run has: the scaling
curve needs two client counts."""


def _answer(run: RunView, images: dict[str, str]) -> tuple[Section, str | None]:
    """What the run answers, first: the headline at each client count with its interval,
    beside its chart; then the peak, where it saturates, p99 and the verdict there, where
    the dataset lived and how much of it was cached, and its load. Returns the section and
    the name of the chart it shows (None: none)."""
    if not run.answer:
        manifest = run.manifest
        why = f": {manifest['reason']}" if manifest.get("reason") else ""
        return Section("Answer", paragraphs=[Text.of(
            "No headline figure: the run ended ", Strong(manifest.get("status", "unknown")),
            f" before any iteration measured one{why}.")]), None
    said = Table(["", "What this run measured"], [[item, text] for item, text in run.answer])
    chart = next(((name, caption) for name, caption in ANSWER_CHARTS if name in images), None)
    if not run.by_clients or (chart is None and len(run.by_clients) < 2):
        return Section("Answer", tables=[said]), None  # the statements say it all
    figures = _by_clients(run)
    if chart is None:
        return Section("Answer", body=[figures, said]), None
    # The figures beside their chart first: on the first screen however many statements
    # follow.
    return Section("Answer", body=[Beside([figures], [Image(chart[1], images[chart[0]])]),
                                   said]), chart[0]


def _by_clients(run: RunView) -> Table:
    """The headline at each client count: mean of the iterations, its 95% interval."""
    label, unit = run.headline
    p99 = any(c.p99_ms is not None for c in run.by_clients)  # none: a workload without
    rows: list[list[Inline]] = []
    for c in run.by_clients:
        low, high = c.interval if c.interval is not None else (None, None)
        mean, low_text, high_text = alike(c.mean, low, high)
        rows.append([c.at, mean, f"{low_text} – {high_text}" if c.interval else "–",
                     count(c.iterations), *([rounded(c.p99_ms, 2)] if p99 else [])])
    metric = label if label.lower() == unit.lower() else f"{label} ({unit})"
    return Table([run.clients_label, metric, "95% interval", "Iterations",
                  *(["p99 (ms)"] if p99 else [])], rows,
                 caption=f"{label} by {run.clients_label.lower()}: the mean of the "
                         "iterations and its 95% t interval (none from one iteration)")


def _load(record: LoadRecord) -> Section:
    """The dataset's load phases: seconds and rows/s each (a reused dataset: one line)."""
    if record.reused:
        when = (f"its build took {load_seconds(record.seconds)} in an earlier run"
                if record.seconds is not None else "its build time was not recorded")
        return Section("Load", paragraphs=[f"The dataset was reused, not loaded again: "
                                           f"{when}."])
    rows = [[phase.words, load_seconds(phase.seconds),
             count(phase.rows_per_s) if phase.rows_per_s is not None else "–"]
            for phase in record.phases]
    rows.append(["whole load", load_seconds(record.seconds),
                 count(record.rows_per_s) if record.rows_per_s is not None else "–"])
    rows_note = f"{record.rows:,} rows loaded; " if record.rows else ""
    return Section("Load", paragraphs=[f"Note: {record.note[0].upper()}{record.note[1:]}."]
                   if record.note else [],
                   tables=[Table(["Phase", "Time", "Rows/s"], rows, caption=(
                       f"{rows_note}rows/s: the dataset's rows over the phase's seconds"))])


def _overview(summary: RunSummary, run: RunView, transactions: bool) -> Section:
    manifest = run.manifest
    status = manifest.get("status", "unknown")
    paras: list[Inline] = [Text.of("Status ", Strong(status), f", {manifest.get('started_at')}"
                                    f" → {manifest.get('ended_at')}.")]
    if manifest.get("reason"):
        paras.append(f"Reason: {manifest['reason']}")
    paras += [f"Note: {n}" for n in manifest.get("notes", [])]
    if not transactions:
        return Section("Summary", paragraphs=paras)
    # A deviation beside its mean at the mean's precision (units.alike), here and below.
    rows = [[count(c.clients), *alike(c.tps_mean, c.tps_iteration_stddev, digits=1),
             rounded(c.latency.mean_ms, 3), rounded(c.latency.percentiles_ms.get("p99"), 3),
             count(c.transactions), count(c.failed)] for c in summary.per_clients]
    table = Table(["Clients", "TPS", "TPS stddev (iterations)", "Latency avg (ms)",
                   "p99 (ms)", "Transactions", "Failed"], rows)
    return Section("Summary", paragraphs=paras, tables=[table])


def _environment(run: RunView) -> Section:
    manifest, plan, opts = run.manifest, run.plan, run.opts
    host = manifest.get("host") or {}
    server = manifest.get("server") or {}
    target = manifest.get("target") or {}
    config = manifest.get("config") or {}
    dataset = manifest.get("dataset") or {}
    remote = manifest.get("database_host")
    machines = None
    if remote:  # --ssh: the database host and this client, side by side
        rows = _machine_rows([remote, host])
        machines = Table(["Machine", f"Database host ({remote.get('destination')})",
                          "Client (this machine, ran the load)"], rows)
        env_rows = [["PostgreSQL", str(server.get("version", "–"))]]
    else:
        env_rows = [*_machine_rows([host]), ["PostgreSQL", str(server.get("version", "–"))]]
    if target:
        env_rows += [
            ["Target", f"{target.get('kind')} ({target.get('pg_bin')})"],
            ["Connection", str(manifest.get("connection") or "–")],
            ["Config", str(config.get("name", "default"))],
        ]
    scripts = ", ".join(f"{s['name']}@{s['weight']}" for s in plan.scripts)
    env_rows.append(["Workload", plan.workload + (f": {scripts}" if scripts else "")])
    if run.dataset:
        built = ("reused" if dataset.get("reused") else "built") if dataset else ""
        env_rows.append(["Dataset", run.dataset + (f" ({built})" if built else "")])
    env_rows += [
        [run.clients_label, _clients(run)],
        ["Duration / warm-up", f"{opts.duration_s} s measured after {opts.warmup_s} s warm-up"],
        ["Iterations", str(opts.iterations)],
    ]
    if target:
        env_rows += [["Protocol", opts.protocol], ["Cache", opts.cache]]
    if opts.rate_tps is not None:
        env_rows.append(["Fixed rate", f"{opts.rate_tps:g} tps, latency limit "
                                       f"{opts.latency_limit_ms or '–'} ms"])
    settings = server.get("non_default_settings") or {}
    stock = server.get("stock_settings") or {}  # pg_settings.boot_val; older runs: none
    setting_rows = [[k, "–" if stock.get(k) is None else shown_value(str(stock[k])),
                     setting_value(v), setting_source(k, config, target.get("kind"))]
                    for k, v in settings.items()]
    return Section("Environment and configuration", tables=[
        *([machines] if machines is not None else []),
        Table(["Item", "Value"], env_rows),
        Table(["Setting", "Stock", "Value", "Source / rationale"], setting_rows,
              caption="Non-default server settings (pg_settings, source not default)"),
    ])


def _clients(run: RunView) -> str:
    """The client counts, in the workload's words where they differ from "N clients"."""
    counts = run.opts.clients
    if all(run.clients.get(c, clients_words(c)) == clients_words(c) for c in counts):
        return ", ".join(str(c) for c in counts)
    return "; ".join(run.clients[c] for c in counts)


def clients_words(clients: int) -> str:
    """"8 clients", "1 client": a client count as reports and the terminal name it."""
    return f"{clients:,} client{'s' if clients != 1 else ''}"


def _machine_rows(machines: list[dict]) -> list[list[str]]:
    """Host, CPU, RAM, kernel, storage and platform rows (``platform_rows``: clock, governor,
    NUMA, mounts, NVMe links), one column per machine (``HostFacts``' keys); a storage role
    one machine lacks is "–" there."""
    rows = [
        ["Host", *[f"{m.get('hostname')} ({m.get('os')})" for m in machines]],
        ["CPU", *[f"{m.get('cpu_model')} × {m.get('cpu_count')}" for m in machines]],
        ["RAM", *[f"{(m.get('ram_bytes') or 0) / 2**30:.1f} GiB" for m in machines]],
        ["Kernel", *[str(m.get("kernel")) for m in machines]],
    ]
    roles = list(dict.fromkeys(str(fact.get("role")) for m in machines
                               for fact in m.get("storage") or []))
    for role in roles:
        rows.append([f"Storage ({role})", *[
            "; ".join(str(f.get("summary", "")) for f in m.get("storage") or []
                      if str(f.get("role")) == role) or "–" for m in machines]])
    return rows + platform_rows(machines)


# pgdyno's own settings on a server it starts (targets/local.py writes them), and why.
_PGDYNO_REASONS = {
    "listen_addresses": "TCP on the loopback only",
    "log_checkpoints": "checkpoint timing for the telemetry",
    "log_line_prefix": "timestamped server log for the telemetry",
    "log_timezone": "server log in UTC, like the telemetry",
    "track_io_timing": "I/O timing in the statistics views",
    "max_connections": "room for the clients and its own sessions",
    "port": "a free port for its instance",
    "unix_socket_directories": "its own socket directory",
}
# What initdb writes into postgresql.conf (locale, time zone, sizes it probed).
_INITDB = frozenset({"DateStyle", "TimeZone", "lc_messages", "lc_monetary", "lc_numeric",
                     "lc_time", "default_text_search_config", "dynamic_shared_memory_type",
                     "shared_buffers", "autovacuum_worker_slots", "max_connections",
                     "log_timezone", "max_wal_size", "min_wal_size"})


def setting_source(name: str, config: dict, target_kind: str | None) -> str:
    """Where a server setting came from: the config engine's rationale when a config set it
    (``manifest["config"]["sources"]``), else pgdyno's own settings or initdb's."""
    sources = {k.lower(): v for k, v in (config.get("sources") or {}).items()}
    if name.lower() in sources:
        return _without_repeat(str(sources[name.lower()]))
    server = class_of_kind(target_kind)
    if server is None or not server.restartable:
        return ""  # a server pgdyno does not own: it cannot know who set what
    if name in _PGDYNO_REASONS and (name in BASE_SETTINGS or name in
                                    ("port", "unix_socket_directories")):
        return f"pgdyno: {_PGDYNO_REASONS[name]}"
    return "initdb" if name in _INITDB else ""


def _without_repeat(source: str) -> str:
    """"--set: --set on the command line" -> "--set on the command line": the config engine
    joins source and rationale, and some rationales already name their source."""
    origin, sep, why = source.partition(": ")
    if sep and origin.removeprefix("file:") in why:
        return why
    return source


def _tps(summary: RunSummary, images: dict[str, str]) -> Section:
    rows = [[count(c.clients), *alike(c.tps_mean, c.tps_median, c.tps_stddev, digits=1),
             mean_sd(c.tps_iteration_mean, c.tps_iteration_stddev, 1),
             str(c.iterations)] for c in summary.per_clients]
    section = Section("Transactions per second", tables=[Table(
        ["Clients", "Average", "Median", "StdDev", "Mean ± stddev across iterations",
         "Iterations"], rows,
        caption="Average, median and stddev over every 1 s interval of every iteration")])
    for name, caption in (("tps_timeline", "TPS over time"),
                          ("tps_histogram", "TPS histogram (1 s intervals of the measured "
                                            "window)"),
                          ("scaling", "TPS and p99 latency against clients")):
        if name in images:
            section.images.append((caption, images[name]))
    return section


def _latency(summary: RunSummary, images: dict[str, str]) -> Section:
    basic = [[count(c.clients), rounded(c.latency.mean_ms, 3), rounded(c.latency.median_ms, 3),
              rounded(c.latency.stddev_ms, 3)] for c in summary.per_clients]
    pct = [[count(c.clients), *[rounded(c.latency.percentiles_ms.get(k), 3) for k in PCT_COLUMNS],
            rounded(c.latency.max_ms, 3)] for c in summary.per_clients]
    section = Section("Transaction latency (ms)", tables=[
        Table(["Clients", "Average", "Median", "StdDev"], basic),
        Table(["Clients", "50th", "75th", "80th", "90th", "95th", "99th", "99.9th", "Max"], pct,
              caption="Percentiles (nearest rank) of every successful transaction, from "
                      + " and ".join(dict.fromkeys(c.latency_source
                                                   for c in summary.per_clients))),
    ])
    if sampled := _sampling_table(summary):
        section.tables.append(sampled)
    for name, caption in (("latency_histogram", "Latency histogram"),
                          ("latency_percentiles", "Latency percentiles"),
                          ("latency_timeline", "Latency over time")):
        if name in images:
            section.images.append((caption, images[name]))
    return section


def _sampling_table(summary: RunSummary) -> Table | None:
    """--tx-logs sample: each iteration's sampling rate and its percentiles' 95% bounds."""
    rows = []
    for it in summary.iterations:
        if (s := it.sampling) is None:
            continue
        for b in s.bounds:
            rows.append([count(it.clients), count(it.iteration), f"{s.sampling_rate:g}",
                         count(s.sampled), count(s.transactions), f"p{b.percentile:g}",
                         rounded(b.value_ms, 3), rounded(b.low_ms, 3), rounded(b.high_ms, 3)])
    if not rows:
        return None
    return Table(["Clients", "Iteration", "Sampling rate", "Sampled", "Transactions",
                  "Percentile", "Sampled value", "95% low", "95% high"], rows,
                 caption="Sampled percentiles (ms) and their distribution-free 95% confidence "
                         "bounds: order statistics of the sample at ranks n·p ± "
                         "1.96·sqrt(n·p·(1−p)); transactions counted by pgbench's progress "
                         "lines")


def _fixed_rate(summary: RunSummary, opts: BenchOptions) -> Section:
    rows = []
    for c in summary.per_clients:
        lag = c.lag
        rows.append([count(c.clients), f"{opts.rate_tps:g}", rounded(c.tps_mean, 1),
                     rounded(lag.mean_ms if lag else None, 3),
                     rounded(lag.percentiles_ms.get("p99") if lag else None, 3),
                     rounded(lag.max_ms if lag else None, 3), count(c.skipped),
                     count(sum(it.late for it in summary.iterations
                               if it.clients == c.clients))])
    return Section("Fixed-rate schedule", paragraphs=[
        "Latency is measured from each transaction's scheduled start (pgbench -R), so stalls "
        "are not hidden by the client waiting (no coordinated omission)."],
        tables=[Table(["Clients", "Target TPS", "Achieved TPS", "Lag avg (ms)", "Lag p99 (ms)",
                       "Lag max (ms)", "Skipped", "Late"], rows)])


def _scripts(summary: RunSummary) -> Section:
    rows = []
    for c in summary.per_clients:
        for s in c.scripts:
            rows.append([count(c.clients), s.name, str(s.weight), count(s.transactions),
                         rounded(s.tps, 1), rounded(s.latency.mean_ms, 3),
                         rounded(s.latency.percentiles_ms.get("p90"), 3),
                         rounded(s.latency.percentiles_ms.get("p99"), 3), count(s.failed)])
    return Section("Per script", tables=[Table(
        ["Clients", "Script", "Weight", "Transactions", "TPS", "Latency avg (ms)", "p90 (ms)",
         "p99 (ms)", "Failed"], rows)])


def _iterations(summary: RunSummary) -> Section:
    rows = [[count(it.clients), str(it.iteration), it.status,
             *alike(it.tps_mean, it.tps_median, it.tps_stddev, digits=1),
             rounded(it.latency.mean_ms, 3),
             rounded(it.latency.percentiles_ms.get("p99"), 3), count(it.failed), count(it.retried),
             rounded(it.pgbench_tps, 1), rounded(it.metrics.get("connection_ms"), 1)]
            for it in summary.iterations]
    return Section("Iterations", tables=[Table(
        ["Clients", "Iteration", "Status", "TPS avg", "TPS median", "TPS stddev",
         "Latency avg (ms)", "p99 (ms)", "Failed", "Retried", "pgbench tps (incl. warm-up)",
         "Connection setup (ms)"], rows, caption="Connection setup: pgbench's initial "
         "connection time, every client connected before its clock starts; outside the "
         "measured window while shorter than the warm-up")])


def _timeline(summary: RunSummary) -> Section:
    section = Section("Timeline (5 s)", paragraphs=[
        "Mean TPS per 5 s block since the first transaction, warm-up included."])
    for it in summary.iterations:
        lines = [f"{end:>4}s: {tps:>10,.0f} TPS" for end, tps in five_second_table(it.timeline)]
        if lines:  # an iteration shorter than one block has none: no empty box
            section.preformatted.append(f"{it.clients} clients, iteration {it.iteration}\n"
                                        + "\n".join(lines))
    if not section.preformatted:
        section.paragraphs = ["Every iteration is shorter than one 5 s block: the TPS over "
                              "time plot shows each second."]
    return section


def _warnings(summary: RunSummary) -> Section:
    rows = [[w.code, w.message, w.advice] for w in summary.warnings]
    return Section("Stability warnings", tables=[Table(["Code", "Finding", "Advice"], rows)])


def _files(manifest: dict, plan: RunPlan) -> Section:
    rows = [[f"{r.clients} clients #{r.iteration}", r.status, ", ".join(r.log_files[:3])
             + (" …" if len(r.log_files) > 3 else "")] for r in plan.records]
    return Section("Commands and files", tables=[Table(["Iteration", "Status", "Logs"], rows)],
                   preformatted=["\n".join(manifest.get("commands", []))])
