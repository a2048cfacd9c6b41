"""Seed 003 on this machine: examples/wal-archiving.toml (buffered against direct archive
copies, each under a compliant TPROC-C warehouse sweep) at a size that fits here, then the
sweep comparison and, per run, what the archiver and the page cache did.

    .venv/bin/python bench/archive_sweep.py --results-dir /var/tmp/walarch \
        --warehouses 2,4,8 --time-scale 0.005 --duration 60 --warmup 10

``--time-scale`` shortens keying and think times (0.005: 200 times faster than the
specification) so that a small warehouse count writes WAL at a rate worth archiving.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wal-archiving.toml"


def campaign_text(args: argparse.Namespace) -> str:
    text = EXAMPLE.read_text()
    for old, new in (('warehouses = "10,20,30"', f'warehouses = "{args.warehouses}"'),
                     ("duration = 300", f"duration = {args.duration}"),
                     ("warmup = 60", f"warmup = {args.warmup}"),
                     ("keying-thinking = true",
                      f"keying-thinking = true\ntime-scale = {args.time_scale}")):
        if text.count(old) != 1:
            raise SystemExit(f"{EXAMPLE}: expected one line {old!r}")
        text = text.replace(old, new)
    return text


def run_rows(context_dir: Path) -> list[str]:
    """One line per run: method, W, archived segments, MB/s, lag, command p50, page cache."""
    lines = []
    for manifest_path in sorted(context_dir.glob("tprocc-2*/manifest.json")):
        run = manifest_path.parent
        manifest = json.loads(manifest_path.read_text())
        summary = json.loads((run / "summary.json").read_text())
        archive = (summary["iterations"][0].get("telemetry") or {}).get("archive") or {}
        cache = archive.get("cache_mib") or {}
        lines.append(
            f"{manifest['options']['target']['archive']:>8} "
            f"W={manifest['options']['workload_options']['warehouses']:<3} "
            f"archived {archive.get('archived')} failed {archive.get('failed')} "
            f"{archive.get('archived_mb_s') or 0:.2f} MB/s "
            f"(WAL {archive.get('wal_written_mb_s') or 0:.2f}) "
            f"lag end {archive.get('lag_end')} "
            f"command p50 {(archive.get('commands') or {}).get('p50_ms') or 0:.1f} ms "
            f"page cache MiB: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cache.items())))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=Path("/var/tmp/walarch"))
    parser.add_argument("--warehouses", default="2,4,8")
    parser.add_argument("--time-scale", type=float, default=0.005)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    args.results_dir.mkdir(parents=True, exist_ok=True)
    campaign = args.results_dir / "wal-archiving.toml"
    campaign.write_text(campaign_text(args))
    results = args.results_dir / "results"
    pgdyno = [sys.executable, "-m", "pgdyno"]
    out = subprocess.run([*pgdyno, "campaign", str(campaign), "--results-dir", str(results),
                          "--no-progress"], check=True, capture_output=True, text=True).stdout
    print(out)
    sweeps = [line.split(": ", 1)[1] for line in out.splitlines()
              if line.startswith("r") and ": " in line and "sweep" in line]
    top = max(int(w) for w in args.warehouses.split(","))
    subprocess.run([*pgdyno, "compare", *sweeps, "--at-warehouses", str(top), "--out",
                    str(args.results_dir / "compare")], check=True)
    print((args.results_dir / "compare" / "compare.md").read_text())
    print("\n".join(run_rows(Path(sweeps[0]).parent)))


if __name__ == "__main__":
    main()
