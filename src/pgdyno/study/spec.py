"""The ``[study]`` table of a campaign file: the question and the comparisons to make.

::

    [study]
    question = "Does NVMe-aware tuning raise TPROC-C throughput on this drive?"
    title = "Drive qualification"      # optional; default: the campaign's name
    baseline = "default"               # a [[config]] label (default: the first)
    candidate = "tuned"                # a [[config]] label (default: the second, if any)
    sections = ["summary", ...]        # optional: which sections the report has (in the
                                       # report's own order); default: all of them

    [study.validate]                   # optional: a status line
    per_core = 1500                    # the headline per vCPU the sizing math assumes, or
    hardware = "r8g.xlarge"            # a profile whose tps_per_core it takes
    band = [0.7, 0.9]                  # VALIDATED when measured/target is in the band
    workload = "tpcb"                  # default: the first; side: default the baseline
    cache_states = true                # optional: after the cells, one validation run of
                                       # the baseline (cold, warming, warm, after CHECKPOINT)
                                       # on the [study.validate] workload (default: the
                                       # first with a server); shown in the context section

    design = "auto"                    # how baseline and candidate are compared on each
                                       # workload both run: auto | alternating (both
                                       # servers up, the loads in turns of one second:
                                       # the headline only) | interleaved | duet (both
                                       # servers up at once, the load in blocks) |
                                       # sequential (whole runs, one after the other);
                                       # auto takes turns where the load can be paused
    budget = "10m"                     # optional: measuring time of each block comparison
    precision = "2%"                   # optional: stop once the interval is this narrow
    pairs = 10                         # optional: pairs of blocks (the most, with a budget;
                                       # alternating: blocks of turns)

    [size.quick.study]                 # a size may change design, budget, precision, pairs

Every workload of the campaign is compared baseline against candidate when both ran it;
a workload that ran under one config (fio, cpu) is described, not compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.campaign.spec import CampaignSpec
from pgdyno.config.userfile import control_character
from pgdyno.errors import UsageError

SECTIONS = ("summary", "glance", "charts", "workloads", "settings", "context", "conclusions",
            "threats")
"""The study report's sections, in the order the report has them (title and question
always come first, the runs' list always last)."""
DEFAULT_SECTIONS = tuple(s for s in SECTIONS if s != "context")
"""``context`` (each context's report inside the study: configuration matrix, sizing math,
journal, validation, price/performance, limits) only when the file asks."""
STUDY_KEYS = {"question", "title", "baseline", "candidate", "sections", "validate",
              "cache_states", "design", "pairs", "budget", "precision"}
VALIDATE_KEYS = {"per_core", "hardware", "band", "workload", "side", "metric"}


@dataclass(frozen=True)
class ValidateSpec:
    workload: str
    side: str
    metric: str | None
    per_core: float
    source: str
    band: tuple[float, float]


@dataclass(frozen=True)
class StudySpec:
    question: str
    title: str
    baseline: str
    candidate: str | None
    sections: tuple[str, ...]
    validate: ValidateSpec | None = None
    cache_states: bool = False
    """Validation runs: cold, warming, warm and after-CHECKPOINT states of the
    baseline, measured once after the cells."""
    design: str = "auto"
    """How baseline and candidate are compared on each workload they both run: ``auto``,
    ``interleaved``, ``duet`` (both servers up at once, in blocks) or ``sequential``
    (the campaign's cells, whole runs one after the other)."""
    pairs: int | None = None
    """Pairs of blocks a comparison runs (the most, with a budget or a precision)."""
    budget_s: float | None = None
    """Seconds of measuring each block comparison may use."""
    precision_pct: float | None = None
    """Stop a block comparison once its headline's interval is at most ± this, in %."""


def study_of(spec: CampaignSpec) -> StudySpec | None:
    """The campaign's study, checked (None: the campaign states no question)."""
    table = spec.study
    if table is None:
        return None
    where = f"campaign {spec.path}: [study]"
    bad = set(table) - STUDY_KEYS
    if bad:
        raise UsageError(f"{where} {', '.join(sorted(bad))} unknown; accepted: "
                         f"{', '.join(sorted(STUDY_KEYS))}")
    question = _line(table, "question", where, required=True)
    labels = [c.label for c in spec.configs]
    baseline = _line(table, "baseline", where) or labels[0]
    default_candidate = labels[1] if len(labels) > 1 else None
    candidate = _line(table, "candidate", where) or default_candidate
    for key, label in (("baseline", baseline), ("candidate", candidate)):
        if label is not None and label not in labels:
            raise UsageError(f"{where} {key} = {label!r} is not a [[config]] label; "
                             f"accepted: {', '.join(labels)}")
    if candidate == baseline:
        raise UsageError(f"{where} candidate = {candidate!r} is the baseline; accepted: "
                         "another [[config]] label")
    sections = table.get("sections", list(DEFAULT_SECTIONS))
    if (not isinstance(sections, list) or not sections
            or not all(isinstance(s, str) and s in SECTIONS for s in sections)):
        raise UsageError(f"{where} sections = {sections!r}; accepted: a list of "
                         f"{', '.join(SECTIONS)}")
    return StudySpec(question=question, title=_line(table, "title", where) or spec.name,
                     baseline=baseline, candidate=candidate,
                     sections=tuple(s for s in SECTIONS if s in sections),
                     validate=_validate(table.get("validate"), spec, baseline, where),
                     cache_states=_flag(table, "cache_states", where),
                     **_design(table, where))


