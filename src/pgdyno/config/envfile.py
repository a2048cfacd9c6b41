"""``.env`` files in the KEY=value style of hand-made benchmark kits (hardware.env, tuning.env).

Export writes one block per group with its title as a comment; import reads such a file
back, PG_* keys as PostgreSQL settings and the others by the key names pgdyno's own matrix
uses, so an existing kit's files can be compared with or turned into a pgdyno config.
"""

from __future__ import annotations

from pgdyno.config.hardware import HardwareProfile, Volume
from pgdyno.config.matrix_keys import MATRIX_KEYS, refusal
from pgdyno.config.model import GROUP_TITLES, GROUPS, ConfigPlan, Setting, pg_group
from pgdyno.config.units import GB, parse_size
from pgdyno.errors import UsageError

# PG_ keys that describe the installation rather than set a PostgreSQL setting.
PG_INFO_KEYS = frozenset(key for key in MATRIX_KEYS if key.startswith("PG_"))


def parse_env(text: str, origin: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum():
            raise UsageError(f"{origin}:{number}: expected KEY=value, got {raw.strip()!r}")
        value = value.split(" #", 1)[0].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key] = value
    return values


def plan_to_env(plan: ConfigPlan) -> str:
    lines = [f"# pgdyno config {plan.name}: KEY=value, one group per block"]
    for group, title in GROUPS:
        rows = [s for s in plan.settings if s.group == group]
        if not rows:
            continue
        lines.append("")
        lines.append(f"# {title}")
        for s in rows:
            value = s.value
            if any(c.isspace() for c in value) or value == "":
                value = f'"{value}"'
            lines.append(f"{s.key}={value}")
    return "\n".join(lines) + "\n"


def settings_from_env(values: dict[str, str], origin: str) -> list[Setting]:
    """Settings of a tuning.env: PG_* keys are PostgreSQL settings, the rest pgdyno's keys;
    an OS or storage value outside the matrix's type and range is refused (UsageError
    naming the file, the key and what is accepted); '' and n/a mean nothing to set."""
    out = []
    for key, value in values.items():
        template = MATRIX_KEYS.get(key)
        if key.startswith("PG_") and key not in PG_INFO_KEYS:
            name = key[3:].lower()
            out.append(Setting(group=pg_group(name), key=key, name=name, layer="postgresql",
                               apply="pg", value=value, source=f"file:{origin}",
                               rationale=f"from {origin}"))
        elif template is not None:
            why = refusal(key, value, unset_ok=True)
            if why:
                raise UsageError(f"{origin}: {key}={value}: {why}")
            out.append(Setting(group=template.group, key=key, name=template.name,
                               layer=template.layer, apply=template.apply, value=value,
                               default=template.default, source=f"file:{origin}",
                               rationale=f"from {origin}"))
        else:
            group = _group_by_prefix(key)
            if group is None:
                raise UsageError(f"{origin}: unknown key {key}; accepted: PG_<setting> or the "
                                 "keys of `pgdyno tune --format env`")
            out.append(Setting(group=group, key=key, name=key.lower(), layer="os",
                               apply="info", value=value, source=f"file:{origin}",
                               rationale=f"from {origin}"))
    return out


def _group_by_prefix(key: str) -> str | None:
    prefixes = {"VM_": "os_memory", "FS_": "os_files", "ULIMIT_": "os_files",
                "NET_": "os_network", "KERNEL_": "os_scheduler", "XFS_": "xfs", "MD_": "md",
                "PGBENCH_": "benchmark", "FIO_": "benchmark", "DATA_": "block_data",
                "WAL_": "block_wal"}
    for prefix, group in prefixes.items():
        if key.startswith(prefix):
            return group
    if key in ("INSTANCE_TYPE", "VCPU", "RAM_GB", "NETWORK_GBPS", "EBS_GBPS"):
        return "instance"
    return None


