"""The verdict's evidence on constructed telemetry: each class names its own wait events,
other load on the host comes first, and a paced run is judged against its ideal rate. The
evidence is read as the figures it holds (``Evidence``); its words, as the report shows
them, from ``reports.evidence``."""

from __future__ import annotations

import pytest

from pgdyno.analysis import telemetry as t
from pgdyno.analysis.verdict import (
    CHECKPOINT_STORM,
    CLIENT,
    CPU,
    CPU_USE,
    DATA_READS,
    KEEPS_UP,
    LOCK,
    OTHER_LOAD,
    PACED_SESSIONS,
    PACING,
    WAIT_SHARE,
    WAL,
    Evidence,
    Paced,
    Verdict,
    decide_bottleneck,
)
from pgdyno.reports.evidence import evidence_text

# The events of a write-heavy run (WAL writes, then row locks), with one of every other
# class: (class, event, % of time).
EVENTS = [("LWLock", "WALWrite", 36.0), ("Lock", "transactionid", 30.0),
          ("IO", "DataFileRead", 12.0), ("IO", "WalSync", 7.0), ("CPU", "CPU", 6.0),
          ("LWLock", "LockManager", 4.0), ("Client", "ClientRead", 3.0),
          ("IO", "DataFileWrite", 2.0)]
# Which class each event belongs to, written out by hand (PostgreSQL's wait event docs).
OWN = {WAL: {"LWLock:WALWrite", "IO:WalSync"},
       LOCK: {"Lock:transactionid", "LWLock:LockManager"},
       DATA_READS: {"IO:DataFileRead"}, CPU: {"CPU:CPU"}, CLIENT: {"Client:ClientRead"},
       CHECKPOINT_STORM: {"IO:DataFileWrite"}}


def summary(events: list[tuple[str, str, float]] = EVENTS, aas: float = 8.0,
            busy_pct: float = 60.0, own_pct: float = 90.0) -> t.TelemetrySummary:
    s = t.TelemetrySummary(duration_s=10.0)
    s.cpu = t.CpuSummary(samples=10, online_cpus=2, effective_cores=2.0,
                         busy=t.Stat(avg=busy_pct), busy_of_limit_pct=busy_pct,
                         workload_share_of_busy_pct=own_pct)
    s.waits = t.WaitSummary(ticks=100, sample_hz=10.0, aas=aas, by_event=[
        t.WaitShare(c, e, aas * pct / 100, pct) for c, e, pct in events])
    # WAL-forced checkpoints, so that the checkpoint class has evidence lines too.
    s.checkpoints = t.CheckpointSummary(started=3, requested=3, wal_triggered=3)
    return s


def _named(e: Evidence) -> dict[str, int]:
    """The wait events a piece of evidence names, with their whole-percent shares."""
    return {f"{w.wait_class}:{w.event}": round(w.pct) for w in e.waits}


def test_each_class_names_its_own_wait_events_only() -> None:
    v = decide_bottleneck(summary(), clients=16, cpu_count=2)
    by_name = {c.name: c for c in v.ranked}
    shares = {f"{c}:{e}": round(p) for c, e, p in EVENTS}
    for name, own in OWN.items():
        named = {k: v for e in by_name[name].evidence for k, v in _named(e).items()}
        # CPU time is one "event": its evidence gives the share without naming it.
        assert named or name == CPU, (name, by_name[name].evidence)
        # Only this class's events, each with its own share of the sessions' time.
        assert set(named) <= own, (name, named)
        assert all(shares[k] == v for k, v in named.items()), named
    wal = by_name[WAL].evidence[0]
    assert wal.kind == WAIT_SHARE and wal.names["class"] == WAL
    assert _named(wal)["LWLock:WALWrite"] == 36 and "Lock:transactionid" not in _named(wal)
    assert wal.figures["share"] == pytest.approx((36.0 + 7.0) / 100)
    lock = by_name[LOCK].evidence[0]
    assert _named(lock)["Lock:transactionid"] == 30 and "LWLock:WALWrite" not in _named(lock)
    # The report words the figures it holds.
    assert "LWLock:WALWrite 36%" in evidence_text(wal)
    assert evidence_text(wal).startswith("43% of active session time in WAL waits")


def test_a_class_without_sampled_events_says_so() -> None:
    v = decide_bottleneck(summary([("CPU", "CPU", 100.0)]), clients=16, cpu_count=2)
    wal = next(c for c in v.ranked if c.name == WAL)
    assert wal.evidence[0].waits == [] and wal.evidence[0].figures["share"] == 0
    words = evidence_text(wal.evidence[0])
    assert "(none sampled)" in words and "CPU" not in words


