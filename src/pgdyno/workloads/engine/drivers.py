"""One pgbench iteration run by several driver hosts (``--drivers``) against one server.

Each driver runs pgbench with its share of the clients, the same scripts (copied to it,
``:client_id`` counted across the drivers: ``targets.drivers.driver_script``) and the same
options, in a shell at the end of an SSH connection of its own. The shells start
together: each reads the connection's environment (the password among it: into pgbench's
environment only, never a file or a command line) and waits for the word ``go``, which is
sent to every driver at once; each then notes its launch epoch and starts pgbench, whose
logs and output stay on the driver until the iteration ends. A sampler beside pgbench
writes the driver's load once a second (``telemetry.jsonl``) and sends pgbench's ``-P 1``
lines back through the connection as they come; they are appended to the iteration's
``drivers_progress.jsonl`` here, which the live view sums second by second.

A watcher in each shell stops pgbench when its stdin ends or says ``stop``: when pgdyno
ends the iteration, dies, or loses the connection, pgbench on that driver stops too. When
one driver fails (pgbench exits non-zero) or is lost (its connection ends before pgbench's
exit code), every other driver is told to stop, what each left is fetched, and the
iteration fails with its partial data kept.

After the iteration each driver's logs are binned into its own per-second files, counted
from its own launch: on the driver by ``pgdyno driver-bin`` where pgdyno of this version is
there (only the binned files come back, the logs too when ``--tx-logs`` keeps them), else
here after its whole directory is fetched. Either way the driver's directory comes as a tar
through the connection into ``drivers/<name>/`` of the iteration and is removed from the
driver; ``drivers.json`` says who ran what, where it was binned and how it ended.
``analysis.merge`` makes one result of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgdyno import __version__
from pgdyno.analysis.merge import (
    DRIVERS_SCHEMA_VERSION,
    PROGRESS_NAME,
    DriverRecord,
    DriversFile,
    write_drivers_file,
)
from pgdyno.analysis.per_second import LogLayout, SecondBinner, SecondsWriter
from pgdyno.analysis.pgbench_log import PROGRESS_LINE, iter_rows
from pgdyno.errors import RunFailed
from pgdyno.results.rundir import IterationRecord
from pgdyno.targets.drivers import CLIENT_OFFSET, DriverConnection, DriverPool
from pgdyno.workloads.base import IterationProgress, RunContext, Step

STOP_GRACE_S = 3
"""After ``stop``: SIGTERM to pgbench (a background job of a non-interactive shell ignores
SIGINT), SIGKILL this long after if it still runs."""
END_MARGIN_S = 120.0
"""How long past its -T a driver may take to end (connecting, a \\sleep under way) before
it counts as lost."""
FETCH_TIMEOUT_S = 600.0
READY_TIMEOUT_S = 30.0
"""Connecting to every driver before the common start; one not ready by then is started
with the others and, if its connection failed, found lost."""
ENV_KEYS = ("PGPASSWORD", "PGOPTIONS", "PGSSLMODE")
"""The connection's environment a driver's pgbench needs (nothing else of this machine's)."""

SAMPLER = r"""
import json, os, sys, time
pid, out, err = sys.argv[1], open(sys.argv[2], "a", buffering=1), sys.argv[3]
# pgbench's -P lines (its stderr) sent on through the connection as they come, each once.
seen = 0
def progress():
    global seen
    try:
        with open(err, "rb") as f:
            f.seek(seen)
            data = f.read()
    except OSError:
        return
    cut = data.rfind(b"\n") + 1
    seen += cut
    for line in data[:cut].decode(errors="replace").splitlines():
        if line.startswith("progress: "):
            try:
                sys.stdout.write("progress " + line + "\n")
                sys.stdout.flush()
            except OSError:  # the connection gone: the load is still sampled
                pass
hz = os.sysconf("SC_CLK_TCK"); ncpu = os.cpu_count() or 1
# The tightest CPU quota on pgbench's cgroup path (v2 cpu.max or v1 cfs quota): (cores,
# its cpu.stat, the throttled-time key, its unit in microseconds).
def limit():
    best = None
    try:
        lines = open(f"/proc/{pid}/cgroup").read().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, ctrls, path = (line.split(":", 2) + ["", ""])[:3]
        parts = [x for x in path.split("/") if x]
        for i in range(len(parts), -1, -1):
            rel = "/".join(parts[:i])
            try:
                if hid == "0" and ctrls == "":
                    d = ("/sys/fs/cgroup/" + rel).rstrip("/")
                    q, per = open(d + "/cpu.max").read().split()
                    if q == "max":
                        continue
                    found = (int(q) / int(per), d + "/cpu.stat", "throttled_usec", 1)
                elif "cpu" in ctrls.split(","):
                    d = ("/sys/fs/cgroup/cpu/" + rel).rstrip("/")
                    q = int(open(d + "/cpu.cfs_quota_us").read())
                    if q <= 0:
                        continue
                    per = int(open(d + "/cpu.cfs_period_us").read())
                    found = (q / per, d + "/cpu.stat", "throttled_time", 1000)
                else:
                    continue
            except (OSError, ValueError):
                continue
            if best is None or found[0] < best[0]:
                best = found
    return best
def throttled(lim):
    try:
        for line in open(lim[1]):
            k, v = line.split()
            if k == lim[2]:
                return int(v) // lim[3]
    except (OSError, ValueError):
        return None
lim = limit()
while True:
    try:
        st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        break
    progress()
    stat = open("/proc/stat").read().split("\n")
    cpu = [int(x) for x in stat[0].split()[1:9]]
    running = next(int(l.split()[1]) for l in stat if l.startswith("procs_running"))
    rx = tx = 0
    for l in open("/proc/net/dev").read().split("\n")[2:]:
        if ":" in l and l.split(":", 1)[0].strip() != "lo":  # the wire's bytes, not loopback
            f = l.split(":", 1)[1].split()
            rx += int(f[0]); tx += int(f[8])
    print(json.dumps({"t": time.time(), "cpu": cpu, "running": running, "net": [rx, tx],
                      "proc": int(st[11]) + int(st[12]), "hz": hz, "ncpu": ncpu,
                      "quota": lim[0] if lim else None,
                      "throttled_us": throttled(lim) if lim else None}), file=out)
    time.sleep(1)
progress()
"""

SHELL = """\
cd {dir} || exit 90
while IFS= read -r line; do [ -z "$line" ] && break; export "$line"; done
echo ready
IFS= read -r go; [ "$go" = go ] || exit 91
exec 3<&0
launched=$(date +%s.%N)
{command} 3<&- >stdout.txt 2>stderr.txt &
pid=$!
echo "launched $launched $pid"
if command -v python3 >/dev/null 2>&1; then
  python3 -c {sampler} "$pid" telemetry.jsonl stderr.txt 3<&- 2>/dev/null &
fi
( while IFS= read -r line; do [ "$line" = stop ] && break; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null; i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt {grace} ]; do sleep 1; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null
  fi ) <&3 &
watcher=$!
wait "$pid"; code=$?
echo "exit $code"
wait "$watcher"
"""
"""The shell on a driver (see the module's doc). ``exec 3<&0`` keeps the connection's
stdin for the watcher: a background job's own stdin is /dev/null."""


class _ProgressLog:
    """The drivers' ``-P 1`` lines, appended to ``drivers_progress.jsonl`` as they come (from
    every driver's reader thread), and the newest second every driver has reported."""

    def __init__(self, path: Path, drivers: int) -> None:
        self.path = path
        self.drivers = drivers
        self.lock = threading.Lock()
        self.seconds: dict[int, dict[str, float]] = {}
        self.latest: tuple[int, float] | None = None
        """(second label, TPS summed over every driver)."""

    def add(self, driver: str, line: str) -> None:
        match = PROGRESS_LINE.match(line)
        if match is None:
            return
        t, tps = float(match["t"]), float(match["tps"])
        entry = {"driver": driver, "of": self.drivers, "t": t, "tps": tps,
                 "lat_ms": float(match["lat"])}
        with self.lock:
            with self.path.open("a") as fh:
                fh.write(json.dumps(entry) + "\n")
            second = self.seconds.setdefault(round(t), {})
            second[driver] = tps
            if len(second) == self.drivers:
                self.latest = (round(t), sum(second.values()))
                for older in [k for k in self.seconds if k <= round(t)]:
                    del self.seconds[older]

    def words(self) -> str:
        """The bar's figure: the newest second every driver reported, summed."""
        if self.latest is None:
            return ""
        return f", {self.latest[1]:,.0f} tps at {self.latest[0]} s"


@dataclasses.dataclass
class _Session:
    """One driver's shell, seen from here."""

    conn: DriverConnection
    record: DriverRecord
    remote_dir: str
    command: str
    """pgbench's command line on the driver, quoted for its shell."""
    progress: _ProgressLog
    proc: subprocess.Popen | None = None
    launched: float | None = None
    exit_code: int | None = None
    ready: threading.Event = dataclasses.field(default_factory=threading.Event)
    ended: threading.Event = dataclasses.field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def send(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            assert self.proc is not None and self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()

    def read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "ready":
                self.ready.set()
            elif word == "launched":
                self.launched = float(rest.split()[0])
            elif word == "progress":
                self.progress.add(self.record.name, rest)
            elif word == "exit":
                self.exit_code = int(rest)
                break
        self.ended.set()
        self.ready.set()  # an ended shell is waited for no longer

    def close(self) -> None:
        """Stdin closed (the watcher ends), the connection waited for."""
        if self.proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=STOP_GRACE_S + 15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.reader is not None:
            self.reader.join(5)


@dataclasses.dataclass(frozen=True)
class EngineParts:
    """What the pgbench engine lends an iteration on the drivers."""

    engine_dir: str
    command: Callable[..., list[str]]
    """``pgbench_command``."""
    window: Callable[[Path], Any]
    """The window's database snapshots, writing to the given file (``WindowSnapshots``)."""
    compress: Callable[[Path, Path, list[str]], None]
    """``compress_logs``."""
    collect: Callable[[Path], None]
    """What the iteration left in the server log, copied under the iteration's directory
    (TPROC-C's response times)."""
    session_options: str | None = None


def run_on_drivers(parts: EngineParts, ctx: RunContext, step: Step,
                   record: IterationRecord, progress: IterationProgress) -> None:
    """The iteration on every driver; its files fetched and binned, ``drivers.json``
    written, whatever happens. A failed or lost driver fails the iteration."""
    pool: DriverPool = ctx.drivers
    opts = ctx.opts
    assert ctx.target is not None and ctx.conn is not None and ctx.prepared is not None
    it_dir = step.directory(ctx.run_dir.raw, parts.engine_dir)
    it_dir.mkdir(parents=True, exist_ok=True)
    env = ctx.conn.client_env()
    if pgoptions := parts.session_options:
        env["PGOPTIONS"] = " ".join(filter(None, [env.get("PGOPTIONS"), pgoptions]))
    sessions = []
    live = _ProgressLog(it_dir / PROGRESS_NAME, len(pool.connections))
    for conn, clients, offset in zip(pool.connections, pool.shares(step.clients),
                                     pool.offsets(step.clients), strict=True):
        threads = min(opts.threads or conn.cores, clients)
        remote_dir = f"{conn.scratch}/{it_dir.name}"
        scripts = [dataclasses.replace(s, path=Path(pool.script_on(conn, s.path)))
                   if s.path is not None else s for s in ctx.prepared.scripts]
        cmd = parts.command(ctx.target.install, ctx.conn, opts, scripts, clients,
                              Path("tx"))
        cmd[0] = conn.pgbench
        cmd[cmd.index("-j") + 1] = str(threads)
        cmd[1:1] = ["-D", f"{CLIENT_OFFSET}={offset}"]
        if opts.rate_tps is not None:  # the rate shared as the clients are
            cmd[cmd.index("-R") + 1] = f"{opts.rate_tps * clients / step.clients:g}"
        sessions.append(_Session(conn, DriverRecord(
            name=conn.host.name, destination=conn.host.destination, clients=clients,
            threads=threads, directory=f"drivers/{conn.host.name}"), remote_dir,
            " ".join(shlex.quote(c) for c in cmd), live))
        ctx.commands.append(f"[driver {conn.host.name}] " + " ".join(cmd))
    record.threads = sum(s.record.threads for s in sessions)
    record.command = [f"[driver {s.record.name}] {s.command}" for s in sessions]
    record.stdout_file = str((it_dir / "stdout.txt").relative_to(ctx.run_dir.path))
    record.stderr_file = str((it_dir / "stderr.txt").relative_to(ctx.run_dir.path))
    window = parts.window(it_dir / "window.json")
    check_reachable(pool, ctx.conn.host, ctx.conn.port)
    failure, interrupted = "", False
    try:
        _start(sessions, env)
        window.start()
        failure = _watch(sessions, opts.warmup_s, opts.duration_s, progress, live)
    except KeyboardInterrupt:
        # Ctrl-C reached the drivers' ssh clients too (this process group): their shells
        # saw their stdin end and stopped pgbench; each driver's files are still fetched,
        # through its master connection, which ssh -f detached from the terminal.
        interrupted = True
        raise
    finally:
        with contextlib.suppress(Exception):
            window.finish()
        with contextlib.suppress(Exception):  # evidence, never the result
            parts.collect(it_dir)
        for s in sessions:
            s.send("stop")
        for s in sessions:
            s.close()
        _collect(sessions, it_dir, ctx, record, failure, parts.compress, interrupted)
    if failure:
        raise RunFailed(f"driver {failure} at {step.clients} clients, iteration "
                        f"{step.iteration}; every other driver was stopped, the partial "
                        f"data kept in {it_dir}")


def check_reachable(pool: DriverPool, host: str, port: int) -> None:
    """Every driver reaches the server (``pg_isready`` there, no login), once a run: a
    server listening where a driver cannot reach it is said in one line, not as pgbench's
    connection error from the middle of an iteration."""
    for conn in pool.connections:
        if conn.host.name in pool.reached:
            continue
        isready = conn.pgbench.rsplit("/", 1)[0] + "/pg_isready"
        proc = conn.transport.run(f"{shlex.quote(isready)} -h {shlex.quote(host)} -p {port} "
                                  "-t 10", timeout_s=30)
        if proc.returncode != 0:
            said = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no answer"]
            raise RunFailed(f"driver {conn.host.name} cannot reach the server at {host}:"
                            f"{port} ({said[0]}); the server must listen on an address "
                            "every driver reaches over TCP")
        pool.reached.add(conn.host.name)


def _start(sessions: list[_Session], env: dict[str, str]) -> None:
    """Every driver's shell connected and waiting (``ready``), then ``go`` to all of them
    at once: their launches differ by the time a line takes to reach each."""
    lines = "".join(f"{k}={env[k]}\n" for k in ENV_KEYS if env.get(k))
    for s in sessions:
        shell = SHELL.format(dir=shlex.quote(s.remote_dir), command=s.command,
                             sampler=shlex.quote(SAMPLER), grace=STOP_GRACE_S)
        setup = f"mkdir -p {shlex.quote(s.remote_dir)} && exec sh -c {shlex.quote(shell)}"
        s.proc = s.conn.transport.own_connection(setup)
        s.send(lines)  # ends with the empty line that ends the environment
        s.reader = threading.Thread(target=s.read, daemon=True)
        s.reader.start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    for s in sessions:
        s.ready.wait(max(0.0, deadline - time.monotonic()))
    for s in sessions:
        s.send("go")


def _watch(sessions: list[_Session], warmup_s: int, duration_s: int,
           progress: IterationProgress, live: _ProgressLog) -> str:
    """Until every driver ended; the first that failed or was lost (its name and why), or
    ''. A failure stops the others at once."""
    seconds = warmup_s + duration_s
    started = time.monotonic()
    deadline = started + seconds + END_MARGIN_S
    while not all(s.ended.is_set() for s in sessions):
        time.sleep(0.2)
        elapsed = time.monotonic() - started
        phase = "warm-up" if elapsed <= warmup_s else "measuring"
        running = sum(not s.ended.is_set() for s in sessions)
        progress(min(elapsed, seconds),
                 f"{phase} on {running} of {len(sessions)} drivers{live.words()}")
        bad = next((s for s in sessions if s.ended.is_set() and s.exit_code != 0), None)
        if bad is None and time.monotonic() > deadline:
            bad = next(s for s in sessions if not s.ended.is_set())
            bad.record.note = "no exit within the iteration's time"
        if bad is not None:
            return _fail(bad, sessions)
    return ""


def _fail(bad: _Session, sessions: list[_Session]) -> str:
    bad.record.status = "failed" if bad.exit_code is not None else "lost"
    for s in sessions:
        if s is not bad:
            s.send("stop")
    why = (f"pgbench exited with code {bad.exit_code}" if bad.exit_code is not None
           else "lost (its connection ended before pgbench did)")
    for s in sessions:
        s.ended.wait(STOP_GRACE_S + 10)
        if s is not bad and s.record.status == "ok":
            s.record.status = "stopped"
    return f"{bad.record.name} {why}"


def _collect(sessions: list[_Session], it_dir: Path, ctx: RunContext,
             record: IterationRecord, failure: str,
             compress: Callable[[Path, Path, list[str]], None], interrupted: bool) -> None:
    """Each driver's logs binned (on the driver where pgdyno is there, else here after
    fetching them whole), its files fetched, its outcome in ``drivers.json``; the
    iteration's stdout/stderr hold every driver's, each under its name. After a Ctrl-C
    every driver was stopped, none failed."""
    opts = ctx.opts
    layout = LogLayout(has_lag=opts.has_lag_column, has_retries=opts.has_retries_column)
    for s in sessions:
        rec = s.record
        rec.origin_epoch, rec.returncode = s.launched, s.exit_code
        if rec.status == "ok" and interrupted:
            rec.status, rec.note = "stopped", "stopped by Ctrl-C"
        elif rec.status == "ok" and s.exit_code != 0:
            rec.status = "lost" if s.exit_code is None else "failed"
    counts: dict[str, int] = {}
    for s in sessions:  # only the counts come back; the logs stay there for now
        if s.conn.pgdyno and s.record.origin_epoch is not None:
            count = _bin_there(s, layout, opts.latency_limit_ms)
            if count is not None:
                counts[s.record.name], s.record.binned_on = count, "driver"
    fetched = {s.record.name: _fetch_driver(s, it_dir, logs=True) for s in sessions
               if s.record.binned_on != "driver"}
    for s in sessions:
        if fetched.get(s.record.name) and s.record.origin_epoch is not None:
            counts[s.record.name] = bin_driver_logs(
                it_dir / s.record.directory, s.record.origin_epoch, layout,
                opts.latency_limit_ms)
    record.transactions_logged = sum(counts.values()) if counts else None
    keep = opts.tx_log_cap is None or (record.transactions_logged or 0) <= opts.tx_log_cap
    for s in sessions:  # every driver's logs kept, or none: --tx-logs counts them all
        if s.record.binned_on == "driver":
            fetched[s.record.name] = _fetch_driver(s, it_dir, logs=keep)
    out, err = [], []
    for s in sessions:
        local = it_dir / s.record.directory
        if fetched[s.record.name]:
            out.append(f"# driver {s.record.name}\n" + _text(local / "stdout.txt"))
            err.append(f"# driver {s.record.name}\n" + _text(local / "stderr.txt"))
        record.latency_files.extend(
            str(p.relative_to(ctx.run_dir.path)) for p in sorted(local.glob("seconds.csv")))
        _keep_logs(local, ctx.run_dir.path, record, opts.tx_log_cap, compress)
    launched = [s.launched for s in sessions if s.launched is not None]
    record.origin_epoch = min(launched) if launched else None
    (it_dir / "stdout.txt").write_text("".join(out))
    (it_dir / "stderr.txt").write_text("".join(err))
    codes = [s.exit_code for s in sessions]
    record.returncode = 0 if not failure else next((c for c in codes if c), 1)
    if failure:
        record.note = "; ".join(filter(None, [record.note, f"driver {failure}"]))
    write_drivers_file(it_dir, DriversFile(DRIVERS_SCHEMA_VERSION, [s.record for s in sessions],
                                           first_failure=failure.split(" ", 1)[0]))


def _bin_there(s: _Session, layout: LogLayout, latency_limit_ms: float | None) -> int | None:
    """pgdyno on the driver bins its logs into its own per-second files (``pgdyno
    driver-bin``); their transaction count, or None (noted) when it could not."""
    args = [s.conn.pgdyno, "driver-bin", s.remote_dir, "--origin", repr(s.record.origin_epoch),
            "--expect-version", __version__]
    args += ["--lag"] if layout.has_lag else []
    args += ["--retries"] if layout.has_retries else []
    if latency_limit_ms is not None:
        args += ["--latency-limit", repr(latency_limit_ms)]
    try:
        proc = s.conn.transport.run(" ".join(shlex.quote(a) for a in args),
                                    timeout_s=FETCH_TIMEOUT_S)
        if proc.returncode == 0:
            return int(proc.stdout.split()[-1])
        said = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        said = str(exc)
    s.record.note = f"pgdyno on the driver could not bin its logs ({said}); fetched whole"
    return None


def _fetch_driver(s: _Session, it_dir: Path, logs: bool) -> bool:
    """The driver's iteration directory fetched (its per-transaction logs only when
    ``logs``) and removed there; False (noted) when it could not be."""
    local = it_dir / s.record.directory
    local.mkdir(parents=True, exist_ok=True)
    try:
        _fetch(s.conn, s.remote_dir, local, logs)
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        s.record.note = f"its files could not be fetched: {exc}"
        return False
    return True


def _fetch(conn: DriverConnection, remote_dir: str, local: Path, logs: bool = True) -> None:
    """The driver's iteration directory, as a tar through the connection."""
    exclude = "" if logs else "--exclude='./tx.*' "
    proc = subprocess.Popen(conn.transport.remote_command(
        f"cd {shlex.quote(remote_dir)} && tar -cf - {exclude}. && cd / && rm -rf "
        f"{shlex.quote(remote_dir)}"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            tar.extractall(local, filter="data")  # no absolute paths, no links out
    finally:
        proc.stdout.close()
        proc.wait(FETCH_TIMEOUT_S)
    if proc.returncode != 0:
        raise OSError(f"tar on the driver exited with {proc.returncode}")


def bin_driver_logs(directory: Path, origin: float, layout: LogLayout,
                    latency_limit_ms: float | None) -> int:
    """A driver's logs into its own ``seconds.csv`` and ``latency.hlog``; its transactions.
    Run here on fetched logs, or on the driver by ``pgdyno driver-bin``."""
    binner = SecondBinner(origin, layout, latency_limit_ms)
    count = 0
    for path in sorted(directory.glob("tx.*")):
        for rows in iter_rows(path, layout.columns):
            binner.add(rows)
            count += len(rows)
    writer = SecondsWriter(directory, origin)
    try:
        writer.write(binner.flush())
    finally:
        writer.close()
    return count


def _keep_logs(directory: Path, root: Path, record: IterationRecord, cap: int | None,
               compress: Callable[[Path, Path, list[str]], None]) -> None:
    """A driver's per-transaction logs, gzipped, when the iteration's count is within
    --tx-logs; else removed (its per-second files stay)."""
    if cap is not None and (record.transactions_logged or 0) > cap:
        for path in directory.glob("tx.*"):
            path.unlink()
        return
    compress(directory, root, record.log_files)


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""
