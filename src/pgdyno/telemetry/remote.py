"""The database host's telemetry read over SSH (``--ssh user@host``).

The same files as a local run, read on the other machine:

- /proc/stat, /proc/diskstats and /proc/meminfo by ONE long-lived remote shell that prints
  the three files, framed by markers, each time pgdyno writes a line to its stdin. The
  local sampler's clock paces it (no drift between two clocks, no process per sample on
  either side beyond the remote ``cat``); each frame becomes a ``HostTick`` written to the
  usual ``host_raw.jsonl``, so every analysis reads it unchanged.
- which devices hold the data and WAL directories, and what those devices are: the host's
  ``python3`` (Ansible's requirement too) runs pgdyno's own :mod:`pgdyno.telemetry.devices`
  source, sent on stdin, and answers in JSON;
- the host's platform facts (CPU clock and governor, NUMA nodes, the directories' mounts,
  NVMe links) the same way, from :mod:`pgdyno.telemetry.platform_facts`;
- SMART through the host's nvme-cli or smartctl, parsed by :mod:`pgdyno.telemetry.smart`;
- the server log's checkpoint lines, when the server names its log (``pg_current_logfile``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from pgdyno import serde
from pgdyno.analysis import procfs
from pgdyno.analysis.hosttick import HostTick
from pgdyno.analysis.telemetry.meta import RemoteFacts, RemoteMeta
from pgdyno.targets.ssh import SshTransport
from pgdyno.telemetry import devices, platform_facts, smart
from pgdyno.telemetry.devices import DeviceResolution
from pgdyno.telemetry.platform_facts import PlatformFacts

FRAME_TIMEOUT_S = 5.0
"""A frame not complete by then counts as a lost connection (a gap), not a slow tick."""

PROC_LOOP = (
    "while read -r _; do echo @@stat; cat /proc/stat; echo @@diskstats; cat /proc/diskstats;"
    " echo @@meminfo; cat /proc/meminfo; echo @@end; done"
)


class StreamLost(OSError):
    """The remote /proc stream ended or stalled: the sampler records a gap."""


class ProcStream:
    """The remote shell that answers each request line with one framed /proc sample."""

    def __init__(self, transport: SshTransport) -> None:
        self.transport = transport
        self.proc: subprocess.Popen | None = None
        self._buf = b""

    def start(self) -> None:
        self.close()
        self.proc = self.transport.popen(PROC_LOOP)
        self._buf = b""

    def read_tick(self) -> HostTick:
        if self.proc is None or self.proc.poll() is not None:
            raise StreamLost("the ssh /proc stream is not running")
        t, mono = time.time(), time.monotonic()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise StreamLost(f"the ssh /proc stream closed: {exc}") from exc
        frame = self._read_frame(mono + FRAME_TIMEOUT_S)
        parts = parse_frame(frame)
        return HostTick(t, mono, procfs.keep_stat_lines(parts["stat"]), parts["diskstats"],
                        parts["meminfo"])

    def _read_frame(self, deadline: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"@@end\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamLost(f"no /proc sample from the host within {FRAME_TIMEOUT_S:g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise StreamLost("the ssh /proc stream ended: " + self._stderr_tail())
            self._buf += chunk
        frame, _, self._buf = self._buf.partition(b"@@end\n")
        return frame.decode("utf-8", errors="replace")

    def _stderr_tail(self) -> str:
        if self.proc is None or self.proc.stderr is None:
            return "connection lost"
        with_timeout = select.select([self.proc.stderr], [], [], 0.5)[0]
        text = self.proc.stderr.read1(4096).decode(errors="replace") if with_timeout else ""
        lines = [line for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else f"ssh exit {self.proc.poll()}"

    def close(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parse_frame(frame: str) -> dict[str, str]:
    """{"stat": ..., "diskstats": ..., "meminfo": ...} of one ``@@name`` framed sample."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in frame.splitlines():
        if line.startswith("@@"):
            current = parts.setdefault(line[2:].strip(), [])
        elif current is not None:
            current.append(line)
    missing = {"stat", "diskstats", "meminfo"} - parts.keys()
    if missing:
        raise StreamLost(f"incomplete /proc sample from the host (no {', '.join(sorted(missing))})")
    return {name: "\n".join(lines) + "\n" for name, lines in parts.items()}


# ----- one-off facts ---------------------------------------------------------------------

def host_facts(transport: SshTransport) -> RemoteFacts:
    out = transport.check_output("id -un; uname -n; uname -r; uname -m; "
                                 "getconf _NPROCESSORS_ONLN").splitlines()
    out += [""] * (5 - len(out))
    cpus = int(out[4]) if out[4].strip().isdigit() else 0
    return RemoteFacts(transport.destination, out[0].strip(), out[1].strip(), out[2].strip(),
                       out[3].strip(), cpus)


_RESOLVE_MAIN = """
import json as _json, dataclasses as _dc, sys as _sys
_paths = _json.loads(_sys.argv[1])
print(_json.dumps({role: {"resolution": _dc.asdict(resolve_path(p)),
                          "identity": [_dc.asdict(device_identity(n))
                                       for n in resolve_path(p).chain]}
                   for role, p in _paths.items()}))
"""


def resolve_directories(transport: SshTransport, paths: dict[str, str]
                        ) -> dict[str, tuple[DeviceResolution, list[dict]]]:
    """role -> (its device chain, each device's identity), resolved ON the host by the
    same code as a local run (the devices module's source runs in the host's python3)."""
    if not paths:
        return {}
    source = Path(devices.__file__).read_text() + _RESOLVE_MAIN
    script = "exec python3 - " + _sh_quote(json.dumps(paths))
    data = json.loads(transport.check_output(script, input_text=source))
    return {role: (DeviceResolution(**entry["resolution"]), entry["identity"])
            for role, entry in data.items()}