def test_other_load_is_the_first_evidence() -> None:
    s = summary()
    s.contamination = t.Contamination(
        contaminated=True, finding="other processes used 0.9 of 2 cores (45% of busy CPU)",
        cpu_attributed=True, host_cores=2, other_cores=0.9, other_share_of_busy_pct=45.0)
    v = decide_bottleneck(s, clients=16, cpu_count=2)
    assert v.contaminated and v.evidence[0] == Evidence(OTHER_LOAD, names={
        "finding": "other processes used 0.9 of 2 cores (45% of busy CPU)"})
    assert evidence_text(v.evidence[0]) == (
        "other load on the host: other processes used 0.9 of 2 cores (45% of busy CPU); "
        "the figures include its effect")
    assert v.evidence[1:] == next(c for c in v.ranked if c.name == v.primary).evidence
    clean = decide_bottleneck(summary(), clients=16, cpu_count=2)
    assert not clean.contaminated and clean.evidence[0].kind != OTHER_LOAD
    assert Verdict.from_dict(v.to_dict()) == v


# ----- paced runs (TPROC-C with keying and think times) ------------------------------------

def _idle_terminals() -> t.TelemetrySummary:
    """A compliant TPROC-C run: 10 terminals, AAS 0.07, the CPUs mostly idle."""
    return summary([("CPU", "CPU", 60.0), ("IO", "WalSync", 30.0),
                    ("Client", "ClientRead", 10.0)], aas=0.07, busy_pct=15.0, own_pct=80.0)


def test_unpaced_idle_sessions_read_as_client_bound() -> None:
    """What the verdict said before pacing was an input: "add clients"."""
    v = decide_bottleneck(_idle_terminals(), clients=10, cpu_count=2)
    assert v.primary == CLIENT and "add clients" in v.next_step


def test_paced_run_that_reaches_its_ideal_keeps_up() -> None:
    paced = Paced(real_over_ideal=0.99, rate="NOPM 1,273 of 1,286 ideal")
    v = decide_bottleneck(_idle_terminals(), clients=10, cpu_count=2, paced=paced)
    assert v.primary == KEEPS_UP and "add clients" not in v.next_step
    assert "add warehouses" in v.next_step
    assert v.evidence[0] == Evidence(PACING, {"real_over_ideal": 0.99, "threshold": 0.9},
                                     names={"rate": "NOPM 1,273 of 1,286 ideal"})
    assert evidence_text(v.evidence[0]) == (
        "real/ideal 99% (NOPM 1,273 of 1,286 ideal): at or above 90%, the server keeps up "
        "with the terminals")
    client = next(c for c in v.ranked if c.name == CLIENT)
    assert client.score == 0.0 and client.evidence[0].kind == PACED_SESSIONS
    assert client.evidence[0].figures == {"aas": 0.07, "sessions": 10.0}
    assert "idle by design" in evidence_text(client.evidence[0])
    assert v.inputs["real_over_ideal"] == pytest.approx(0.99)


def test_paced_run_below_its_ideal_names_the_limiting_resource() -> None:
    saturated = summary([("CPU", "CPU", 85.0), ("Client", "ClientRead", 10.0),
                         ("IO", "WalSync", 5.0)], aas=1.9, busy_pct=98.0, own_pct=95.0)
    paced = Paced(real_over_ideal=0.62, rate="NOPM 797 of 1,286 ideal")
    v = decide_bottleneck(saturated, clients=10, cpu_count=2, paced=paced)
    assert v.primary == CPU, v.ranked
    pacing = v.evidence[0]
    assert pacing.kind == PACING and pacing.figures["real_over_ideal"] == 0.62
    assert pacing.figures["real_over_ideal"] < pacing.figures["threshold"] == 0.9
    assert evidence_text(pacing).startswith(
        "real/ideal 62% (NOPM 797 of 1,286 ideal): below 90%")
    assert v.evidence[1].kind == CPU_USE and v.evidence[1].figures["busy_pct"] == 98.0
    # Nothing dominant below the ideal: undetermined, never the idle terminals.
    quiet = decide_bottleneck(_idle_terminals(), clients=10, cpu_count=2,
                              paced=Paced(real_over_ideal=0.5))
    assert quiet.primary != CLIENT and "add clients" not in quiet.next_step
    # Other load still leads, before the pacing.
    s = _idle_terminals()
    s.contamination = t.Contamination(contaminated=True, finding="other processes used 1.0 "
                                      "of 2 cores (60% of busy CPU)")
    v = decide_bottleneck(s, clients=10, cpu_count=2, paced=paced)
    assert v.evidence[0].kind == OTHER_LOAD
    assert v.evidence[1].kind == PACING and v.evidence[1].figures["real_over_ideal"] == 0.62
