"""Drive health before and after a run: NVMe smart-log or smartctl, as JSON.

A device without SMART (virtio, loop, md/dm...) or a host without the tools gets
``available = False`` and the reason; pgdyno never writes zeros for numbers it did not read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from pgdyno.serde import Serialisable
from pgdyno.telemetry.devices import is_virtual

TOOL_TIMEOUT_S = 15.0
NVME_DATA_UNIT_BYTES = 512_000  # one "data unit" = 1000 sectors of 512 bytes
KELVIN_OFFSET = 273


@dataclass
class SmartReading(Serialisable):
    device: str
    available: bool
    reason: str = ""
    """Why not available, or which tool answered."""
    temperature_c: float | None = None
    percent_used: float | None = None
    available_spare_pct: float | None = None
    host_read_bytes: float | None = None
    host_written_bytes: float | None = None
    media_errors: int | None = None
    error_log_entries: int | None = None
    critical_warning: int | None = None
    warning_temp_time_min: int | None = None
    critical_temp_time_min: int | None = None
    thermal_throttle_events: int | None = None
    """T1 + T2 transitions (kept for older readers; the two are below, separately)."""
    thermal_t1_transitions: int | None = None
    """Thermal management temperature 1 transitions: light throttling."""
    thermal_t2_transitions: int | None = None
    """Thermal management temperature 2 transitions: heavy throttling."""
    thermal_t1_time_s: int | None = None
    thermal_t2_time_s: int | None = None
    power_on_hours: int | None = None
    raw: dict = field(default_factory=dict)
    """The tool's own JSON, kept so every figure above can be checked."""


def read_smart(device: str) -> SmartReading:
    """Never raises."""
    if is_virtual(device):
        return SmartReading(device, False, f"{device} is a virtual device: it has no SMART log")
    try:
        if device.startswith("nvme") and shutil.which("nvme"):
            return _nvme(device)
        if shutil.which("smartctl"):
            return _smartctl(device)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return SmartReading(device, False, f"SMART read failed: {exc}")
    tool = "nvme-cli or smartmontools" if device.startswith("nvme") else "smartmontools"
    return SmartReading(device, False, f"{tool} not installed")


def _run_json(cmd: list[str]) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          check=False)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise ValueError(f"{cmd[0]} exit {proc.returncode}: {msg[-1] if msg else exc}") from exc


def _nvme(device: str) -> SmartReading:
    # The namespace (nvme0n1) is accepted; the controller answers for it.
    return parse_nvme_smart_log(device, _run_json(["nvme", "smart-log", f"/dev/{device}",
                                                   "-o", "json"]))


NVME_CLI_NAMES: dict[str, str | tuple[str, ...]] = {
    "percent_used": ("percent_used", "percentage_used"), "available_spare_pct": "avail_spare",
    "host_read_bytes": "data_units_read", "host_written_bytes": "data_units_written",
    "media_errors": "media_errors", "error_log_entries": "num_err_log_entries",
    "critical_warning": "critical_warning", "warning_temp_time_min": "warning_temp_time",
    "critical_temp_time_min": "critical_comp_time",
    "thermal_t1_transitions": "thm_temp1_trans_count",
    "thermal_t2_transitions": "thm_temp2_trans_count",
    "thermal_t1_time_s": "thm_temp1_total_time", "thermal_t2_time_s": "thm_temp2_total_time",
    "power_on_hours": "power_on_hours",
}
"""Where ``nvme smart-log -o json`` puts each figure of the NVMe health log (field: key, or
keys tried in turn: nvme-cli renamed percent_used)."""
SMARTCTL_NVME_NAMES = {
    **NVME_CLI_NAMES, "percent_used": "percentage_used", "available_spare_pct": "available_spare",
    "thermal_t1_transitions": "thermal_temp1_transition_count",
    "thermal_t2_transitions": "thermal_temp2_transition_count",
    "thermal_t1_time_s": "thermal_temp1_total_time",
    "thermal_t2_time_s": "thermal_temp2_total_time",
}
"""The same figures in ``smartctl --json``'s nvme_smart_health_information_log."""