_PLATFORM_MAIN = """
import json as _json, dataclasses as _dc, sys as _sys
print(_json.dumps(_dc.asdict(collect_platform(_json.loads(_sys.argv[1])))))
"""


def platform_of(transport: SshTransport, paths: dict[str, str]) -> PlatformFacts | None:
    """The host's platform facts with the mounts of ``paths`` (role -> directory there),
    read ON the host by the same code as a local run; None when it cannot be asked (no
    python3 there, a lost connection): the report then says "not recorded", never a guess."""
    source = Path(platform_facts.__file__).read_text() + _PLATFORM_MAIN
    try:
        out = transport.check_output("exec python3 - " + _sh_quote(json.dumps(paths)),
                                     input_text=source)
        return serde.from_dict(PlatformFacts, json.loads(out))
    except Exception:  # noqa: BLE001 - whatever failed there, the run goes on without them
        return None


def read_smart(transport: SshTransport, device: str) -> smart.SmartReading:
    """SMART of one of the host's devices through its nvme-cli or smartctl; never raises."""
    if devices.is_virtual(device):
        return smart.SmartReading(device, False,
                                  f"{device} is a virtual device: it has no SMART log")
    use_nvme = device.startswith("nvme")
    script = (f"command -v nvme >/dev/null && exec nvme smart-log /dev/{device} -o json"
              if use_nvme else f"command -v smartctl >/dev/null && "
              f"exec smartctl -j -a /dev/{device}")
    try:
        proc = transport.run(script, timeout_s=smart.TOOL_TIMEOUT_S + 5)
        if not proc.stdout.strip():
            tool = "nvme-cli" if use_nvme else "smartmontools"
            return smart.SmartReading(device, False, f"{tool} not installed on the host")
        data = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return smart.SmartReading(device, False, f"SMART read over ssh failed: {exc}")
    return (smart.parse_nvme_smart_log(device, data) if use_nvme
            else smart.parse_smartctl(device, data))


def log_size(transport: SshTransport, path: str) -> int:
    text = transport.check_output(f"wc -c < {_sh_quote(path)}").strip()
    return int(text) if text.isdigit() else 0


def checkpoint_lines(transport: SshTransport, path: str, offset: int) -> list[str]:
    """The log's checkpoint lines after ``offset``, filtered on the host (a statement log
    can be gigabytes; only these lines cross the network)."""
    proc = transport.run(f"tail -c +{int(offset) + 1} {_sh_quote(path)} | "
                         "grep -E 'checkpoint|restartpoint' || true", timeout_s=60)
    return [line for line in proc.stdout.splitlines() if line]


def _sh_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# ----- the run's view of the host ---------------------------------------------------------

class RemoteHost:
    """The database host of one run: its facts and directories resolved once, a /proc
    stream per iteration (restarted after a lost connection), SMART and the server log."""

    def __init__(self, transport: SshTransport) -> None:
        self.transport = transport
        self.facts: RemoteFacts | None = None
        self.directories: dict[str, str] = {}
        self.log_path: str | None = None
        self._resolved: dict[str, tuple[DeviceResolution, list[dict]]] | None = None
        self.stream = ProcStream(transport)

    @property
    def destination(self) -> str:
        return self.transport.destination

    def describe_server(self, conninfo: str) -> None:
        """The server's data directory and log file, as the server names them (superuser or
        pg_read_all_settings; without, the roles and the log stay unknown)."""
        import psycopg

        with psycopg.connect(conninfo, autocommit=True) as db:
            data_dir = db.execute("SELECT current_setting('data_directory', true)").fetchone()[0]
            log = None
            with contextlib.suppress(psycopg.Error):  # needs pg_monitor or superuser
                log = db.execute("SELECT pg_current_logfile()").fetchone()[0]
        if data_dir:
            self.directories = {"data": data_dir, "wal": f"{data_dir}/pg_wal"}
            if log:
                self.log_path = log if log.startswith("/") else f"{data_dir}/{log}"

    def resolved(self) -> dict[str, tuple[DeviceResolution, list[dict]]]:
        if self._resolved is None:
            try:
                self._resolved = resolve_directories(self.transport, self.directories)
            except Exception as exc:  # noqa: BLE001 - no python3 on the host: say why
                self._resolved = {role: (DeviceResolution(path=p, error=f"over ssh: {exc}"), [])
                                  for role, p in self.directories.items()}
        return self._resolved

    def platform(self) -> PlatformFacts | None:
        """The host's platform facts, with the mounts of the server's directories."""
        return platform_of(self.transport, self.directories)

    def meta(self) -> RemoteMeta:
        """The host as the telemetry's meta.json records it."""
        if self.facts is None:
            self.facts = host_facts(self.transport)
        return RemoteMeta(**asdict(self.facts),
                          storage={role: ident for role, (_res, ident) in self.resolved().items()},
                          server_log=self.log_path)

    def read_tick(self) -> HostTick:
        """One sample; a dead stream is restarted first (a new master if the old one died),
        so a connection that comes back ends the gap by itself."""
        proc = self.stream.proc
        if proc is not None and proc.poll() is not None:
            # Died since the last tick: that is a lost connection, recorded as such (the
            # tick is missing); the next tick reconnects.
            self.stream.close()
            raise StreamLost(f"the ssh connection to {self.destination} was lost "
                             f"(ssh exit {proc.returncode})")
        if proc is None:
            self.stream.start()
        try:
            return self.stream.read_tick()
        except StreamLost:
            self.stream.close()
            raise

    def log_offset(self) -> int:
        return log_size(self.transport, self.log_path) if self.log_path else 0

    def close(self) -> None:
        self.stream.close()
