"""A bottleneck verdict's evidence in words: each kind of ``analysis.verdict.Evidence``
worded from its figures, which the verdict computed and the run summary keeps."""

from __future__ import annotations

from collections.abc import Callable

from pgdyno.analysis.telemetry import WaitShare
from pgdyno.analysis.verdict import (
    ARCHIVER,
    CACHE,
    CAPACITY,
    CHECKPOINT_STORM,
    CHECKPOINT_WRITES,
    CHECKPOINTS,
    CLIENT,
    CLIENT_HOST,
    CPU,
    CPU_USE,
    DATA_READS,
    DEVICE,
    DRIVER_HOST,
    FPI_CREDITED,
    FULL_PAGE_IMAGES,
    IO_SHARE,
    IO_WORKERS,
    LOCK,
    NO_CAPACITY,
    NOTHING_DOMINANT,
    OTHER_LOAD,
    PACED_SESSIONS,
    PACING,
    QUIET,
    SESSIONS,
    SESSIONS_ACTIVE,
    UTIL,
    WAIT_SHARE,
    WAL,
    WAL_RATE,
    WRITE_CV,
    Evidence,
)
from pgdyno.reports.document import Code, Inline, Text, plain
from pgdyno.units import format_rate


def evidence_words(e: Evidence) -> Inline:
    """One piece of evidence as the report's line (a command in it typed as code)."""
    words = _WORDS[e.kind](e.figures, e)
    if "busiest" in e.names:  # a run that keeps up: its busiest class, not a bottleneck
        return Text.of(f"busiest class {e.names['busiest']}: ", words)
    return words


def evidence_text(e: Evidence) -> str:
    """One piece of evidence as plain words (the terminal, a test)."""
    return plain(evidence_words(e))


def _pct(share: float) -> str:
    """A fraction as a whole percentage: 0.53 -> 53%."""
    return f"{100.0 * share:.0f}%"


def _events(waits: list[WaitShare]) -> str:
    return ", ".join(f"{w.wait_class}:{w.event} {w.pct:.0f}%" for w in waits) or "none sampled"


def _sessions(f: dict[str, float]) -> str:
    return f"AAS {f['aas']:.2f} for {f['sessions']:g} clients"


def _pacing(f: dict[str, float], e: Evidence) -> str:
    rate = f" ({e.names['rate']})" if e.names.get("rate") else ""
    ratio, threshold = f["real_over_ideal"], f["threshold"]
    return (f"real/ideal {ratio:.0%}{rate}: "
            + (f"at or above {threshold:.0%}, the server keeps up with the terminals"
               if ratio >= threshold else
               f"below {threshold:.0%}, the system no longer keeps up with the terminals"))


def _cpu_use(f: dict[str, float], e: Evidence) -> str:
    line = (f"CPU {f['busy_pct']:.0f}% busy of {f['cores']:g} cores "
            f"(usr {f['usr_pct']:.0f}%, sys {f['sys_pct']:.0f}%, "
            f"iowait {f['iowait_pct']:.0f}%), run queue {f['run_queue']:.1f}")
    if "own_pct" in f:
        line += f", {f['own_pct']:.0f}% of the busy CPU used by the benchmark"
    return line


_SHARE_WORDS = {
    CPU: "{share} of active session time on CPU ({sessions})",
    DATA_READS: "{share} of active session time waiting on data-file reads ({events}; "
                "{sessions})",
    WAL: "{share} of active session time in WAL waits ({events})",
    LOCK: "{share} of active session time waiting on locks ({events})",
    CLIENT: "{share} of active time in Client waits ({events}), {idle:.2f} sessions idle in "
            "transaction",
    CHECKPOINT_STORM: "{share} of active session time in checkpoint-related waits ({events})",
}


def _wait_share(f: dict[str, float], e: Evidence) -> str:
    return _SHARE_WORDS[e.names["class"]].format(
        share=_pct(f["share"]), events=_events(e.waits),
        sessions=_sessions(f) if "aas" in f else "", idle=f.get("idle_in_transaction", 0.0))


def _device(f: dict[str, float], e: Evidence) -> str:
    role = e.names["role"]
    if "device" not in e.names:
        return f"{role} device unknown"
    return (f"{role} device {e.names['device']} {f['util_pct']:.0f}% utilised, "
            f"r/s {f['r_s']:,.0f} (r_await {f['r_await_ms']:,.2f} ms), "
            f"w/s {f['w_s']:,.0f} (w_await {f['w_await_ms']:,.2f} ms), "
            f"aqu-sz {f['aqu_sz']:.2f}")


def _checkpoints(f: dict[str, float], e: Evidence) -> str:
    line = (f"{f['started']:.0f} checkpoints started ({f['timed']:.0f} timed, "
            f"{f['requested']:.0f} requested, {f['wal_triggered']:.0f} forced by WAL volume), "
            f"{f['too_frequent_warnings']:.0f} 'too frequent' warnings")
    if "mean_gap_s" in f:
        line += f", one every {f['mean_gap_s']:.1f} s"
    return line


