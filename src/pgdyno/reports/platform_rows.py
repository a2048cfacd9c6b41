"""The environment table's platform rows: CPU clock and governor, NUMA nodes, the mounts of
the run's directories and the NVMe PCIe links, one column per machine, from the manifest's
``platform`` (``telemetry.platform_facts.PlatformFacts`` as JSON).

A fact the host did not expose reads "not exposed"; a machine whose manifest has no
platform facts (older runs, an --ssh host that could not be asked) reads "–"; and when no
machine has them, the rows are left out, as before these facts were recorded.
"""

from __future__ import annotations

from typing import Any

NOT_EXPOSED = "not exposed"
NOT_RECORDED = "–"


def platform_rows(machines: list[dict]) -> list[list[str]]:
    facts = [m.get("platform") for m in machines]
    if not any(isinstance(f, dict) for f in facts):
        return []
    rows = [["CPU clock", *_cells(facts, cpu_clock)],
            ["CPU governor", *_cells(facts, cpu_governor)],
            ["NUMA nodes", *_cells(facts, _numa)]]
    roles = list(dict.fromkeys(str(mount.get("role")) for f in facts if isinstance(f, dict)
                               for mount in f.get("mounts") or []))
    for role in roles:
        rows.append([f"Mount ({role})", *_cells(facts, lambda f, r=role: mount_text(f, r))])
    rows.append(["PCIe link (NVMe)", *_cells(facts, nvme_text)])
    return rows


def _cells(facts: list[Any], render) -> list[str]:
    return [render(f) if isinstance(f, dict) else NOT_RECORDED for f in facts]


def cpu_clock(f: dict) -> str:
    """"base 2,900 MHz (cpufreq base_frequency), max 4,151 MHz (cpufreq cpuinfo_max_freq)";
    without cpufreq, the clock /proc/cpuinfo stated when read, named as such."""
    base, top, now = f.get("cpu_base_mhz"), f.get("cpu_max_mhz"), f.get("cpu_current_mhz")
    if base is None and top is None:
        words = f"{NOT_EXPOSED} (no cpufreq)"
    else:
        words = ", ".join((
            f"base {_mhz(base)} ({f.get('cpu_base_source')})" if base is not None
            else f"base {NOT_EXPOSED}",
            f"max {_mhz(top)} (cpufreq cpuinfo_max_freq)" if top is not None
            else f"max {NOT_EXPOSED}"))
    if now is not None and (base is None or top is None):
        words += f"; {_mhz(now)} when read (/proc/cpuinfo cpu MHz: neither base nor max)"
    return words


def cpu_governor(f: dict) -> str:
    """"performance on 96 CPUs (intel_pstate)"; "powersave on 94 CPUs, performance on 2"."""
    governors = f.get("governors") or {}
    if not governors:
        return f"{NOT_EXPOSED} (no cpufreq)"
    ranked = sorted(governors.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{name} on {n:,} CPU{'s' if n != 1 else ''}" for name, n in ranked)
    driver = f.get("cpufreq_driver")
    return f"{text} ({driver})" if driver else text


def _numa(f: dict) -> str:
    nodes = f.get("numa_nodes")
    return f"{nodes:,}" if nodes is not None else NOT_EXPOSED


def mount_text(f: dict, role: str) -> str:
    """"xfs on /data (/dev/md0): rw,noatime,inode64,logbufs=8"."""
    found = [m for m in f.get("mounts") or [] if str(m.get("role")) == role]
    if not found:
        return NOT_RECORDED
    m = found[0]
    return f"{m.get('fstype')} on {m.get('mount_point')} ({m.get('source')}): {m.get('options')}"


def nvme_text(f: dict) -> str:
    """"nvme0 (model): PCIe Gen5 x4 (32.0 GT/s PCIe)" per controller."""
    if not f.get("nvme_exposed"):
        return "no NVMe controller (no /sys/class/nvme)"
    links = f.get("nvme_links") or []
    if not links:
        return "no NVMe controller"
    return "; ".join(_link(link) for link in links)


def _link(link: dict) -> str:
    name = str(link.get("controller"))
    if link.get("model"):
        name += f" ({link['model']})"
    speed, width = str(link.get("speed") or ""), str(link.get("width") or "")
    if not speed or not width:
        return f"{name}: link {NOT_EXPOSED}"
    gen = link.get("generation")
    text = f"{name}: PCIe {f'Gen{gen}' if gen else speed} x{width}"
    if gen:
        text += f" ({speed})"
    top_speed, top_width = link.get("max_speed") or "", link.get("max_width") or ""
    if top_speed and top_width and (top_speed, top_width) != (speed, width):
        top_gen = link.get("max_generation")
        text += f", capable of {f'Gen{top_gen}' if top_gen else top_speed} x{top_width}"
    return text


def _mhz(value: float) -> str:
    return f"{value:,.0f} MHz"
