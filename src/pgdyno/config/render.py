"""Renderers of a resolved config: table, Markdown, postgresql.conf, ALTER SYSTEM, sysctl.d,
.env (the provisioning script comes from pgdyno.provision's plan). Each takes the computed
plan and returns text (the table renderer returns a rich renderable); none computes anything.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table

from pgdyno.config.envfile import plan_to_env
from pgdyno.config.model import GROUPS, ConfigPlan, Setting
from pgdyno.config.resolve import ResolvedConfig
from pgdyno.config.setting_specs import unquote

FORMATS = ("table", "md", "conf", "sql", "sysctl", "env", "script")


def header_lines(resolved: ResolvedConfig) -> list[str]:
    """The config, hardware, workload and setting specs, one line each (every format's header)."""
    return _header(resolved)


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


RENDERERS = {"md": render_md, "conf": render_conf, "sql": render_sql, "sysctl": render_sysctl,
             "env": render_env}
"""``script`` is not here: the provisioning script is rendered from `pgdyno provision`'s plan
(pgdyno.provision.script), so the script and `provision apply` are one set of steps."""