def _full_page_images(f: dict[str, float], e: Evidence) -> str:
    if "fpi_ratio" not in f:
        return "full-page images unknown"
    return (f"full-page images {_pct(f['fpi_ratio'])} of WAL records, "
            f"~{_pct(f['fpi_bytes_share'])} of WAL bytes")


def _checkpoint_writes(f: dict[str, float], e: Evidence) -> str:
    return (f"checkpoint write {f['write_s']:.1f} s, sync {f['sync_s']:.1f} s; "
            f"buffers written by checkpointer {f['buffers_checkpoint']:,.0f}, "
            f"bgwriter {f['buffers_bgwriter']:,.0f}, backends {f['buffers_backend']:,.0f}")


def _capacity(f: dict[str, float], e: Evidence) -> str:
    n = e.names
    return (f"{n['resource']}: {f['used']:,.0f} of {f['capacity']:,.0f} {n['unit']} "
            f"({f['pct']:.0f}%), {n['note']}")


def _io_share(f: dict[str, float], e: Evidence) -> str:
    return (f"{_pct(f['reads'] + f['wal'] + f['checkpoint'])} of active session time waiting "
            f"on I/O (reads {_pct(f['reads'])}, WAL {_pct(f['wal'])}, checkpoint writes "
            f"{_pct(f['checkpoint'])})")


_WORDS: dict[str, Callable[[dict[str, float], Evidence], Inline]] = {
    OTHER_LOAD: lambda f, e: (f"other load on the host: {e.names['finding']}; the figures "
                              "include its effect"),
    ARCHIVER: lambda f, e: e.names["finding"],
    PACING: _pacing,
    CLIENT_HOST: lambda f, e: (f"client-bound: the client host's CPU was "
                               f"{f['client_busy_pct']:.0f}% busy while the database host's "
                               f"was {f['server_busy_pct']:.0f}%: the load driver is the "
                               "limit, not the server"),
    DRIVER_HOST: lambda f, e: (
        f"driver-bound: pgbench on driver {e.names['driver']} used "
        f"{f['pgbench_cores']:.2f} of the {f['capacity_cores']:g} cores it could use "
        f"({f['pgbench_pct']:.0f}%" + (f"; at 90% or more of them {f['seconds_at_limit']:.0f} "
                                       f"of {f['seconds']:.0f} seconds" if "seconds" in f
                                       else "")
        + (f", throttled by its cgroup {f['throttled_pct']:.0f}% of the time"
           if "throttled_pct" in f else "")
        + f") while the database host's CPU was {f['server_busy_pct']:.0f}% busy"),
    CPU_USE: _cpu_use,
    SESSIONS: lambda f, e: _sessions(f),
    SESSIONS_ACTIVE: lambda f, e: (f"{_sessions(f)}: sessions active "
                                   f"{_pct(f['active_share'])} of the time"),
    PACED_SESSIONS: lambda f, e: (f"paced terminals: {f['aas']:.2f} of {f['sessions']:g} "
                                  "sessions active on average, idle by design (keying and "
                                  "think times)"),
    WAIT_SHARE: _wait_share,
    DEVICE: _device,
    CACHE: lambda f, e: (f"cache hit {f['cache_hit_pct']:.1f}%, "
                         f"{f['blocks_read_per_s']:,.0f} blocks read/s"),
    IO_WORKERS: lambda f, e: f"io workers busy {f['busy']:.2f} on average",
    WAL_RATE: lambda f, e: (f"{f['syncs_per_s']:,.0f} WAL syncs/s, "
                            f"{format_rate(f['bytes_per_s'])} of WAL"),
    FPI_CREDITED: lambda f, e: (f"{_pct(f['fpi_bytes_share'])} of WAL bytes are full-page "
                                "images caused by checkpoints (credited to the checkpoint "
                                "storm)"),
    CHECKPOINTS: _checkpoints,
    FULL_PAGE_IMAGES: _full_page_images,
    WRITE_CV: lambda f, e: (f"data write IOPS CV {_pct(f['cv'])}" if "cv" in f
                            else "data write IOPS CV n/a"),
    CHECKPOINT_WRITES: _checkpoint_writes,
    CAPACITY: _capacity,
    UTIL: lambda f, e: (f"%util {f['util_pct']:.0f}% on {e.names['device']}: the busy-time "
                        "figure understates a device that serves requests in parallel"),
    IO_SHARE: _io_share,
    NO_CAPACITY: lambda f, e: Text.of("no measured capacity for the run's devices (run ",
                                      Code("pgdyno bench fio"), " first)"),
    QUIET: lambda f, e: "no wait class stands out",
    NOTHING_DOMINANT: lambda f, e: (f"no class explains more than {f['min_score']:.0%} of "
                                    "the sessions' time; see the ranked list"),
}
