"""The log tail against files written the way pgbench writes them: what it counts equals
what was written, and past the cap the disk holds only what it has not read yet."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from pgdyno.analysis import hdr
from pgdyno.analysis.per_second import LogLayout, read_seconds
from pgdyno.workloads.engine import txtail
from pgdyno.workloads.engine.txtail import LogTail, punch_hole

ORIGIN = 1_795_000_000.0
RATE = 300_000  # transactions a second, over both files (more than pgbench makes here)
LINES_PER_FILE = 300_000
BLOCK = 15_000
WRITE = 4096
"""Bytes a write() appends: pgbench's log is a stdio stream, whose buffer glibc sizes to
the file's st_blksize (4096 on ext4) and writes out whole when full."""


WRITER = """
import os
import sys
import numpy as np
import time
path, source, thread, origin, rate, block, paced, nice, write = sys.argv[1:10]
if paced == "1":  # at the reader's priority: a loaded machine slows both alike
    os.nice(int(nice))
latencies = np.load(source)
thread, origin, rate, block, write = int(thread), float(origin), int(rate), int(block), int(write)
due = time.monotonic()
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
pending = b""
for lo in range(0, len(latencies), block):
    if paced == "1":  # in real time: each file gets rate / 2 lines a second
        time.sleep(max(0.0, due - time.monotonic()))
        # A writer held up by a loaded machine goes on at its rate, not in a burst.
        due = max(due, time.monotonic()) + block / (rate / 2)
    lines = []
    for i in range(lo, min(lo + block, len(latencies))):
        end = origin + (2 * i + thread) / rate
        sec = int(end)
        lat = "failed" if latencies[i] < 0 else str(int(latencies[i]))
        lines.append(f"{thread} {i} {lat} 0 {sec} {round((end - sec) * 1e6)}\\n")
    pending += "".join(lines).encode()
    whole = len(pending) // write * write
    view = memoryview(pending)
    for at in range(0, whole, write):
        assert os.write(fd, view[at:at + write]) == write
    del view
    pending = pending[whole:]
assert os.write(fd, pending) == len(pending)
os.close(fd)
"""
"""pgbench's line format, made a block at a time and appended as its stdio buffer does
(whole buffers, the rest kept for the next block and written at the end), by another
process (as pgbench is: it does not share pgdyno's interpreter)."""


def _allocated(paths: list[Path]) -> int:
    return sum(p.stat().st_blocks * 512 for p in paths if p.exists())


def _follow(tmp_path: Path, cap: int | None, paced: bool = False, rate: int = RATE,
            lines: int = LINES_PER_FILE) -> tuple[LogTail, dict, list[Sample], int]:
    rng = np.random.default_rng(3)
    lat = [rng.lognormal(6, 0.8, lines).astype(np.int64) + 1 for _ in range(2)]
    for arr in lat:
        arr[rng.random(lines) < 0.001] = -1  # "failed"
    tail = LogTail(tmp_path, "tx", ORIGIN, LogLayout(False, False), None, cap)
    tail.start()
    paths = [tmp_path / "tx.777", tmp_path / "tx.777.1"]
    writers = []
    for k, (path, arr) in enumerate(zip(paths, lat, strict=True)):
        source = tmp_path.parent / f"{tmp_path.name}-lat{k}.npy"
        np.save(source, arr)
        writers.append(subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(source),
                                         str(k), str(ORIGIN), str(rate), str(BLOCK),
                                         "1" if paced else "0", str(txtail.NICE),
                                         str(WRITE)]))
    samples = []
    while any(w.poll() is None for w in writers):
        samples.append(_sample(tail, paths))
        time.sleep(0.02)
    assert all(w.returncode == 0 for w in writers)
    written = sum(p.stat().st_size for p in paths)
    result = tail.finish()
    assert result.transactions == 2 * lines
    return tail, {"lat": np.concatenate(lat), "result": result}, samples, written


@dataclass(frozen=True)
class Sample:
    """The logs on disk at one moment, against what the reader had released before it."""

    allocated: int
    size: int
    released: int


def _sample(tail: LogTail, paths: list[Path]) -> Sample:
    # The reader's progress first: it only grows, so the disk seen after it can hold at
    # most the bytes past it.
    released = sum(f.released for f in list(tail.followed.values()))
    stats = [p.stat() for p in paths if p.exists()]
    return Sample(sum(st.st_blocks * 512 for st in stats), sum(st.st_size for st in stats),
                  released)


def test_counts_and_histograms_equal_what_was_written(tmp_path: Path) -> None:
    _tail, got, _samples, _written = _follow(tmp_path, cap=0)
    lat = got["lat"]
    rows = read_seconds(tmp_path / "seconds.csv")
    assert sum(r.ok for r in rows.values()) == int((lat >= 0).sum())
    assert sum(r.failed for r in rows.values()) == int((lat < 0).sum())
    # Transaction i of thread k ended at ORIGIN + (2i + k) / RATE: RATE a second.
    per_second = {}
    for r in rows.values():
        per_second[r.second] = per_second.get(r.second, 0) + r.ok + r.failed
    assert all(n == RATE for s, n in per_second.items() if s < max(per_second))
    good = np.sort(lat[lat >= 0])
    assert sum(r.latency_sum_us for r in rows.values()) == int(good.sum())
    intervals = list(hdr.read_intervals(tmp_path / hdr.HLOG_NAME))
    merged = hdr.merge(intervals, "script0")
    assert merged.get_total_count() == good.size
    for p in (50.0, 99.0, 99.9):
        truth = int(good[math.ceil(Fraction(str(p)) * good.size / 100) - 1])
        assert hdr.value_at_percentile(merged, p) == hdr.top_of_bucket(truth)


