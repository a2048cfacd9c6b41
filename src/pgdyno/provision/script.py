"""`pgdyno tune --format script`: the provisioning plan of a resolved config as a shell
script, built by the same planner `pgdyno provision apply` uses (one source of steps)."""

from __future__ import annotations

from pgdyno.config.render import header_lines
from pgdyno.config.resolve import ResolvedConfig
from pgdyno.provision.plan import plan_from_settings
from pgdyno.provision.render import render_script


def script_for(resolved: ResolvedConfig) -> str:
    """The script of a config: its OS and storage steps (live values read now) and the
    PostgreSQL include file."""
    settings = [s for s in (resolved.plan.settings if resolved.plan else [])
                if s.layer in ("os", "storage")]
    hardware = resolved.plan.inputs.hardware.name if resolved.plan and resolved.plan.inputs \
        else "unknown"
    plan = plan_from_settings(settings, config=resolved.name, hardware=hardware)
    return render_script(plan, header_lines(resolved), resolved.pg_settings)
