"""Measured capacity at work: a write-heavy pgbench run on a throttled device is called
storage-bound against what fio measured on that device.

The device: an XFS file system on a loop device, its writes capped at ``WRITE_IOPS`` by
the block I/O throttle of the root cgroup (cgroup v2 ``io.max`` or v1
``blkio.throttle.write_iops_device``) for that loop device only. Teardown lifts the cap,
unmounts and detaches whatever happened.

The run loop freezes the host's capacity into each iteration's telemetry when the
iteration starts (``capacity.freeze_into``), so a rebuilt report reads the limits the run
was measured against: the test checks the frozen file is there, removes it to show that the
same raw data is then not called storage-bound, freezes it again as the run loop does, and
rebuilds the report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgdyno import serde
from pgdyno.analysis.verdict import CAPACITY, Evidence
from pgdyno.options import default_workdir
from pgdyno.reports.evidence import evidence_text
from pgdyno.results.capacity import FROZEN_FILE, freeze_into
from tests.conftest import run_cli_here

pytestmark = [pytest.mark.server, pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(p) for p in ("fio", "losetup", "mkfs.xfs")),
    reason="needs root, fio, losetup and mkfs.xfs")]

WRITE_IOPS = 300
V1_THROTTLE = Path("/sys/fs/cgroup/blkio/blkio.throttle.write_iops_device")
V2_IO_MAX = Path("/sys/fs/cgroup/io.max")


def pgdyno(*args: str) -> subprocess.CompletedProcess:
    """``pgdyno ARGS``, which must succeed, through the CLI's entry point in this process
    (``run_cli_here``: nothing here signals it), with the workdir a user has by default."""
    quiet = ["--no-progress"] if args[0] == "bench" else []
    proc = run_cli_here([*args, *quiet], default_workdir())
    assert proc.returncode == 0, proc.stderr
    return proc


def throttle(number: str, iops: int | None) -> None:
    """Cap (or, with None, uncap) the writes of device ``major:minor``."""
    if V2_IO_MAX.exists():
        V2_IO_MAX.write_text(f"{number} wiops={iops if iops else 'max'}\n")
    else:
        V1_THROTTLE.write_text(f"{number} {iops or 0}\n")


@pytest.fixture
def slow_xfs() -> Iterator[tuple[Path, str]]:
    if not (V2_IO_MAX.exists() or V1_THROTTLE.exists()):
        pytest.skip("no block I/O throttle in the root cgroup")
    # Under /tmp with 0755: the embedded server runs as an unprivileged user.
    base = Path(tempfile.mkdtemp(prefix="pgdyno-capacity-", dir="/tmp"))
    base.chmod(0o755)
    image, mnt = base / "image", base / "mnt"
    mnt.mkdir()
    image.write_bytes(b"")
    os.truncate(image, 768 * 2**20)
    loop = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True,
                          text=True, check=True).stdout.strip()
    number = Path(f"/sys/class/block/{Path(loop).name}/dev").read_text().strip()
    mounted = False
    try:
        subprocess.run(["mkfs.xfs", "-q", loop], check=True)
        subprocess.run(["mount", loop, str(mnt)], check=True)
        mounted = True
        mnt.chmod(0o755)
        yield mnt, number
    finally:
        throttle(number, None)
        if mounted:
            for _ in range(20):  # the server may take a moment to release its files
                if subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0:
                    break
                time.sleep(0.5)
            else:
                subprocess.run(["umount", "-l", str(mnt)], check=False)
        subprocess.run(["losetup", "-d", loop], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_throttled_device_is_storage_bound(slow_xfs: tuple[Path, str], tmp_path: Path) -> None:
    mnt, number = slow_xfs
    results, workdir = tmp_path / "results", mnt / "work"
    # simple-update: write-heavy without tpcb's single hot branch row at scale 1, whose
    # lock waits would hide the device behind them.
    writes = ("bench", "simple-update", "--workdir", str(workdir), "--scale", "1",
              "--clients", "4", "--iterations", "1", "--results-dir", str(results))
    # Cluster and dataset first, at full speed (initdb's syncs would crawl under the cap).
    pgdyno(*writes, "--duration", "1", "--warmup", "0")
    throttle(number, WRITE_IOPS)
    # Depth 1 only: the cap, not the queue depth, limits the device, so its peak is there
    # already (each further sweep point costs three more 2 s jobs).
    pgdyno("bench", "fio", "--target-dir", str(mnt), "--runtime", "2", "--size", "32MiB",
           "--max-depth", "1", "--fio-jobs", "1", "--skip-fsync-test", "--iterations", "1",
           "--results-dir", str(results))
    pgdyno(*writes, "--duration", "8", "--warmup", "1")
    run = max(results.glob("*--simple-update/simple-update-*"), key=lambda p: p.name)
    # The run kept the host's measured capacity as it was when the iteration started.
    telemetry = run / "raw" / "pgbench" / "c4-i1" / "telemetry"
    assert (telemetry / FROZEN_FILE).is_file()
    # Without it, the same raw data is not called storage-bound: the capacity decides.
    (telemetry / FROZEN_FILE).unlink()
    pgdyno("report", str(run))
    before = json.loads((run / "summary.json").read_text())["iterations"][0]
    assert before["verdict"]["primary"] != "storage"
    assert freeze_into(results, telemetry)
    pgdyno("report", str(run))
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    limits = {x["kind"]: x for x in it["telemetry"]["hardware_limits"]
              if x.get("basis") == "measured"}
    write = limits["write_iops"]
    # The recomputation: the run's mean write IOPS of the device over fio's measured peak.
    fio_run = max(results.glob("*--fio/fio-*"), key=lambda p: p.name)
    capacity = json.loads((results / "capacity" / f"{os.uname().nodename}.json").read_text())
    (entry,) = [d for d in capacity["devices"] if d["run"] == str(fio_run)]
    assert entry["write_iops_peak"] <= WRITE_IOPS * 1.1
    assert write["capacity"] == entry["write_iops_peak"]
    assert write["pct_avg"] == pytest.approx(100 * write["used_avg"] / write["capacity"])
    assert write["pct_avg"] >= 90
    ranked = [(c["name"], c["score"]) for c in it["verdict"]["ranked"]]
    assert it["verdict"]["primary"] == "storage", ranked
    evidence = [serde.from_dict(Evidence, e) for e in it["verdict"]["evidence"]]
    assert any("measured" in evidence_text(e) for e in evidence)
    # The evidence's figures are the most used measured limit's, as the telemetry has it.
    (capacity,) = [e for e in evidence if e.kind == CAPACITY]
    top = max((x for kind, x in limits.items()
               if kind in ("read_iops", "write_iops", "iops", "mib_s")),
              key=lambda x: x["pct_avg"] or 0)
    assert capacity.figures == {"used": top["used_avg"], "capacity": top["capacity"],
                                "pct": top["pct_avg"]} and capacity.figures["pct"] >= 90
