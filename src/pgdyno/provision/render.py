"""Plans, drift and reverts as text: a terminal table, Markdown, and the shell script that
`pgdyno tune --format script` prints. Computing is elsewhere; these only format.
"""

from __future__ import annotations

from rich.table import Table

from pgdyno.provision.model import (
    AT_TARGET,
    DESTRUCTIVE,
    PHASES,
    SKIPPED,
    Drift,
    ProvisionPlan,
    ProvisionState,
    RevertReport,
    Step,
)

_RANK = {kind: n for n, kind in enumerate(PHASES)}


def _sorted(plan: ProvisionPlan) -> list[Step]:
    """Steps in apply order, skipped ones last."""
    return sorted(plan.steps, key=lambda s: (s.status == SKIPPED, _RANK.get(s.kind, 99)))


def _one_line(text: str) -> str:
    lines = text.splitlines()
    return (lines[0] if lines else "") + (" ..." if len(lines) > 1 else "")


def plan_header(plan: ProvisionPlan) -> str:
    todo = len(plan.ordered())
    at = sum(1 for s in plan.steps if s.status == AT_TARGET)
    skipped = sum(1 for s in plan.steps if s.status == SKIPPED)
    return (f"provision plan: config {plan.config}, hardware {plan.hardware}, host {plan.host}: "
            f"{todo} to change, {at} at target, {skipped} skipped")


def plan_table(plan: ProvisionPlan) -> Table:
    table = Table(title=plan_header(plan), title_justify="left")
    for col in ("Setting", "Kind", "Target", "Current", "Planned", "Status", "Undo",
                "Command", "Rationale"):
        table.add_column(col, overflow="fold")
    for s in _sorted(plan):
        table.add_row(",".join(s.keys), s.kind, s.target, _one_line(s.current or "-"),
                      s.shown_value, s.status + (f": {s.note}" if s.note else ""),
                      s.reversibility if s.status != SKIPPED else "",
                      _one_line(s.command), s.rationale)
    return table


def plan_markdown(plan: ProvisionPlan) -> str:
    out = [f"## {plan_header(plan)}", "",
           "| Setting | Kind | Target | Current | Planned | Status | Undo | Command |",
           "|---|---|---|---|---|---|---|---|"]
    for s in _sorted(plan):
        cells = [",".join(s.keys), s.kind, s.target, _one_line(s.current or "-"), s.shown_value,
                 s.status + (f": {s.note}" if s.note else ""),
                 s.reversibility if s.status != SKIPPED else "", f"`{_one_line(s.command)}`"
                 if s.command else ""]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out += ["", "Rationale:", ""]
    out += [f"- {','.join(s.keys)}: {s.rationale}" for s in _sorted(plan) if s.rationale]
    out += [f"\n> warning: {w}" for w in plan.warnings]
    return "\n".join(out) + "\n"


def commands(plan: ProvisionPlan) -> list[str]:
    """The commands an apply would run, in its order (what a dry run or non-root prints)."""
    out = []
    for step in plan.ordered():
        mark = "  # DESTROYS DATA" if step.reversibility == DESTRUCTIVE else ""
        out.append(step.command + mark)
    return out


