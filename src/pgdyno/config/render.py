"""Renderers of a resolved config: table, Markdown, postgresql.conf, ALTER SYSTEM, sysctl.d,
.env and the provisioning script. Each takes the computed plan and returns text (the table
renderer returns a rich renderable); none computes anything itself.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table

from pgdyno.config.envfile import plan_to_env
from pgdyno.config.model import GROUPS, ConfigPlan, Setting
from pgdyno.config.pgcatalog import unquote
from pgdyno.config.resolve import ResolvedConfig

FORMATS = ("table", "md", "conf", "sql", "sysctl", "env", "script")


def _header(resolved: ResolvedConfig) -> list[str]:
    plan = resolved.plan
    lines = [f"pgdyno config: {resolved.name}"]
    if plan is not None and plan.inputs is not None:
        i = plan.inputs
        hw = i.hardware
        lines.append(f"hardware: {hw.name} ({hw.vcpus} vCPUs, {hw.ram_gb:.1f} GiB RAM, data on "
                     f"{hw.data_volume.kind}); workload: {i.workload} ({i.db_type}"
                     f"{', write-heavy' if i.write_heavy else ''}); "
                     f"PostgreSQL {resolved.pg_version}")
    lines.append(f"validated against: {resolved.catalogue}")
    return lines


def _grouped(plan: ConfigPlan) -> list[tuple[str, list[Setting]]]:
    return [(title, [s for s in plan.settings if s.group == gid]) for gid, title in GROUPS
            if any(s.group == gid for s in plan.settings)]


def render_table(resolved: ResolvedConfig) -> Group:
    parts: list = ["\n".join(_header(resolved))]
    plan = resolved.plan
    if plan is None:
        return Group(*parts)
    if not plan.settings:
        parts.append("(no settings: stock PostgreSQL)")
    for title, rows in _grouped(plan):
        table = Table(title=f"{title} ({len(rows)})", title_justify="left", expand=False)
        for col in ("Parameter", "Value", "Default", "Rationale"):
            table.add_column(col, overflow="fold")
        for s in rows:
            table.add_row(s.key, s.value, s.default, s.rationale)
        parts.append(table)
    sizing = Table(title="Sizing", title_justify="left")
    for col in ("Section", "Figure", "Formula", "Value", "Check"):
        sizing.add_column(col, overflow="fold")
    for line in plan.sizing:
        check = "" if line.ok is None else ("ok" if line.ok else "FAILS")
        sizing.add_row(line.section, line.label, line.formula, line.value, check)
    parts.append(sizing)
    parts += [f"warning: {w}" for w in resolved.warnings]
    return Group(*parts)


def render_md(resolved: ResolvedConfig) -> str:
    out = ["# " + _header(resolved)[0], ""] + [f"- {line}" for line in _header(resolved)[1:]]
    plan = resolved.plan
    if plan is None:
        return "\n".join(out) + "\n"
    total = 0
    for n, (title, rows) in enumerate(_grouped(plan), 1):
        total += len(rows)
        out += ["", f"### {n}. {title} ({len(rows)})", "",
                "| Parameter | Value | Default | Rationale |", "|---|---|---|---|"]
        out += [f"| {s.key} | {_md(s.value)} | {_md(s.default)} | {_md(s.rationale)} |"
                for s in rows]
    out += ["", f"**Total: {total} configuration parameters**", "", "## Sizing", "", "```"]
    section = None
    for line in plan.sizing:
        if line.section != section:
            if section is not None:
                out.append("")
            out.append(f"[{line.section}]")
            section = line.section
        mark = "" if line.ok is None else ("  -> ok" if line.ok else "  -> FAILS")
        out.append(f"{line.label}: {line.value}   ({line.formula}){mark}")
    out.append("```")
    out += [f"\n> warning: {w}" for w in resolved.warnings]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")


def render_conf(resolved: ResolvedConfig) -> str:
    out = [f"# {line}" for line in _header(resolved)]
    out.append("# Include from postgresql.conf, or copy the lines you want.")
    for key, value in resolved.pg_settings.items():
        why = resolved.sources.get(key, "")
        out.append(f"{key} = {value}" + (f"  # {why}" if why else ""))
    return "\n".join(out) + "\n"


def render_sql(resolved: ResolvedConfig) -> str:
    out = [f"-- {line}" for line in _header(resolved)]
    restart = []
    plan = resolved.plan
    for key, value in resolved.pg_settings.items():
        literal = unquote(value).replace("'", "''")
        out.append(f"ALTER SYSTEM SET {key} = '{literal}';")
        setting = plan.get(key) if plan else None
        if setting is not None and key in _POSTMASTER_HINT:
            restart.append(key)
    out.append("SELECT pg_reload_conf();")
    if restart:
        out.append(f"-- a restart is needed for: {', '.join(restart)}")
    return "\n".join(out) + "\n"


# Settings that take effect only at server start (context postmaster), for the SQL hint.
_POSTMASTER_HINT = {"shared_buffers", "huge_pages", "max_connections", "wal_buffers",
                    "max_worker_processes", "io_method", "autovacuum_max_workers",
                    "max_wal_senders", "wal_level", "listen_addresses", "port"}


def render_sysctl(resolved: ResolvedConfig) -> str:
    out = [f"# {line}" for line in _header(resolved)]
    out.append("# /etc/sysctl.d/60-pgdyno.conf  (apply: sysctl --system)")
    plan = resolved.plan
    for s in plan.settings if plan else []:
        if s.apply == "sysctl":
            out.append(f"# {s.rationale}")
            out.append(f"{s.name} = {s.value}")
    return "\n".join(out) + "\n"


def render_env(resolved: ResolvedConfig) -> str:
    plan = resolved.plan or ConfigPlan(name=resolved.name, inputs=None)
    return plan_to_env(plan)


def render_script(resolved: ResolvedConfig) -> str:
    """A shell plan: prints every step, applies only with APPLY=1, saves the old values first."""
    plan = resolved.plan
    out = ["#!/bin/sh", *[f"# {line}" for line in _header(resolved)],
           "# Provisioning plan. Dry run by default: every step is printed, nothing changes.",
           "# APPLY=1 sh this-file applies it; the previous values are saved to $BACKUP first.",
           "set -eu", 'APPLY="${APPLY:-0}"',
           'BACKUP="${BACKUP:-/var/tmp/pgdyno-provision-backup-$(date +%s).sh}"',
           'step() { echo "+ $*"; if [ "$APPLY" = 1 ]; then sh -c "$*"; fi; }',
           'save() { if [ "$APPLY" = 1 ]; then echo "$1" >> "$BACKUP"; fi; }', ""]
    if plan is None:
        return "\n".join(out) + "\n"
    sysctls = [s for s in plan.settings if s.apply == "sysctl"]
    if sysctls:
        out.append("# OS: kernel settings")
        for s in sysctls:
            out.append(f'save "sysctl -w {s.name}=\\"$(sysctl -n {s.name} 2>/dev/null)\\""')
            out.append(f"step 'sysctl -w {s.name}=\"{s.value}\"'")
        out.append("")
    for s in plan.settings:
        if s.apply == "sysfs" and s.name == "transparent_hugepage":
            path = "/sys/kernel/mm/transparent_hugepage/enabled"
            out.append(f'save "echo $(sed \'s/.*\\[\\(.*\\)\\].*/\\1/\' {path}) > {path}"')
            out.append(f"step 'echo {s.value} > {path}'")
    limits = [s for s in plan.settings if s.apply == "limits"]
    if limits:
        body = "\\n".join(f"postgres - {s.name} {s.value}" for s in limits)
        out.append(f"step 'printf \"{body}\\n\" > /etc/security/limits.d/60-pgdyno.conf'")
    hw = plan.inputs.hardware if plan.inputs else None
    for role in ("data", "wal"):
        vol = (hw.data_volume if role == "data" else hw.wal_volume) if hw else None
        dev = (vol.device if vol else "").removeprefix("/dev/")
        rows = [s for s in plan.settings if s.group == f"block_{role}" and s.apply == "sysfs"]
        if not rows:
            continue
        out.append(f"# storage: {role} device {dev or '(unknown: set DEV_' + role.upper() + ')'}")
        out.append(f'DEV_{role.upper()}="${{DEV_{role.upper()}:-{dev}}}"')
        for s in rows:
            path = f"/sys/block/$DEV_{role.upper()}/queue/{s.name}"
            out.append(f'[ -n "$DEV_{role.upper()}" ] && save "echo $(cat {path}) > {path}"'
                       " || true")
            out.append(f'[ -n "$DEV_{role.upper()}" ] && step "echo {s.value} > {path}" || true')
    mounts = [s for s in plan.settings if s.apply in ("mount", "mkfs", "mdadm") and s.value]
    if mounts:
        out.append("# storage layout (RAID, filesystem, mount options): destructive, not run here")
        out += [f"# {s.key}={s.value}  ({s.rationale})" for s in mounts]
    if resolved.pg_settings:
        target = '"${PGDATA:-/var/lib/postgresql/data}/pgdyno-tuned.conf"'
        out.append("# PostgreSQL: an include file (add include_if_exists = 'pgdyno-tuned.conf')")
        out.append(f"echo \"+ write {len(resolved.pg_settings)} settings to\" {target}")
        out.append(f'if [ "$APPLY" = 1 ]; then cat > {target} <<\'PGDYNO_EOF\'')
        out += [f"{k} = {v}" for k, v in resolved.pg_settings.items()]
        out += ["PGDYNO_EOF", "fi"]
    out.append('[ "$APPLY" = 1 ] && echo "previous values saved in $BACKUP" || '
               'echo "dry run: nothing changed (APPLY=1 to apply)"')
    return "\n".join(out) + "\n"


RENDERERS = {"md": render_md, "conf": render_conf, "sql": render_sql, "sysctl": render_sysctl,
             "env": render_env, "script": render_script}