def parse_nvme_smart_log(device: str, data: dict) -> SmartReading:
    """``nvme smart-log -o json``: temperature in Kelvin, data units of 512,000 bytes."""
    if "temperature" not in data:
        return SmartReading(device, False, "nvme smart-log returned no health data", raw=data)
    return _nvme_health(device, "nvme smart-log", data, NVME_CLI_NAMES,
                        float(data["temperature"]) - KELVIN_OFFSET, raw=data)


def _smartctl(device: str) -> SmartReading:
    return parse_smartctl(device, _run_json(["smartctl", "--json", "-a", f"/dev/{device}"]))


def parse_smartctl(device: str, data: dict) -> SmartReading:
    """``smartctl --json -a``: the NVMe health log in °C, or an ATA drive's attributes."""
    nvme = data.get("nvme_smart_health_information_log")
    if nvme:
        return _nvme_health(device, "smartctl (NVMe log)", nvme, SMARTCTL_NVME_NAMES,
                            _num(nvme.get("temperature")), raw=data)
    attrs = {a.get("name"): a for a in data.get("ata_smart_attributes", {}).get("table", [])}
    if not attrs:
        messages = [m.get("string", "") for m in data.get("smartctl", {}).get("messages", [])]
        reason = messages[0] if messages else "smartctl found no SMART data"
        return SmartReading(device, False, reason, raw=data)
    temp = data.get("temperature", {}).get("current")
    lba = data.get("logical_block_size", 512)
    return SmartReading(
        device, True, "smartctl (ATA attributes)",
        temperature_c=_num(temp),
        percent_used=_ata_percent_used(data),
        host_read_bytes=_attr_bytes(attrs.get("Total_LBAs_Read"), lba),
        host_written_bytes=_attr_bytes(attrs.get("Total_LBAs_Written"), lba),
        media_errors=_attr_raw(attrs.get("Reported_Uncorrect")),
        power_on_hours=_int(data.get("power_on_time", {}).get("hours")),
        raw=data,
    )


def _nvme_health(device: str, reason: str, log: dict, names: dict[str, str | tuple[str, ...]],
                 temperature_c: float | None, raw: dict) -> SmartReading:
    """A reading of the NVMe health log, whichever tool printed it (``names`` says where
    each figure is)."""
    values: dict[str, Any] = {}
    for name, keys in names.items():
        value = next((log[k] for k in ((keys,) if isinstance(keys, str) else keys) if k in log),
                     None)
        values[name] = _NVME_CONVERSIONS.get(name, _int)(value)
    return SmartReading(device, True, reason, temperature_c=temperature_c,
                        thermal_throttle_events=_sum(values["thermal_t1_transitions"],
                                                     values["thermal_t2_transitions"]),
                        raw=raw, **values)


def _ata_percent_used(data: dict) -> float | None:
    """ATA device statistics (page 7): "Percentage Used Endurance Indicator", when the
    drive keeps it; vendor attributes differ too much to guess from."""
    for page in data.get("ata_device_statistics", {}).get("pages", []):
        for entry in page.get("table", []):
            if entry.get("name") == "Percentage Used Endurance Indicator":
                return _num(entry.get("value"))
    return None


def _sum(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _num(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _units(value: object) -> float | None:
    return None if value is None else float(value) * NVME_DATA_UNIT_BYTES  # type: ignore[arg-type]


_NVME_CONVERSIONS = {"percent_used": _num, "available_spare_pct": _num,
                     "host_read_bytes": _units, "host_written_bytes": _units}
"""The health log's figures that are not whole counts (the rest are ``_int``)."""


def _attr_raw(attr: dict | None) -> int | None:
    return None if attr is None else int(attr.get("raw", {}).get("value", 0))


def _attr_bytes(attr: dict | None, lba_bytes: int) -> float | None:
    raw = _attr_raw(attr)
    return None if raw is None else float(raw) * lba_bytes