def test_past_the_cap_the_disk_holds_only_the_unread_part(tmp_path: Path, monkeypatch) -> None:
    # 100,000 lines a second for 2 s, as pgbench logs at 100,000 TPS: a third of the lines
    # of a 6 s run, read five times as often in a quarter of the chunk, so that a pass's
    # lines are as small a part of the whole as they are in a longer run.
    monkeypatch.setattr(txtail, "POLL_S", 0.2)
    monkeypatch.setattr(txtail, "READ_BYTES", txtail.READ_BYTES // 4)
    tail, got, samples, written = _follow(tmp_path, cap=30_000, paced=True, rate=100_000,
                                          lines=100_000)
    assert not got["result"].logs_kept
    assert not list(tmp_path.glob("tx.*")), "dropped logs are deleted at the end"
    assert written > 5 << 20
    # What the reader has released is off the disk at every moment, however far behind a
    # loaded machine leaves it (it runs niced: falling behind is allowed to cost disk
    # space for a while): beyond the bytes not yet released, the disk holds at most, in
    # each log, the page its size ends in and the blocks of a write in flight. ext4 reserves
    # a write's delayed-allocation blocks, which st_blocks counts, a folio at a time before
    # the write moves st_size past them: on Linux 6.18 a stat during a 500 KB write() saw
    # up to 256 KB allocated past the size (even of an empty file), 1 MB during a 2 MB one,
    # a page during 4 KB ones (three once, in 38,000 stats of a 100 MB file). Hence WRITE,
    # pgbench's size: the 500 KB writes this test made before put 264 KB past the bound
    # in 6 of 15 runs sampled every 0.5 ms under 3 busy loops; 4 KB writes, none of 30
    # (7,453 bytes at most: the two tail pages).
    slack = 2 * (txtail.PAGE + WRITE)
    held_past_unread = [s.allocated - (s.size - s.released) for s in samples]
    assert max(held_past_unread) <= slack, samples[held_past_unread.index(max(held_past_unread))]
    # It released while the logs grew, and all but the last partial page by the end.
    assert any(s.released for s in samples if s.size < written)
    assert sum(f.released for f in tail.followed.values()) >= written - slack
    # Read every POLL_S in chunks of at most READ_BYTES, the disk never held the logs
    # whole: at most half of them, as the niced reader, on 2 cores beside 3 busy loops,
    # fell up to 2.9 MB of 6.6 behind (a third, the bound before, failed 4 runs in 90).
    peak = max(s.allocated for s in samples)
    assert peak < written / 2, (peak, written)


def test_under_the_cap_the_logs_are_kept_whole(tmp_path: Path) -> None:
    _tail, got, _samples, written = _follow(tmp_path, cap=None)
    assert got["result"].logs_kept
    paths = sorted(tmp_path.glob("tx.*"))
    assert sum(p.stat().st_size for p in paths) == written
    assert _allocated(paths) >= written


def test_punch_hole_frees_blocks_and_keeps_the_size(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * (1 << 20))
    assert punch_hole(path, 0, 512 << 10)
    assert path.stat().st_size == 1 << 20
    assert path.stat().st_blocks * 512 <= (512 << 10) + 4096
    assert path.read_bytes()[: 512 << 10] == b"\0" * (512 << 10)


def test_latency_above_an_hour_is_clamped_and_counted() -> None:
    hist = hdr.new_histogram()
    assert hdr.record(hist, np.array([5, hdr.HIGHEST_US * 2])) == 1
    assert hist.get_total_count() == 2


def test_vectorised_recording_equals_the_librarys() -> None:
    rng = np.random.default_rng(11)
    values = np.concatenate([
        np.arange(0, 5000), rng.integers(0, hdr.HIGHEST_US, 20_000),
        rng.lognormal(8, 3, 20_000).astype(np.int64), [2047, 2048, 4095, 4096, hdr.HIGHEST_US]])
    values = np.minimum(values, hdr.HIGHEST_US)
    ours, theirs = hdr.new_histogram(), hdr.new_histogram()
    hdr.record(ours, values[:30_000])
    hdr.record(ours, values[30_000:])
    for v in values.tolist():
        theirs.record_value(v)
    assert list(ours.counts) == list(theirs.counts)
    assert (ours.get_total_count(), ours.get_min_value(), ours.get_max_value()) == (
        theirs.get_total_count(), theirs.get_min_value(), theirs.get_max_value())
    assert ours.encode() == theirs.encode()


def test_pgdyno_keeps_numpy_to_one_blas_thread() -> None:
    """OpenBLAS's worker threads spin between calls: in a run they took 0.17 cores from the
    server and pgbench. Importing pgdyno first leaves numpy one thread, whatever it does."""
    program = ("import pgdyno, os, numpy as np\n"
               "x = np.ones(1_000_000)\n"
               "np.dot(x, x)\n"
               "print(len(os.listdir('/proc/self/task')))\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         env=env, timeout=60, check=True)
    assert out.stdout.split() == ["1"], out.stdout
