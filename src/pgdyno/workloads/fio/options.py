"""``pgdyno bench fio``'s own options, checked, and what follows from them: the places
measured by role, the devices under them, and the job set's planned length."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.telemetry.devices import resolve_path
from pgdyno.workloads.base import BenchOptions, option
from pgdyno.workloads.checks import check_at_most, check_choice, check_positive, parse_size_option
from pgdyno.workloads.fio import fsync, jobs, places

DEFAULT_SIZE = "2GiB"
MIN_SIZE = 16 * 2**20
MAX_RUNTIME_S = 3600


@dataclass(frozen=True)
class FioOptions:
    data_dir: Path | None = option(None, "fio: the data directory's filesystem to measure")
    target_dir: tuple[str, ...] = option((), "fio: another directory to measure, repeatable")
    device: str | None = option(None, "fio: a raw block device to measure (needs "
                                      "--destroy-data: overwrites it)")
    destroy_data: bool = option(False, "fio: accept that --device is overwritten whole")
    confirm: str | None = option(None, "fio: the --device's name, confirming --destroy-data")
    runtime: int = option(30, "fio: measured seconds per job (default 30)")
    ramp: int = option(0, "fio: seconds per job before it is measured (default 0; a few "
                          "seconds let a device's write cache fill first)")
    size: str = option(DEFAULT_SIZE, "fio: size of the test file (default 2GiB)")
    fio_jobs: int = option(4, "fio: jobs of the bandwidth and WAL tests (default 4)",
                           flag="--fio-jobs")
    max_depth: int = option(256, "fio: largest total queue depth of the sweeps (default 256)")
    ioengine: str = option("libaio", "fio: libaio | io_uring")
    skip_fsync_test: bool = option(False, "fio: do not run pg_test_fsync")
    # Resolved by options_from_cli: the places, by role.
    wal_dir: str | None = None
    workdir_default: bool = False
    """No directory was named: the workdir's filesystem is measured."""
    device_name: str | None = None


def numbers(raw: dict[str, Any]) -> FioOptions:
    o = FioOptions(**{k: v for k, v in raw.items()
                      if k in {f.name for f in dataclasses.fields(FioOptions)}
                      and k not in ("data_dir", "target_dir", "device", "destroy_data",
                                    "confirm")})
    check_positive(o.runtime, "--runtime")
    check_at_most(o.runtime, "--runtime", MAX_RUNTIME_S, "one hour per job")
    check_positive(o.ramp, "--ramp", allow_zero=True)
    check_at_most(o.ramp, "--ramp", MAX_RUNTIME_S, "one hour per job")
    check_positive(o.fio_jobs, "--fio-jobs")
    check_at_most(o.fio_jobs, "--fio-jobs", 256, "fio threads")
    check_positive(o.max_depth, "--max-depth")
    check_at_most(o.max_depth, "--max-depth", 4096, "I/Os in flight")
    check_choice(o.ioengine, "--ioengine", jobs.IO_ENGINES)
    size = parse_size_option(o.size, "--size")
    if size < MIN_SIZE:
        raise UsageError(f"--size {o.size}: at least 16MiB (the bandwidth jobs split it)")
    return o


def directories(raw: dict[str, Any], opts: BenchOptions) -> list[places.Directory]:
    dirs = []
    if raw.get("data_dir") is not None:
        dirs.append(places.Directory("data", places.check_directory(raw["data_dir"],
                                                                    "--data-dir")))
    if opts.target.wal_dir is not None:
        dirs.append(places.Directory("wal", places.check_directory(opts.target.wal_dir,
                                                                   "--wal-dir")))
    for path in raw.get("target_dir") or ():
        dirs.append(places.Directory("target", places.check_directory(Path(path),
                                                                      "--target-dir")))
    return dirs


def roles(o: FioOptions) -> list[tuple[str, str]]:
    out = []
    if o.data_dir is not None:
        out.append(("data", str(o.data_dir)))
    if o.wal_dir is not None:
        out.append(("wal", o.wal_dir))
    out += [("target", p) for p in o.target_dir]
    return out


def planned_seconds(o: FioOptions, places_count: int) -> int:
    """The job set's length at most (sweeps may stop early): the progress bar's total."""
    per_job = o.runtime + o.ramp
    count = 2 + 3 * len(jobs.sweep_depths(o.max_depth)) + len(jobs.wal_jobs(o.fio_jobs))
    fsync_s = 0 if (o.skip_fsync_test or o.device) else 16 * min(o.runtime,
                                                                  fsync.MAX_SECONDS_PER_TEST)
    return places_count * (count * per_job + fsync_s)


def places_of(o: FioOptions) -> list[tuple[str, Path | None, str | None]]:
    """(label, directory, device name) per place to measure."""
    if o.device_name:
        return [(o.device_name, None, o.device_name)]
    dirs = [places.Directory(role, Path(path)) for role, path in roles(o)]
    return [(label, path, None) for label, path in places.group_by_filesystem(dirs)]


def physical_of(o: FioOptions) -> list[str]:
    if o.device_name:
        return [o.device_name]
    found: list[str] = []
    for _role, path in roles(o):
        for dev in resolve_path(path).physical:
            if dev not in found:
                found.append(dev)
    return found
