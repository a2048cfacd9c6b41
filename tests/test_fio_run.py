"""``pgdyno bench fio`` for real: fio on an XFS file system made on a loop device here.

One short run (1 s jobs, a 64 MiB file, sweeps to depth 2, pg_test_fsync at 1 s per test)
is shared by the tests below; each recomputes its figures from the raw json+ files with
code of its own and compares. The loop device and the mount are removed in the fixture's
teardown whatever happens.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgdyno.options import default_workdir
from pgdyno.results.capacity import load_capacity, store_path
from tests.answer import markdown_table
from tests.conftest import run_cli_here

# A real device measured for about a minute: out of the quick `-m "not server"` run.
pytestmark = [pytest.mark.server, pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(p) for p in ("fio", "losetup", "mkfs.xfs")),
    reason="needs root, fio, losetup and mkfs.xfs")]

KERNEL_EXTRA_IOS_PCT = 2.0
"""I/Os the kernel counts on the loop device beyond fio's own, at most: XFS's log and
inode writes during a 4 KiB random job (measured here: under 0.5%)."""


def pgdyno(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``pgdyno ARGS`` through the CLI's entry point in this process (``run_cli_here``: no
    signal here, and fio runs as a child either way), with the workdir a user has by
    default; ``env``: variables set on top of this process's environment."""
    return run_cli_here(list(args), default_workdir(), env=env)


@pytest.fixture(scope="module")
def xfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(mount point, loop device) of a fresh 512 MiB XFS; unmounted and detached after."""
    base = tmp_path_factory.mktemp("xfs")
    image, mnt = base / "image", base / "mnt"
    mnt.mkdir()
    image.write_bytes(b"")
    os.truncate(image, 512 * 2**20)
    loop = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True,
                          text=True, check=True).stdout.strip()
    mounted = False
    try:
        subprocess.run(["mkfs.xfs", "-q", loop], check=True)
        subprocess.run(["mount", loop, str(mnt)], check=True)
        mounted = True
        yield mnt, loop
    finally:
        if mounted:
            unmount(mnt)
        subprocess.run(["losetup", "-d", loop], check=False)


def unmount(mnt: Path) -> None:
    """Unmount, retrying while the kernel still holds the file system busy (a process that
    just exited); lazily as the last resort, so the machine is always restored."""
    for _ in range(10):
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0:
            return
        time.sleep(0.5)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture(scope="module")
def run(xfs: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    mnt, _loop = xfs
    results = tmp_path_factory.mktemp("results")
    proc = pgdyno("bench", "fio", "--target-dir", str(mnt), "--runtime", "1",
                  "--size", "64MiB", "--max-depth", "2", "--fio-jobs", "2",
                  "--iterations", "1", "--results-dir", str(results), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = [p for p in results.glob("*/fio-*") if p.is_dir()]
    return run_dir


# ----- independent recomputation ------------------------------------------------------------

def fio_job(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text[text.index("{"):])["jobs"][0]


def iops(side: dict) -> float:
    return side["total_ios"] * 1000.0 / side["runtime"] if side["runtime"] else 0.0


def percentile(dist: dict, p: float) -> float:
    bins = sorted((int(k), v) for k, v in dist["bins"].items())
    total = sum(v for _, v in bins)
    running = 0
    for value, n in bins:
        running += n
        if running * 100 >= p * total:
            return value
    raise AssertionError("empty histogram")


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def test_every_metric_is_its_json_recomputed(run: Path) -> None:
    metrics = json.loads((run / "summary.json").read_text())["iterations"][0]["metrics"]
    raw = run / "raw" / "fio" / "c1-i1" / "target"
    seq_read = fio_job(raw / "seq-read.json")["read"]
    assert close(metrics["seq_read_mib_s"], seq_read["io_bytes"] / 2**20
                 / (seq_read["runtime"] / 1000))
    qd1 = fio_job(raw / "randread-d1.json")["read"]
    assert close(metrics["randread_qd1_iops"], iops(qd1))
    assert close(metrics["randread_qd1_lat_avg_us"], qd1["clat_ns"]["mean"] / 1000)
    assert close(metrics["randread_qd1_lat_p99_us"], percentile(qd1["clat_ns"], 99) / 1000)
    # fio's own percentile, by the same rule, agrees with the recomputation.
    assert percentile(qd1["clat_ns"], 99) == qd1["clat_ns"]["percentile"]["99.000000"]
    write_qd1 = fio_job(raw / "randwrite-d1.json")["write"]
    assert close(metrics["randwrite_qd1_lat_p99_us"],
                 percentile(write_qd1["clat_ns"], 99) / 1000)
    for kind, side in (("randread", "read"), ("randwrite", "write")):
        sweep = [iops(fio_job(p)[side]) for p in sorted(raw.glob(f"{kind}-d*.json"))]
        assert close(metrics[f"{kind}_peak_iops"], max(sweep))
    mix = [fio_job(p) for p in raw.glob("randrw-d*.json")]
    assert close(metrics["randrw_peak_iops"], max(iops(j["read"]) + iops(j["write"])
                                                  for j in mix))
    wal = fio_job(raw / "wal-1j.json")
    assert close(metrics["wal_fdatasync_1job_ops_s"], iops(wal["write"]))
    # One fdatasync per write; the runtime can end between the last write and its sync
    # (fio counted 2,511 syncs for 2,512 writes once in clean-clone CI).
    assert wal["sync"]["lat_ns"]["N"] >= wal["write"]["total_ios"] - 1
    fsync_text = (raw / "pg_test_fsync.txt").read_text()
    one_write = fsync_text.split("one 8kB write:")[1].split("Compare")[0]
    fdatasync = re.search(r"^\s+fdatasync\s+([\d.]+) ops/sec", one_write, re.MULTILINE)
    assert fdatasync is not None
    assert close(metrics["pg_test_fsync_fdatasync_ops_s"], float(fdatasync[1]))


def test_kernel_counters_agree_with_fio_on_random_jobs(run: Path) -> None:
    """The kernel counted the I/Os fio says it made: a count, so that a 1 s job's rate
    swinging with the shared host's speed cannot make the two disagree."""
    it_dir = run / "raw" / "fio" / "c1-i1"
    book = json.loads((it_dir / "jobs.json").read_text())
    checked = 0
    for job in book["jobs"]:
        if not job["kind"].startswith("rand") or not job["kernel"]:
            continue
        data = json.loads((it_dir / job["output"]).read_text())
        # /proc/diskstats: field 4 = reads completed, field 8 = writes completed. The
        # samples start before fio and the last is taken after it exited (no ramp here).
        completed = [int(s["line"].split()[3]) + int(s["line"].split()[7])
                     for s in job["kernel"]]
        kernel = completed[-1] - completed[0]
        fio = sum(data["jobs"][0][side]["total_ios"] for side in ("read", "write"))
        # Beside fio's I/Os the device sees only the file system's own few (log, inodes).
        assert fio <= kernel <= fio * (1 + KERNEL_EXTRA_IOS_PCT / 100) + 32, \
            (job["name"], kernel, fio)
        checked += 1
    assert checked >= 6


