"""OS knobs of a search (``tune --search --allow-os-changes``): which kernel settings the
space may vary on this host, how a trial's drawn values become provision settings, and
applying them around a trial's runs through the provision machinery.

The knobs: the writeback thresholds vm.dirty_background_bytes and vm.dirty_bytes (MB, log
scale, relative to RAM: the kernel's stock ratios of 10% and 20% sit inside the ranges),
transparent huge pages (always | madvise | never), read_ahead_kb of the device holding the
data directory (kB, log scale) and huge pages for shared_buffers (``huge_pages = on`` with
vm.nr_hugepages reserved for the trial's shared_buffers as the tuned config sizes it, or
``off``). A knob this host cannot offer (no block device under the data directory, a
kernel without huge pages) is left out with a one-line note.

Every change goes through ``pgdyno provision`` (``provision.apply_settings``: the state file
on disk before the first write) and is reverted right after the trial's run, in a
``finally``. The search also names the state file in ``os-pending.json`` before the first
write and removes it after the revert: a search killed in between reverts it when it is run
again, and ``pgdyno provision revert STATE`` does the same by hand.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.config.model import pg_group
from pgdyno.config.sizing import estimate_shared_memory, huge_pages_needed
from pgdyno.config.units import MB
from pgdyno.errors import PgdynoError, RunError, UsageError
from pgdyno.search.space import OS_KNOBS, Knob

OS_LAYER = "os"
DIRTY_BACKGROUND, DIRTY, THP, READ_AHEAD, HUGE_PAGES = OS_KNOBS
HUGE_PAGES_MARGIN = 1.02
"""The tuned config's margin over the estimated shared memory (config/tuned.py)."""
PENDING_FILE = "os-pending.json"
"""In the search's directory while a trial's OS settings are applied: their state file."""
FLAG = "--allow-os-changes"

PROC_SYS = Path("/proc/sys")
SYS_BLOCK = Path("/sys/block")
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
MEMINFO = Path("/proc/meminfo")


class ApplyRefused(PgdynoError):
    """A trial's OS settings were refused or could not all be applied (huge pages the
    kernel could not reserve): nothing of them is left applied (provision rolled back)."""


@dataclass
class HostOs:
    """What this host offers the OS knobs, read once when the space is built."""

    ram_bytes: int
    data_device: str | None = None
    """The device whose queue/read_ahead_kb governs the data directory (vda, nvme0n1)."""
    huge_page_kb: int = 0
    """The huge page size (0: the kernel has no huge pages)."""
    notes: list[str] = field(default_factory=list)


def check_allowed(allow_os_changes: bool, euid: int | None = None) -> None:
    """--allow-os-changes changes kernel settings: root only, refused in one line."""
    euid = os.geteuid() if euid is None else euid
    if allow_os_changes and euid != 0:
        raise UsageError(f"tune --search {FLAG}: changing kernel settings needs root "
                         f"(euid {euid}); run it as root or leave {FLAG} out")


def read_host(ram_bytes: int, data_dir: Path) -> HostOs:
    """The data directory's device and the huge page size of this host, with a note for
    each knob it cannot offer."""
    host = HostOs(ram_bytes=ram_bytes)
    host.data_device, why = data_device(data_dir)
    if host.data_device is None:
        host.notes.append(f"OS knob {READ_AHEAD} left out: {why}")
    host.huge_page_kb = _huge_page_kb()
    if not host.huge_page_kb or not (PROC_SYS / "vm" / "nr_hugepages").exists():
        host.notes.append(f"OS knob {HUGE_PAGES} left out: this kernel cannot reserve huge "
                          "pages (no Hugepagesize in /proc/meminfo)")
        host.huge_page_kb = 0
    if not THP_ENABLED.exists():
        host.notes.append(f"OS knob {THP} left out: {THP_ENABLED} does not exist")
    return host


def data_device(data_dir: Path) -> tuple[str | None, str]:
    """The block device whose read-ahead the data directory's reads go through: the first
    device of its chain that has a queue (a partition's is its disk's); None and why when
    the directory is on no block device (overlay, tmpfs, NFS)."""
    from pgdyno.telemetry.devices import resolve_path

    path = Path(data_dir)
    while not path.exists() and path != path.parent:
        path = path.parent
    res = resolve_path(path)
    if res.error or not res.chain:
        return None, res.error or f"{path}: no block device found"
    for name in res.chain:
        if (SYS_BLOCK / name / "queue" / READ_AHEAD).exists():
            return name, ""
    return None, f"{path} is on {res.top}, which has no queue/{READ_AHEAD}"


