"""Renderers of a resolved config: table, Markdown, postgresql.conf, ALTER SYSTEM, sysctl.d,
.env (the provisioning script comes from pgdyno.provision's plan), and of `pgdyno tune
--diff` and `pgdyno detect` as tables. Each takes the computed plan and returns text (the
table renderers return a rich renderable); none computes anything.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table

from pgdyno.config.detect import describe_device
from pgdyno.config.diff import DiffRow
from pgdyno.config.envfile import plan_to_env
from pgdyno.config.hardware import HardwareProfile
from pgdyno.config.model import GROUPS, ConfigPlan, Setting
from pgdyno.config.resolve import ResolvedConfig
from pgdyno.config.setting_specs import unquote
from pgdyno.config.units import human_bytes

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


def diff_table(resolved: ResolvedConfig, rows: list[DiffRow], server: str) -> Table:
    """`pgdyno tune --diff`: the settings that differ from the running server's."""
    table = Table(title=f"{resolved.name} vs {server} (values within 5% hidden)",
                  title_justify="left")
    for col in ("Setting", "Current", "Recommended", "Restart"):
        table.add_column(col)
    for r in rows:
        if r.differs:
            table.add_row(r.name, r.current, r.recommended, "yes" if r.restart else "")
    return table


def profile_table(profile: HardwareProfile) -> Table:
    """`pgdyno detect`: a hardware profile, one item a row."""
    table = Table(title=f"Hardware profile: {profile.name} ({profile.source})",
                  title_justify="left")
    table.add_column("Item")
    table.add_column("Value", overflow="fold")
    rows = [
        ("vCPUs", f"{profile.vcpus}" + (f" (host {profile.host_vcpus})"
                                        if profile.host_vcpus else "")),
        ("RAM", human_bytes(profile.ram_bytes) + (f" (host {human_bytes(profile.host_ram_bytes)})"
                                                  if profile.host_ram_bytes else "")),
        ("source of vCPUs", profile.cpu_source or profile.source),
        ("source of RAM", profile.ram_source or profile.source),
        ("cloud", profile.cloud or "none detected"),
        ("CPU model", profile.cpu_model), ("architecture", profile.arch),
        ("NUMA nodes", str(profile.numa_nodes)), ("kernel", profile.kernel),
        ("huge pages", f"{profile.huge_pages_total} x {profile.huge_page_size_kb} kB reserved"),
        ("transparent huge pages", profile.transparent_hugepages),
    ]
    for role, vol in (("data", profile.data), ("WAL", profile.wal)):
        if vol is not None:
            rows.append((f"{role} volume", f"{vol.mount} on {vol.device} ({vol.kind}), "
                         f"{vol.fstype} {vol.mount_options}"))
    for dev in profile.devices:
        rows.append((f"device {dev.name}",
                     f"{dev.model or '-'} {human_bytes(dev.size_bytes)} {describe_device(dev)}, "
                     f"scheduler "
                     f"{dev.scheduler}, nr_requests {dev.nr_requests}, read_ahead_kb "
                     f"{dev.read_ahead_kb}, max_sectors_kb {dev.max_sectors_kb}"
                     + (f", {dev.raid_level} of {', '.join(dev.raid_members)}"
                        if dev.raid_level else "")))
    for item, value in rows:
        table.add_row(item, value or "-")
    return table