def drift_table(rows: list[Drift], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("Setting", "Kind", "Target", "Planned", "Live", "Match"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(",".join(r.keys), r.kind, r.target, r.planned, _one_line(r.live),
                      "ok" if r.ok else "DRIFT")
    return table


def applied_lines(state: ProvisionState) -> list[str]:
    """Each change an apply made: the value it replaced and the one it wrote."""
    return [f"applied {a.step.kind} {a.step.target}: {a.previous.get('value', '-')[:60]!s} -> "
            f"{a.step.shown_value}" for a in state.steps]


def revert_lines(report: RevertReport) -> list[str]:
    out = [f"restored {r}" for r in report.restored]
    out += [f"cannot restore: {c}" for c in report.cannot]
    out += [f"FAILED to restore {f}" for f in report.failed]
    return out


def render_script(plan: ProvisionPlan, header: list[str],
                  pg_settings: dict[str, str] | None = None) -> str:
    """A shell version of the plan: prints every step, applies with APPLY=1, saving each
    previous value first. Destructive steps (mdadm, mkfs) stay comments: they need
    `pgdyno provision apply --destroy-data DEVICE`, which checks the device first."""
    out = ["#!/bin/sh", *[f"# {line}" for line in header],
           "# Generated from `pgdyno provision plan` (the same steps `provision apply` runs).",
           "# Dry run by default: every step is printed, nothing changes.",
           "# APPLY=1 sh this-file applies it; the previous values are saved to $BACKUP first.",
           "# Prefer `pgdyno provision apply --yes`: it verifies, rolls back on failure and",
           "# `pgdyno provision revert` undoes it.",
           "set -eu", 'APPLY="${APPLY:-0}"',
           'BACKUP="${BACKUP:-/var/tmp/pgdyno-provision-backup-$(date +%s).sh}"',
           'step() { echo "+ $*"; if [ "$APPLY" = 1 ]; then sh -c "$*"; fi; }',
           'save() { if [ "$APPLY" = 1 ]; then echo "$1" >> "$BACKUP"; fi; }', ""]
    for step in plan.ordered():
        out += _script_step(step)
    skipped = [s for s in plan.steps if s.status == SKIPPED and s.command]
    if skipped:
        out.append("# not planned here (no device named):")
        out += [f"#   {_one_line(s.command)}" for s in skipped]
    if pg_settings:
        target = '"${PGDATA:-/var/lib/postgresql/data}/pgdyno-tuned.conf"'
        out.append("# PostgreSQL: an include file (add include_if_exists = 'pgdyno-tuned.conf')")
        out.append(f"echo \"+ write {len(pg_settings)} settings to\" {target}")
        out.append(f'if [ "$APPLY" = 1 ]; then cat > {target} <<\'PGDYNO_EOF\'')
        out += [f"{k} = {v}" for k, v in pg_settings.items()]
        out += ["PGDYNO_EOF", "fi"]
    out.append('[ "$APPLY" = 1 ] && echo "previous values saved in $BACKUP" || '
               'echo "dry run: nothing changed (APPLY=1 to apply)"')
    return "\n".join(out) + "\n"


def _script_step(step: Step) -> list[str]:
    from shlex import quote

    from pgdyno.provision.kinds import HANDLERS

    if step.reversibility == DESTRUCTIVE or step.kind in ("mount", "fstab"):
        return [f"# {step.kind} (run by pgdyno provision apply --destroy-data): "
                f"{_one_line(step.command)}"]
    if step.kind in ("sysctl", "hugepages"):
        return [f'save "sysctl -w {step.target}=\\"$(sysctl -n {step.target} 2>/dev/null)\\""',
                f"step {quote(step.command)}"]
    if step.kind == "governor":
        files = HANDLERS["governor"].pattern(step)  # type: ignore[attr-defined]
        return [f'for f in {files}; do save "echo $(cat "$f") > $f"; done',
                f"step {quote(step.command)}"]
    if step.kind in ("thp", "queue"):
        path = HANDLERS[step.kind].path(step)  # type: ignore[attr-defined]
        read = (f"$(sed 's/.*\\[\\(.*\\)\\].*/\\1/' {path})" if step.kind == "thp"
                or step.params.get("attr") == "scheduler" else f"$(cat {path})")
        return [f'save "echo {read} > {path}"', f"step {quote(step.command)}"]
    body = step.value.rstrip("\n")
    return [f'save "# {step.target} replaced (keep a copy: cp -p {step.target} ...)"',
            f"echo '+ write {step.target}'",
            f'if [ "$APPLY" = 1 ]; then cat > {step.target} <<\'PGDYNO_EOF\'', body,
            "PGDYNO_EOF", "fi"]