def test_test_files_removed_and_report_written(run: Path, xfs: tuple[Path, str]) -> None:
    mnt, _ = xfs
    assert list(mnt.iterdir()) == []
    report = (run / "report.md").read_text()
    for text in ("Storage baseline (fio)", "Random read QD1", "wal_sync_method",
                 "IOPS against total queue depth", "fio against the kernel's disk counters"):
        assert text in report
    for name in ("bandwidth", "iops", "latency", "sweep"):
        assert (run / "plots" / f"fio_target_{name}.png").stat().st_size > 0
    # The environment table names the device measured (the runner's device rows).
    _, loop = xfs
    assert f"Storage (target) | {Path(loop).name}: loop" in report.replace("|  ", "| ")


def test_capacity_recorded_from_the_run(run: Path, xfs: tuple[Path, str]) -> None:
    _, loop = xfs
    metrics = json.loads((run / "summary.json").read_text())["iterations"][0]["metrics"]
    store = load_capacity(store_path(run.parent.parent))
    assert store is not None
    entry = store.device(Path(loop).name)
    assert entry is not None and entry.run == str(run)
    assert close(entry.write_iops_peak, metrics["randwrite_peak_iops"])
    assert close(entry.read_mib_s, metrics["seq_read_mib_s"])


# ----- refusals -------------------------------------------------------------------------------

def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_device_without_destroy_data_is_refused(xfs: tuple[Path, str], tmp_path: Path) -> None:
    _, loop = xfs
    line = one_line_error(pgdyno("bench", "fio", "--device", loop, "--results-dir",
                                 str(tmp_path)))
    assert "--destroy-data" in line
    assert not list(tmp_path.iterdir())  # refused before anything was created


def test_mounted_device_is_refused(xfs: tuple[Path, str], tmp_path: Path) -> None:
    mnt, loop = xfs
    line = one_line_error(pgdyno("bench", "fio", "--device", loop, "--destroy-data",
                                 "--confirm", Path(loop).name, "--results-dir", str(tmp_path)))
    assert "mounted" in line and str(mnt) in line


