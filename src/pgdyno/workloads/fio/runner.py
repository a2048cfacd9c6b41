"""Running the job set on each place: fio's jobs one by one (the queue-depth sweeps stop
at their peak), ``pg_test_fsync``, the kernel's disk counters sampled while each job runs,
and the drives' SMART readings around the iteration."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from pgdyno import serde
from pgdyno.errors import RunFailed
from pgdyno.results.rundir import write_json_atomic
from pgdyno.telemetry.devices import resolve_path
from pgdyno.telemetry.smart import read_smart
from pgdyno.workloads.base import IterationProgress, RunContext
from pgdyno.workloads.checks import parse_size_option
from pgdyno.workloads.fio import fsync, jobs, places
from pgdyno.workloads.fio.jobs import FioJob, Place
from pgdyno.workloads.fio.options import FioOptions
from pgdyno.workloads.fio.results import (
    JOBS_FILE,
    KERNEL_SAMPLE_S,
    JobRecord,
    JobsFile,
    KernelSample,
    PlaceRecord,
    job_result,
)

SMART_FILE = "smart.json"


class JobRunner:
    """Runs the job set on each place, recording each job as it ends."""

    def __init__(self, ctx: RunContext, it_dir: Path, book: JobsFile,
                 progress: IterationProgress, fio: str, o: FioOptions) -> None:
        self.ctx, self.it_dir, self.book, self.progress = ctx, it_dir, book, progress
        self.fio, self.o = fio, o
        self.started = time.monotonic()

    def run_place(self, spec: tuple[str, Path | None, str | None], fsync_program: str | None,
                  fsync_note: str) -> None:
        label, directory, device = spec
        size = parse_size_option(self.o.size, "--size")
        place = (places.device_place(device, size) if device is not None
                 else places.make_place(label, directory, size))
        physical = resolve_path(directory or place.path).physical if directory else [device]
        entry = PlaceRecord(label=label, path=str(directory or place.path),
                            size_bytes=place.size_bytes, device=place.device,
                            raw_device=place.raw_device, physical=list(physical or []),
                            fsync_note=fsync_note)
        self.book.places.append(entry)
        (self.it_dir / label).mkdir(parents=True, exist_ok=True)
        try:
            if not place.raw_device:
                self._layout(place)
            for job in jobs.bandwidth_jobs(self.o.fio_jobs):
                self._run(job, place)
            for kind in jobs.SWEEP_KINDS:
                self._sweep(kind, place)
            for job in jobs.wal_jobs(self.o.fio_jobs):
                self._run(job, place)
            if fsync_program is not None and not place.raw_device:
                entry.fsync_output = self._pg_test_fsync(fsync_program, place)
        finally:
            places.remove_place(place)

    def _layout(self, place: Place) -> None:
        out = self.it_dir / place.label / "layout.json"
        cmd = jobs.layout_command(self.fio, place, engine=self.o.ioengine, output=str(out))
        self.ctx.commands.append(" ".join(cmd))
        self.progress(self._elapsed(), f"{place.label}: writing the test file")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RunFailed(f"fio could not write its test file {place.path}: "
                            f"{last_line(proc.stderr)}")

    def _sweep(self, kind: str, place: Place) -> None:
        depths = jobs.sweep_depths(self.o.max_depth)
        iops: list[float] = []
        for depth in depths:
            result = self._run(jobs.sweep_job(kind, depth), place)
            iops.append(result)
            if jobs.sweep_done(iops, depths):
                return

    def _run(self, job: FioJob, place: Place) -> float:
        """Run one job; returns its IOPS (read + write), as the sweep's stopping rule needs."""
        output = f"{place.label}/{job.name}.json"
        cmd = jobs.job_command(self.fio, job, place, engine=self.o.ioengine,
                               runtime_s=self.o.runtime, ramp_s=self.o.ramp,
                               output=str(self.it_dir / output))
        self.ctx.commands.append(" ".join(cmd))
        record = JobRecord(place=place.label, name=job.name, kind=job.kind, block=job.block,
                           iodepth=job.iodepth, numjobs=job.numjobs, output=output,
                           command=cmd, started=time.time(), device=place.device)
        self.book.jobs.append(record)
        self.progress(self._elapsed(), f"{place.label}: {job.name}")
        sampler = KernelSampler(place.device, record.kernel)
        sampler.start()
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, check=False,
                timeout=self.o.runtime + self.o.ramp + jobs.FIO_TIMEOUT_MARGIN_S)
        except subprocess.TimeoutExpired:
            record.error = "fio did not finish (killed after its runtime + 2 minutes)"
            raise RunFailed(f"fio job {job.name} on {place.label}: {record.error}") from None
        finally:
            sampler.stop()
            record.ended = time.time()
            write_json_atomic(self.it_dir / JOBS_FILE, serde.to_dict(self.book))
        record.returncode = proc.returncode
        (self.it_dir / f"{output}.stderr").write_text(proc.stderr)
        if proc.returncode != 0:
            record.error = last_line(proc.stderr) or f"exit code {proc.returncode}"
            raise RunFailed(f"fio job {job.name} on {place.label} failed: {record.error}")
        result = job_result(self.it_dir, record)
        if result.error:
            raise RunFailed(f"fio job {job.name} on {place.label}: {result.error}")
        return result.iops

    def _pg_test_fsync(self, program: str, place: Place) -> str:
        output = f"{place.label}/pg_test_fsync.txt"
        test_file = str(Path(place.path).parent / "pg_test_fsync.out")
        cmd = fsync.fsync_command(program, test_file, self.o.runtime)
        self.ctx.commands.append(" ".join(cmd))
        self.progress(self._elapsed(), f"{place.label}: pg_test_fsync")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=16 * fsync.MAX_SECONDS_PER_TEST + 120)
        (self.it_dir / output).write_text(proc.stdout)
        if proc.returncode != 0:
            raise RunFailed(f"pg_test_fsync on {place.label} failed: {last_line(proc.stderr)}")
        return output

    def _elapsed(self) -> float:
        return time.monotonic() - self.started


class KernelSampler:
    """The device's /proc/diskstats line every KERNEL_SAMPLE_S while a job runs."""

    def __init__(self, device: str | None, into: list[KernelSample]) -> None:
        self.device, self.into = device, into
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pgdyno-fio-diskstats",
                                        daemon=True)

    def start(self) -> None:
        if self.device is not None:
            self._thread.start()

    def stop(self) -> None:
        if self.device is not None:
            self._stop.set()
            self._thread.join(5)

    def _loop(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(KERNEL_SAMPLE_S):
                self._sample()  # the last one after fio ended: the window is covered
                return

    def _sample(self) -> None:
        try:
            text = Path("/proc/diskstats").read_text()
        except OSError:
            return
        for line in text.splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == self.device:
                self.into.append(KernelSample(time.time(), line))
                return


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# ----- SMART around the iteration ---------------------------------------------------------

def smart_reading(devices: list[str]) -> dict:
    return {"t": time.time(), "readings": [read_smart(d).to_dict() for d in devices]}


def save_smart(it_dir: Path, before: dict, after: dict) -> None:
    write_json_atomic(it_dir / SMART_FILE, {"before": before, "after": after})


def load_smart(it_dir: Path) -> dict:
    try:
        return json.loads((it_dir / SMART_FILE).read_text())
    except (OSError, ValueError):
        return {}
