"""How a workload name maps to the tuning inputs (pgtune's database type, write share)."""

from __future__ import annotations

from pgdyno.errors import UsageError

# workload -> (pgtune db type, write-heavy)
WORKLOADS: dict[str, tuple[str, bool]] = {
    "tpcb": ("oltp", True),
    "tpc-b": ("oltp", True),
    "simple-update": ("oltp", True),
    "tprocc": ("oltp", True),
    "oltp": ("oltp", True),
    "oltp-read-write": ("oltp", True),
    "select-only": ("web", False),
    "oltp-read-only": ("web", False),
    "web": ("web", False),
    "tproch": ("dw", False),
    "olap": ("dw", False),
    "dw": ("dw", False),
    "mixed": ("mixed", True),
    "desktop": ("desktop", False),
    "fio": ("oltp", True),
    "cpu": ("oltp", False),
    "custom": ("mixed", True),
}


def classify(workload: str) -> tuple[str, bool]:
    try:
        return WORKLOADS[workload.lower()]
    except KeyError:
        raise UsageError(f"--workload {workload}: unknown; accepted: "
                         f"{', '.join(WORKLOADS)}") from None