def _huge_page_kb() -> int:
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("Hugepagesize:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def os_knobs(host: HostOs) -> dict[str, Knob]:
    """The OS knobs this host offers, bounded by its RAM (values in the knobs' units)."""
    ram_mb = max(256, host.ram_bytes // MB)

    def num(name: str, low: float, high: float, unit: str) -> Knob:
        return Knob(name, "int", low, max(low, high), True, unit, group="os_memory",
                    layer=OS_LAYER)

    knobs = [
        # Stock: 10% (background) and 20% of available memory; the ranges hold both.
        num(DIRTY_BACKGROUND, 8, max(16, ram_mb // 4), "MB"),
        num(DIRTY, 32, max(64, ram_mb // 2), "MB"),
    ]
    if THP_ENABLED.exists():
        knobs.append(Knob(THP, "enum", choices=("always", "madvise", "never"),
                          group="os_memory", layer=OS_LAYER))
    if host.data_device:
        knobs.append(Knob(READ_AHEAD, "int", 16, 16384, True, "", group="block_data",
                          layer=OS_LAYER))
    if host.huge_page_kb:
        knobs.append(Knob(HUGE_PAGES, "enum", choices=("off", "on"), restart=True,
                          group=pg_group(HUGE_PAGES), layer=OS_LAYER))
    return {k.name: k for k in knobs}


def host_values(host: HostOs) -> dict[str, str]:
    """This host's values of the OS knobs now, in the knobs' units (a baseline's point):
    the byte form of a dirty threshold from its ratio when the ratio is in force."""
    out: dict[str, str] = {}
    for name, ratio in ((DIRTY_BACKGROUND, "vm.dirty_background_ratio"),
                        (DIRTY, "vm.dirty_ratio")):
        value = _int(_read(PROC_SYS / name.replace(".", "/")))
        if not value:
            value = host.ram_bytes * _int(_read(PROC_SYS / ratio.replace(".", "/"))) // 100
        out[name] = str(value // MB)
    if THP_ENABLED.exists():
        out[THP] = _chosen(_read(THP_ENABLED))
    if host.data_device:
        out[READ_AHEAD] = _read(SYS_BLOCK / host.data_device / "queue" / READ_AHEAD)
    return out


def kernel_now(host: HostOs) -> dict[str, str]:
    """The live kernel values the OS knobs change, as provision names them (recorded with
    each trial; a baseline's are the host's as they were)."""
    out = {name: _read(PROC_SYS / name.replace(".", "/"))
           for name in (DIRTY_BACKGROUND, "vm.dirty_background_ratio", DIRTY, "vm.dirty_ratio",
                        "vm.nr_hugepages")}
    if THP_ENABLED.exists():
        out[THP] = _chosen(_read(THP_ENABLED))
    if host.data_device:
        out[f"{host.data_device}:{READ_AHEAD}"] = _read(
            SYS_BLOCK / host.data_device / "queue" / READ_AHEAD)
    return out


def trial_settings(drawn: dict[str, str], pg_settings: dict[str, str],
                   specs, host: HostOs) -> dict[str, str]:  # noqa: ANN001 - SettingSpecs
    """A trial's drawn OS values as provision settings (sysctl names, TRANSPARENT_HUGEPAGE,
    DATA_READ_AHEAD_KB); huge_pages = on reserves vm.nr_hugepages for the trial's
    shared_buffers, wal_buffers and max_connections, sized as the tuned config sizes them."""
    out: dict[str, str] = {}
    for name in (DIRTY_BACKGROUND, DIRTY):
        if name in drawn:
            out[name] = str(int(drawn[name].removesuffix("MB")) * MB)
    if THP in drawn:
        out["TRANSPARENT_HUGEPAGE"] = drawn[THP]
    if READ_AHEAD in drawn:
        out["DATA_READ_AHEAD_KB"] = drawn[READ_AHEAD]
    if drawn.get(HUGE_PAGES) == "on" and host.huge_page_kb:
        out["vm.nr_hugepages"] = str(huge_pages_for(pg_settings, specs, host.huge_page_kb))
    return out


def huge_pages_for(pg_settings: dict[str, str], specs, page_kb: int) -> int:  # noqa: ANN001
    """Huge pages for these settings' shared memory, as config/tuned.py reserves them."""
    def size(name: str) -> int:
        value = pg_settings.get(name) or specs.default(name)
        return specs.to_bytes(name, value) or 0

    shared = size("shared_buffers")
    wal = size("wal_buffers")
    if wal <= 0:  # -1: 1/32 of shared_buffers, 64 kB .. one WAL segment (16 MB)
        wal = min(16 * MB, max(64 * 1024, shared // 32))
    conns = int(pg_settings.get("max_connections") or specs.default("max_connections") or 100)
    return math.ceil(huge_pages_needed(estimate_shared_memory(shared, conns, wal), page_kb)
                     * HUGE_PAGES_MARGIN)


# ----- applying around a trial -----------------------------------------------------------

@dataclass(frozen=True)
class OsPlace:
    """Where a search's OS changes are recorded: its directory (the pending file), the
    provision journal of its context, the workdir where provision keeps state files."""

    search_dir: Path
    results_dir: Path
    context: str
    workdir: Path
    data_device: str | None = None


@contextlib.contextmanager
def applied(settings: dict[str, str], place: OsPlace, origin: str) -> Iterator[None]:
    """``settings`` applied through provision (the state file first, named in the pending
    file before the first write), reverted when the block ends, whatever ends it."""
    if not settings:
        yield
        return
    from pgdyno.provision import apply_settings

    pending = place.search_dir / PENDING_FILE

    def intent(state) -> None:  # noqa: ANN001 - a ProvisionState
        _write_pending(pending, state.path, origin)

    devices = (f"/dev/{place.data_device}",) if place.data_device else ()
    try:
        state = apply_settings(settings, place.workdir, data_devices=devices, origin=origin,
                               context=place.context, on_start=intent)
    except PgdynoError as exc:
        _event(place, "apply", exc.exit_code, f"{origin}: {exc}")
        pending.unlink(missing_ok=True)  # a failed apply rolled itself back
        raise ApplyRefused(str(exc)) from None
    if state is None:  # already at target: nothing to undo
        yield
        return
    shown = ", ".join(f"{k}={v}" for k, v in settings.items())
    _event(place, "apply", 0, f"{origin}: applied {shown}", state.path, len(state.steps))
    try:
        yield
    finally:
        revert_pending(place, origin)


def revert_pending(place: OsPlace, origin: str = "") -> str:
    """Revert what the pending file names (a trial's settings, or those a killed search
    left applied); '' when nothing was pending, else what was restored. A revert that fails
    raises RunError naming the `pgdyno provision revert` command that finishes it."""
    from pgdyno.provision import revert
    from pgdyno.provision.state import load_state

    pending = place.search_dir / PENDING_FILE
    try:
        record = json.loads(pending.read_text())
        state_file = str(record["state"])
    except FileNotFoundError:
        return ""
    except (OSError, ValueError, KeyError, TypeError):
        pending.unlink(missing_ok=True)
        return ""
    origin = origin or record.get("origin", "search")
    try:
        if load_state(Path(state_file)).status in ("reverted", "rolled back"):
            pending.unlink(missing_ok=True)
            return ""
        report = revert(state_file)
    except PgdynoError as exc:
        _event(place, "revert", exc.exit_code, f"{origin}: {exc}", state_file)
        raise RunError(f"{origin}: OS settings not reverted: {exc}; finish with: pgdyno "
                       f"provision revert {state_file}") from None
    summary = f"{origin}: restored {'; '.join(report.restored) or 'nothing'}"
    if report.failed:
        summary += f"; could not restore: {'; '.join(report.failed)}"
    _event(place, "revert", 1 if report.failed else 0, summary, state_file)
    if report.failed:
        raise RunError(f"{summary}; finish with: pgdyno provision revert {state_file}")
    pending.unlink(missing_ok=True)
    return summary


def _write_pending(path: Path, state_file: str, origin: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as fh:
        json.dump({"state": str(state_file), "origin": origin}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def _event(place: OsPlace, action: str, code: int, summary: str, state_file: str = "",
           changed: int = 0) -> None:
    from pgdyno.provision import record_event

    with contextlib.suppress(OSError):  # the journal line is a record, never a failure
        record_event(place.results_dir, place.context, action, exit_status=code,
                     summary=summary, state_file=state_file, changed=changed,
                     config=f"search {place.search_dir.name}")


def _read(path: Path) -> str:
    try:
        return " ".join(path.read_text().split())
    except OSError:
        return ""


def _int(text: str) -> int:
    return int(text) if text.strip().isdigit() else 0


def _chosen(text: str) -> str:
    return next((w.strip("[]") for w in text.split() if w.startswith("[")), text)