# ----- hardware.env ------------------------------------------------------------------------------

def profile_to_env(profile: HardwareProfile) -> str:
    lines = [f"# Hardware profile {profile.name} ({profile.source or 'pgdyno'})",
             "", f"# {GROUP_TITLES['instance']}",
             f"INSTANCE_TYPE={profile.name}", f"VCPU={profile.vcpus}",
             f"RAM_GB={_num(profile.ram_bytes / GB)}"]
    if profile.network_gbps is not None:
        lines.append(f"NETWORK_GBPS={_num(profile.network_gbps)}")
    if profile.ebs_gbps is not None:
        lines.append(f"EBS_GBPS={_num(profile.ebs_gbps)}")
    for key, value in (("PRICE_MONTH_USD", profile.price_month_usd),
                       ("SPOT_PRICE_MONTH_USD", profile.spot_price_month_usd)):
        if value is not None:
            lines.append(f"{key}={_num(value)}")
    for role, vol in (("DATA", profile.data), ("WAL", profile.wal)):
        if vol is None:
            continue
        lines += ["", f"# {role} volume", f"{role}_KIND={vol.kind}"]
        if vol.mount:
            lines.append(f"{role}_MOUNT={vol.mount}")
        if vol.size_bytes:
            lines.append(f"{role}_DISK_SIZE_GB={_num(vol.size_bytes / GB / vol.disk_count)}")
        lines.append(f"{role}_DISK_COUNT={vol.disk_count}")
        if vol.raid_level:
            lines.append(f"{role}_RAID_LEVEL={vol.raid_level}")
        if vol.iops:
            lines.append(f"{role}_IOPS={vol.iops}")
        if vol.bandwidth_mb_s:
            lines.append(f"{role}_BANDWIDTH_MB_S={_num(vol.bandwidth_mb_s)}")
    return "\n".join(lines) + "\n"


def profile_from_env(text: str, origin: str) -> HardwareProfile:
    values = parse_env(text, origin)
    try:
        profile = HardwareProfile(
            name=values.get("INSTANCE_TYPE", "custom"),
            vcpus=int(values["VCPU"]),
            ram_bytes=int(float(values["RAM_GB"]) * GB),
            network_gbps=_float(values.get("NETWORK_GBPS")),
            ebs_gbps=_float(values.get("EBS_GBPS")),
            price_month_usd=_float(values.get("PRICE_MONTH_USD")),
            spot_price_month_usd=_float(values.get("SPOT_PRICE_MONTH_USD")),
            source=f"file:{origin}",
        )
        for role in ("DATA", "WAL"):
            if not any(k.startswith(role + "_") for k in values):
                continue
            count = int(values.get(f"{role}_DISK_COUNT", "1"))
            size = values.get(f"{role}_DISK_SIZE_GB")
            vol = Volume(kind=values.get(f"{role}_KIND", "ssd"),
                         mount=values.get(f"{role}_MOUNT", ""), disk_count=count,
                         size_bytes=int(float(size) * GB * count) if size else None,
                         raid_level=values.get(f"{role}_RAID_LEVEL", ""),
                         device=values.get(f"{role}_RAID_DEVICE", ""),
                         iops=int(values[f"{role}_IOPS"]) if f"{role}_IOPS" in values else None,
                         bandwidth_mb_s=_float(values.get(f"{role}_BANDWIDTH_MB_S")))
            setattr(profile, role.lower(), vol)
    except KeyError as exc:
        raise UsageError(f"{origin}: missing {exc.args[0]}; a hardware.env needs VCPU and "
                         "RAM_GB") from None
    except ValueError as exc:
        raise UsageError(f"{origin}: {exc}") from None
    return profile


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _float(text: str | None) -> float | None:
    return None if text in (None, "") else float(text)


__all__ = ["parse_env", "plan_to_env", "settings_from_env", "profile_to_env", "profile_from_env",
           "parse_size"]
