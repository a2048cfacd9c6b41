"""WAL archiving on a real embedded PostgreSQL: two tiny compliant TPROC-C sweeps (buffered
and direct), checked against what PostgreSQL wrote and counted; a full archive directory
on a loop-mounted filesystem made here; and the sweep-against-sweep comparison."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pgdyno.compare.sweeps import compare_sweeps, write_sweep_comparison
from pgdyno.targets.archive import LOG_NAME
from tests.answer import markdown_table
from tests.conftest import make_shared_dir, run_cli, run_cli_here

pytestmark = pytest.mark.server
SEGMENT = re.compile(r"^[0-9A-F]{24}$")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def root():
    path = make_shared_dir("pgdyno-archive-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wal-archiving.toml"


def small_example(root: Path) -> str:
    """examples/wal-archiving.toml at W=1,2 for 2 s without warm-up (every check reads what
    was archived and counted), each method archiving to its own directory, every segment
    kept in pg_wal under its name long enough to compare with the archived copies; each
    edit must find its line, so the example stays what is tested."""
    text = EXAMPLE.read_text()
    edits = [('warehouses = "10,30"', 'warehouses = "1,2"'),
             ("duration = 60\nwarmup = 15\niterations = 2",
              "duration = 2\nwarmup = 0\niterations = 1"),
             ("keying-thinking = true",
              f'keying-thinking = true\ntime-scale = 0.02\nworkdir = "{root / "wd"}"'),
             # whole runs on one cluster, whose pg_wal the archived copies are checked
             # against (a block comparison's clusters are removed when it ends)
             ('design = "interleaved"', 'design = "sequential"')]
    for method in ("buffered", "direct"):
        edits += [(f'label = "archive-{method}"',
                   f'label = "archive-{method}"\n'
                   'set = ["archive_timeout=1", "wal_keep_size=2GB"]'),
                  (f'archive = "{method}"',
                   f'archive = "{method}"\narchive-dir = "{root / f"arch-{method}"}"')]
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def sweeps(root: Path) -> dict[str, Path]:
    """The two sweeps, run by the example campaign (one cell per archive method)."""
    campaign = root / "wal-archiving.toml"
    campaign.write_text(small_example(root))
    result = run_cli_here(["campaign", str(campaign), "--results-dir",
                           str(root / "results"), "--no-progress"], root / "wd")
    assert result.returncode == 0, result.stderr[-2000:]
    journal = root / "results" / "campaigns" / "wal-archiving" / "journal.jsonl"
    ends = [json.loads(line) for line in journal.read_text().splitlines()]
    dirs = {e["cell"].rsplit("-", 1)[1]: root / "results" / e["run_dir"] for e in ends
            if e["event"] == "run-end" and e["status"] == "ok"}
    assert set(dirs) == {"buffered", "direct"}
    for method, sweep in dirs.items():
        assert sweep.name.startswith("tprocc-sweep-")
        record = json.loads((sweep / "sweep.json").read_text())
        assert [s["size"] for s in record["steps"]] == [1, 2]
        for step in record["steps"]:
            manifest = json.loads((sweep.parent / step["run"] / "manifest.json").read_text())
            assert manifest["role"]["label"] == f"archive-{method}"
            assert manifest["config"]["pg_settings"]["archive_mode"] == "on"
            assert method in manifest["config"]["sources"]["archive_command"]
    return dirs


@pytest.mark.parametrize("method", ["buffered", "direct"])
def test_every_switched_segment_is_archived_byte_identical(sweeps, root: Path,
                                                           method: str) -> None:
    arch = root / f"arch-{method}"
    pg_wal = next((root / "wd" / "instances").glob("*/data/pg_wal"))
    archived = sorted(p.name for p in arch.iterdir() if SEGMENT.match(p.name))
    assert len(archived) >= 2
    # No gap: every segment from the first archived to the last is there.
    numbers = [int(name[8:16], 16) * 256 + int(name[16:], 16) for name in archived]
    assert numbers == list(range(numbers[0], numbers[-1] + 1))
    # Byte-identical to PostgreSQL's own, for every one still in pg_wal under its name
    # (older ones are recycled into future names once archived).
    both = [name for name in archived if (pg_wal / name).is_file()]
    assert both
    for name in both:
        assert _sha(arch / name) == _sha(pg_wal / name), name
    # The log names exactly the segments of the last run that pgdyno archived.
    log_ok = [line.split()[0] for line in (arch / LOG_NAME).read_text().splitlines()
              if line.split()[3] == "ok"]
    assert log_ok and set(log_ok) <= set(archived)


@pytest.mark.parametrize("method", ["buffered", "direct"])
def test_counts_and_lag_match_pg_stat_archiver(sweeps, method: str) -> None:
    sweep = sweeps[method]
    record = json.loads((sweep / "sweep.json").read_text())
    for step in record["steps"]:
        run = sweep.parent / step["run"]
        tdir = next(run.glob("raw/*/c*-i1/telemetry"))
        samples = _rows(tdir / "archiver.csv")
        commands = _rows(tdir / "archive_commands.csv")
        assert int(samples[-1]["failed_count"]) == 0
        assert {c["method"] for c in commands} == {method}
        first, last = samples[0], samples[-1]
        counted = int(last["archived_count"]) - int(first["archived_count"])
        logged = [c for c in commands if c["outcome"] == "ok"
                  and float(first["t"]) < float(c["end"]) <= float(last["t"])]
        assert abs(counted - len(logged)) <= 1, (counted, len(logged))
        # The last archived segment PostgreSQL reports is the last one the command copied.
        assert last["last_archived_wal"] == commands[-1]["segment"]
        summary = json.loads((run / "summary.json").read_text())
        a = summary["iterations"][0]["telemetry"]["archive"]
        assert a["method"] == method and not a["failing"]
        # The summary's lag at the window's end, recomputed from the raw sample nearest it.
        end = summary["iterations"][0]["telemetry"]["window_end"]
        row = [r for r in samples if float(r["t"]) <= end + 1][-1]
        cur, done = row["current_wal"], row["last_archived_wal"]
        lag = max(0, int(cur[16:], 16) - int(done[16:], 16) - 1)
        assert a["lag_end"] == lag
        assert (run / "plots" / "c10-i1" / "memory.png").exists() or \
            list(run.glob("plots/*/memory.png"))
        assert "## WAL archiving" in (run / "report.md").read_text().replace("###", "##")


def test_sweep_against_sweep(sweeps, root: Path) -> None:
    cmp = compare_sweeps(sweeps["buffered"], sweeps["direct"], at_step=2)
    md = write_sweep_comparison(cmp, root / "cmp")
    for side, sweep in ((cmp.a, sweeps["buffered"]), (cmp.b, sweeps["direct"])):
        own = json.loads((sweep / "sweep_summary.json").read_text())
        for row in own["rows"]:
            mine = side.rows[row["warehouses"]]
            assert mine.nopm == pytest.approx(row["nopm_mean"])
            assert mine.real_vs_ideal == pytest.approx(row["real_vs_ideal"])
        assert side.saturation_warehouses == own["saturation_warehouses"]
        assert side.memory is not None and len(side.memory.t) >= 2
    text = md.read_text()
    assert "| 1 |" in text and "| 2 |" in text
    # One form in both: the comparison shows each sweep's real/ideal (a percentage) and New-Order
    # p90 (ms) exactly as the sweep's own report does.
    compared = {r[0]: r for r in markdown_table(text, "| Warehouses | Ideal NOPM |")[2:]}
    for column, sweep in ((0, sweeps["buffered"]), (1, sweeps["direct"])):
        own = markdown_table((sweep / "report.md").read_text(), "| Warehouses | VUs |")
        for row in own[2:]:
            assert compared[row[0]][4 + column] == row[own[0].index("Real/ideal")]
            assert compared[row[0]][4 + column].endswith("%")
            assert compared[row[0]][6 + column] == row[own[0].index("p90 NO ms")]
    assert "buffered" in text and "direct" in text
    assert (root / "cmp" / "plots" / "sweeps_nopm.png").stat().st_size > 0
    assert (root / "cmp" / "plots" / "sweeps_memory.png").stat().st_size > 0
    # The CLI takes the same branch for two sweep directories.
    result = run_cli_here(["compare", str(sweeps["buffered"]), str(sweeps["direct"]),
                           "--out", str(root / "cmp-cli")], root / "wd")
    assert result.returncode == 0, result.stderr
    assert (root / "cmp-cli" / "compare.md").exists()


@pytest.fixture()
def tiny_filesystem(root: Path):
    """An 8 MB ext4 on a loop device: too small for one 16 MB segment."""
    if shutil.which("losetup") is None or shutil.which("mkfs.ext4") is None:
        pytest.skip("losetup or mkfs.ext4 missing")
    image, mount = root / "tiny.img", root / "tiny"
    mount.mkdir()
    device = None
    try:
        subprocess.run(["truncate", "-s", "8M", str(image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", str(image)], check=True)
        device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True,
                                capture_output=True, text=True).stdout.strip()
        subprocess.run(["mount", device, str(mount)], check=True)
        mount.chmod(0o755)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        if device:
            subprocess.run(["losetup", "-d", device], check=False)
        image.unlink(missing_ok=True)


def test_a_full_archive_directory_is_failed_archiving(tiny_filesystem: Path,
                                                      root: Path) -> None:
    result = run_cli(["bench", "tpcb", "--scale", "1", "--clients", "2", "--duration", "4",
                      "--warmup", "1", "--iterations", "1", "--archive", "buffered",
                      "--archive-dir", str(tiny_filesystem / "arch"), "--set",
                      "archive_timeout=1", "--results-dir", str(root / "full"), "--workdir",
                      str(root / "wd-full"), "--no-progress"], root / "wd-full", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    run = next((root / "full").glob("*/tpcb-*"))
    summary = json.loads((run / "summary.json").read_text())
    it = summary["iterations"][0]
    assert it["status"] == "ok" and it["tps_mean"] > 0  # the run keeps its data
    samples = _rows(next(run.glob("raw/*/c2-i1/telemetry")) / "archiver.csv")
    failed = int(samples[-1]["failed_count"]) - int(samples[0]["failed_count"])
    assert failed > 0 and int(samples[-1]["archived_count"]) == 0
    a = it["telemetry"]["archive"]
    assert a["failing"] and a["failed"] > 0
    archiver = [e for e in it["verdict"]["evidence"] if e["kind"] == "archiver"]
    assert [e["names"]["finding"] for e in archiver] == a["evidence"]
    assert any("WAL archiving failed" in e["names"]["finding"] for e in archiver)
    report = (run / "report.md").read_text()
    assert "FAILING" in report and "WAL archiving failed" in report
