"""Verify: the plan's values against the live system, read again now.

A plan already reads every live value; verify is that reading seen as drift rows, so what
`plan` calls "at target" and what `verify` calls "ok" can never disagree.
"""

from __future__ import annotations

from pgdyno.provision.model import AT_TARGET, SKIPPED, Drift, ProvisionPlan


def drift(plan: ProvisionPlan) -> list[Drift]:
    """One row per step that is planned (skipped steps have nothing to compare)."""
    return [Drift(keys=list(s.keys), kind=s.kind, target=s.target, planned=s.shown_value,
                  live=s.current if s.kind not in ("sysctl.d", "udev", "tmpfiles", "limits")
                  else ("as planned" if s.status == AT_TARGET else _file_live(s.current)),
                  ok=s.status == AT_TARGET)
            for s in plan.steps if s.status != SKIPPED]


def _file_live(current: str) -> str:
    if current.startswith("("):
        return current
    lines = [line for line in current.splitlines() if not line.startswith("#")]
    return f"{len(lines)} line(s), not as planned"


def drifted(rows: list[Drift]) -> list[Drift]:
    return [r for r in rows if not r.ok]