def test_not_a_block_device_is_refused(tmp_path: Path) -> None:
    line = one_line_error(pgdyno("bench", "fio", "--device", str(tmp_path), "--destroy-data"))
    assert "not a block device" in line


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    line = one_line_error(pgdyno("bench", "fio", "--target-dir", str(tmp_path / "nope")))
    assert "does not exist" in line


def test_missing_fio_is_one_line(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}  # a PATH without fio
    line = one_line_error(pgdyno("bench", "fio", "--target-dir", str(tmp_path), env=env))
    assert "apt-get install fio" in line


def test_device_identity_of_the_loop_mount(xfs: tuple[Path, str]) -> None:
    from pgdyno.runner.environment import host_facts

    mnt, loop = xfs
    name = Path(loop).name
    host = host_facts({"data": mnt / "not-yet-created", "wal": mnt})
    facts = [f for f in host.storage if f.device == name]
    assert len(facts) == 1 and facts[0].role == "data"  # one device, listed once
    sysfs = Path("/sys/class/block") / name
    backing = (sysfs / "loop" / "backing_file").read_text().strip()
    size = int((sysfs / "size").read_text()) * 512  # bytes: 512-byte sectors
    unit, amount = next((u, size / 1024 ** k) for k, u in ((3, "GiB"), (2, "MiB"), (1, "KiB"))
                        if size >= 1024 ** k)
    digits = 0 if amount >= 100 else 1 if amount >= 10 else 2  # about 3 significant
    scheduler = (sysfs / "queue" / "scheduler").read_text().split("[")[-1].split("]")[0] \
        if "[" in (sysfs / "queue" / "scheduler").read_text() else "none"
    assert facts[0].summary.startswith(f"{name}: loop, {amount:,.{digits}f} {unit}")
    assert f"on {backing}" in facts[0].summary
    assert f"scheduler {scheduler}" in facts[0].summary
    # Below the loop device: the disk holding its backing file.
    assert len(host.storage) >= 2


def test_compare_of_two_fio_runs(run: Path, xfs: tuple[Path, str]) -> None:
    """`pgdyno compare` reads fio runs as it reads any other: each metric's change is the
    candidate's mean over the baseline's, from the two summaries. The second run is the
    smallest job set that has the compared metric (queue depth 1, one WAL job: 6 jobs, not
    13)."""
    mnt, _ = xfs
    results = run.parent.parent
    proc = pgdyno("bench", "fio", "--target-dir", str(mnt), "--runtime", "1", "--size", "64MiB",
                  "--max-depth", "1", "--fio-jobs", "1", "--skip-fsync-test", "--iterations", "1",
                  "--results-dir", str(results), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    second = max((p for p in results.glob("*/fio-*") if p != run), key=lambda p: p.name)
    out = results / "cmp"
    proc = pgdyno("compare", str(run), str(second), "--results-dir", str(results),
                  "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((out / "compare.json").read_text())
    metric = {m["metric"]: m for m in saved["metrics"]}["randread_qd1_iops"]
    a, b = (json.loads((r / "summary.json").read_text())["iterations"][0]["metrics"]
            ["randread_qd1_iops"] for r in (run, second))
    assert metric["baseline_mean"] == pytest.approx(a)
    assert metric["candidate_mean"] == pytest.approx(b)
    assert metric["baseline_n"] == metric["candidate_n"] == 1
    assert "Random read IOPS QD1" in (out / "compare.md").read_text()


BINARY_RATES = ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"]


def test_bandwidth_column_is_binary_and_recomputed(run: Path) -> None:
    """The headline table's bandwidth column: one binary prefix (the largest job's, below
    1024 of it), each cell fio's io_bytes ÷ runtime in it, recomputed here."""
    raw = run / "raw" / "fio" / "c1-i1" / "target"
    table = markdown_table((run / "report.md").read_text(), "| Test | Block |")
    column = next(i for i, h in enumerate(table[0]) if h.startswith("Bandwidth ("))
    cells = {row[0]: row[column] for row in table[2:]}
    rates = {}
    for label, name, side in (("Sequential read", "seq-read", "read"),
                              ("Sequential write", "seq-write", "write"),
                              ("Random read QD1", "randread-d1", "read")):
        job = fio_job(raw / f"{name}.json")[side]
        rates[label] = job["io_bytes"] / (job["runtime"] / 1000)
    top = max(rates.values())  # the sequential jobs lead the column
    power = 0
    while top >= 1024 ** (power + 1):
        power += 1
    assert table[0][column] == f"Bandwidth ({BINARY_RATES[power]})"
    for label, rate in rates.items():
        shown = float(cells[label].replace(",", ""))
        assert abs(shown - rate / 1024**power) <= 0.006 * max(1.0, shown), (label, shown)
    assert "MB/s" not in (run / "report.md").read_text()
