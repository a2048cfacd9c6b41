"""Tuning classes: the kind of load a config is sized for (pgtune's database types).

Benchmark workloads (tpcb, tprocc, ...) declare their class in their plugin
(``pgdyno.workloads``); here live only the classes themselves, for ``pgdyno tune
--workload oltp`` and for plugins to name.
"""

from __future__ import annotations

from pgdyno.errors import UsageError

# tuning class -> (pgtune db type, write-heavy)
TUNING_CLASSES: dict[str, tuple[str, bool]] = {
    "oltp": ("oltp", True),
    "web": ("web", False),
    "dw": ("dw", False),
    "olap": ("dw", False),
    "mixed": ("mixed", True),
    "desktop": ("desktop", False),
}


def classify(workload: str) -> tuple[str, bool]:
    try:
        return TUNING_CLASSES[workload.lower()]
    except KeyError:
        raise UsageError(f"--workload {workload}: unknown; accepted: "
                         f"{', '.join(TUNING_CLASSES)} or a benchmark workload") from None