def _design(table: dict, where: str) -> dict:
    """The comparison design's keys, checked as `pgdyno compare` checks its options."""
    from pgdyno.compare.blocks import DESIGNS
    from pgdyno.compare.command import parse_budget, parse_precision

    design = table.get("design", "auto")
    if design not in DESIGNS:
        raise UsageError(f"{where} design = {design!r}; accepted: {', '.join(DESIGNS)}")
    pairs = table.get("pairs")
    if pairs is not None and (not isinstance(pairs, int) or isinstance(pairs, bool)
                              or pairs < 2):
        raise UsageError(f"{where} pairs = {pairs!r}; accepted: a whole number of at least 2")
    values = {}
    for key, parse, example in (("budget", parse_budget, "10m"),
                                ("precision", parse_precision, "2%")):
        raw = table.get(key)
        if raw is not None and not isinstance(raw, str | int | float) or isinstance(raw, bool):
            raise UsageError(f"{where} {key} = {raw!r}; accepted: a string such as {example!r}")
        try:
            values[key] = parse(None if raw is None else str(raw))
        except UsageError as exc:
            accepted = str(exc).split("accepted values are ", 1)[-1]
            raise UsageError(f"{where} {key} = {raw!r}; accepted: {accepted}") from None
    return {"design": design, "pairs": pairs, "budget_s": values["budget"],
            "precision_pct": values["precision"]}


def _flag(table: dict, key: str, where: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise UsageError(f"{where} {key} = {value!r}; accepted: true or false")
    return value


def _validate(table: object, spec: CampaignSpec, baseline: str,
              where: str) -> ValidateSpec | None:
    if table is None:
        return None
    where = f"{where} validate"
    if not isinstance(table, dict) or set(table) - VALIDATE_KEYS:
        bad = sorted(set(table) - VALIDATE_KEYS) if isinstance(table, dict) else ["(not a table)"]
        raise UsageError(f"{where}: {', '.join(bad)} not accepted; accepted: a table of "
                         f"{', '.join(sorted(VALIDATE_KEYS))}")
    workload = _line(table, "workload", where) or spec.workloads[0]
    if workload not in spec.workloads:
        raise UsageError(f"{where}: workload = {workload!r} is not one of the campaign's; "
                         f"accepted: {', '.join(spec.workloads)}")
    side = _line(table, "side", where) or baseline
    if side not in [c.label for c in spec.configs]:
        raise UsageError(f"{where}: side = {side!r} is not a [[config]] label; accepted: "
                         f"{', '.join(c.label for c in spec.configs)}")
    per_core, source = table.get("per_core"), "the study file"
    if "hardware" in table:
        from pgdyno.config.profiles import load_hardware

        name = _line(table, "hardware", where)
        per_core, source = load_hardware(str(name)).tps_per_core, f"hardware profile {name}"
    if (not isinstance(per_core, int | float) or isinstance(per_core, bool)
            or per_core <= 0):
        raise UsageError(f"{where}: per_core = {per_core!r}; accepted: a positive number (the "
                         "headline per vCPU), or hardware = a profile with tps_per_core")
    band = table.get("band", [0.7, 0.9])
    if (not isinstance(band, list) or len(band) != 2
            or not all(isinstance(b, int | float) and not isinstance(b, bool) for b in band)
            or not 0 < band[0] <= band[1]):
        raise UsageError(f"{where}: band = {band!r}; accepted: [low, high], shares of the "
                         "target with 0 < low <= high (e.g. [0.7, 0.9])")
    metric = _line(table, "metric", where)
    return ValidateSpec(workload=workload, side=side, metric=metric, per_core=float(per_core),
                        source=source, band=(float(band[0]), float(band[1])))


def _line(table: dict, key: str, where: str, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or control_character(value):
        raise UsageError(f"{where} {key} = {value!r}; accepted: a non-empty string on one "
                         "line")
    return value.strip()
