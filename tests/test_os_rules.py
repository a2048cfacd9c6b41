"""The OS layer of ``tuned`` against this host's kernel: no limit below
what /proc/sys already allows, and rationales that agree with the values. The oracle is
/proc/sys (and getrlimit, /sys/devices/system/node) read here, not pgdyno's detection."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from pgdyno.config import load_hardware, resolve_config
from pgdyno.config.detect import detect_profile
from pgdyno.config.model import Setting

# Limits: a higher value allows more. (tuned's other sysctls, such as vm.swappiness or
# tcp_fin_timeout, choose a behaviour and may go either way.)
LIMIT_SYSCTLS = ("kernel.sem", "fs.file-max", "fs.aio-max-nr", "net.core.somaxconn",
                 "net.core.netdev_max_backlog", "net.core.rmem_default", "net.core.rmem_max",
                 "net.core.wmem_default", "net.core.wmem_max", "net.ipv4.tcp_rmem",
                 "net.ipv4.tcp_wmem", "net.ipv4.tcp_max_syn_backlog", "vm.min_free_kbytes")
STOCK_SEM = "32000 1024000000 500 32000"  # Linux's default since 3.19 (include/uapi/linux/sem.h)


def proc_sys(name: str) -> list[int]:
    return [int(f) for f in Path("/proc/sys", name.replace(".", "/")).read_text().split()]


def host_settings() -> dict[str, Setting]:
    r = resolve_config("tuned", [], pg_major=18, workload="oltp",
                       hardware=detect_profile("/var/tmp"))
    assert r.plan is not None
    return {s.name: s for s in r.plan.settings if s.layer == "os"}


@pytest.mark.parametrize("name", LIMIT_SYSCTLS)
def test_no_limit_below_what_this_kernel_allows(name: str) -> None:
    if not Path("/proc/sys", name.replace(".", "/")).exists():
        pytest.skip(f"this kernel has no {name}")
    current = proc_sys(name)
    s = host_settings()[name]
    value = [int(f) for f in s.value.split()]
    assert len(value) == len(current), (name, s.value)
    assert all(v >= c for v, c in zip(value, current, strict=True)), (name, s.value, current)
    # the Default column is what this host has now
    assert [int(f) for f in s.default.split()] == current
    if value == current and "would do" in s.rationale:
        assert "kept" in s.rationale and " ".join(map(str, current)) in s.rationale


def test_kernel_sem_is_never_the_old_tiny_default() -> None:
    """The bug: 250 32000 100 128 against this kernel's 32000 1024000000 500 32000."""
    s = host_settings()["kernel.sem"]
    current = proc_sys("kernel.sem")
    fields = [int(f) for f in s.value.split()]
    assert fields == [max(a, b) for a, b in zip(fields, current, strict=True)]
    if fields == current:
        assert "kept, never lowered" in s.rationale
    # a catalogue machine: never below the stock kernel's limits either
    r = resolve_config("tuned", [], pg_major=18, workload="oltp",
                       hardware=load_hardware("r8g.large"))
    sem = next(x for x in r.plan.settings if x.name == "kernel.sem")
    assert all(int(v) >= int(d) for v, d in zip(sem.value.split(), STOCK_SEM.split(),
                                                 strict=True))


def test_numa_balancing_value_agrees_with_its_rationale() -> None:
    nodes = max(1, len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))))
    s = host_settings()["kernel.numa_balancing"]
    assert s.value == "0" and "off" in s.rationale
    assert s.rationale.startswith(f"{nodes} NUMA node")
    if nodes == 1:
        assert "nothing to balance" in s.rationale
    current = Path("/proc/sys/kernel/numa_balancing")
    if current.exists():
        assert s.default == current.read_text().strip()
    epyc = resolve_config("tuned", [], pg_major=18, workload="oltp",
                          hardware=load_hardware("epyc9254-dc3000me"))
    two = next(x for x in epyc.plan.settings if x.name == "kernel.numa_balancing")
    assert two.value == "0" and two.rationale.startswith("2 NUMA nodes: off")


@pytest.mark.parametrize("name, limit", [("nofile", resource.RLIMIT_NOFILE),
                                         ("nproc", resource.RLIMIT_NPROC)])
def test_process_limits_not_below_the_current_ones(name: str, limit: int) -> None:
    soft = resource.getrlimit(limit)[0]
    s = host_settings()[name]
    if soft == resource.RLIM_INFINITY:
        assert s.value == "unlimited"
    else:
        assert int(s.value) >= soft and s.default == str(soft)
