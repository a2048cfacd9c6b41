"""The ``[study]`` table of a campaign file: the question and the comparisons to make.

::

    [study]
    question = "Does NVMe-aware tuning raise TPROC-C throughput on this drive?"
    title = "Drive qualification"      # optional; default: the campaign's name
    baseline = "default"               # a [[config]] label (default: the first)
    candidate = "tuned"                # a [[config]] label (default: the second, if any)
    sections = ["summary", ...]        # optional: which sections the report has (in the
                                       # report's own order); default: all of them

Every workload of the campaign is compared baseline against candidate when both ran it;
a workload that ran under one config (fio, cpu) is described, not compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.campaign.spec import CampaignSpec
from pgdyno.config.userfile import control_character
from pgdyno.errors import UsageError

SECTIONS = ("summary", "glance", "charts", "workloads", "settings", "conclusions", "threats")
"""The study report's sections, in the order the report has them (title and question
always come first, the runs' list always last)."""
STUDY_KEYS = {"question", "title", "baseline", "candidate", "sections"}


@dataclass(frozen=True)
class StudySpec:
    question: str
    title: str
    baseline: str
    candidate: str | None
    sections: tuple[str, ...]


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
    sections = table.get("sections", list(SECTIONS))
    if (not isinstance(sections, list) or not sections
            or not all(isinstance(s, str) and s in SECTIONS for s in sections)):
        raise UsageError(f"{where} sections = {sections!r}; accepted: a list of "
                         f"{', '.join(SECTIONS)}")
    return StudySpec(question=question, title=_line(table, "title", where) or spec.name,
                     baseline=baseline, candidate=candidate,
                     sections=tuple(s for s in SECTIONS if s in sections))


def _line(table: dict, key: str, where: str, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or control_character(value):
        raise UsageError(f"{where} {key} = {value!r}; accepted: a non-empty string on one "
                         "line")
    return value.strip()
