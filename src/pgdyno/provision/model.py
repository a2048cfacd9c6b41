"""What provisioning is made of: steps (one change each), the plan, the state file, events.

A step is the unit everything else works on: the plan lists steps with the value read from
the live system, apply runs them in PHASES order and records what each replaced, verify
re-reads them, revert restores what the state file says they replaced. Serialised through
pgdyno.serde, so the state file's fields are these dataclasses' fields and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.serde import Serialisable

SCHEMA_VERSION = 1

PHASES: tuple[str, ...] = (
    "mdadm", "mkfs", "mount", "fstab", "queue", "udev", "sysctl", "hugepages", "sysctl.d",
    "thp", "tmpfiles", "governor", "limits")
"""The safe order of an apply: RAID, file system, mount, block queue, sysctl, huge pages,
CPU governor, limits; each persistent file right after the live changes it makes permanent
(the sysctl.d file holds vm.nr_hugepages, so it follows the huge pages). Revert runs it
backwards."""

LIVE, PERSISTENT, DESTRUCTIVE = "live", "persistent", "destructive"
"""How a step's change can be undone: live (a kernel value, restored by writing the old one),
persistent (a file, restored from its saved content), destructive (the data on a device,
which nothing brings back)."""

CHANGE, AT_TARGET, SKIPPED = "change", "at target", "skipped"


@dataclass
class Step:
    """One change to the machine, as planned."""

    kind: str
    """One of PHASES."""
    target: str
    """What it changes: vm.swappiness, /sys/block/loop0/queue/read_ahead_kb, /dev/loop0,
    /etc/sysctl.d/90-pgdyno.conf."""
    value: str
    """The wanted value (for files: their whole content)."""
    keys: list[str] = field(default_factory=list)
    """The configuration keys this step implements (VM_SWAPPINESS, XFS_DATA_AGCOUNT, ...)."""
    current: str = ""
    """The live value when the plan was made ('(absent)' when there is none)."""
    command: str = ""
    """The exact command (or file write) that makes the change."""
    reversibility: str = LIVE
    rationale: str = ""
    status: str = CHANGE
    """change, at target or skipped."""
    note: str = ""
    """Why a step is skipped, or what the operator should know (e.g. needs a reboot)."""
    device: str = ""
    """For destructive steps: the device whose data it destroys (named by --destroy-data)."""
    params: dict[str, str] = field(default_factory=dict)
    """Kind-specific inputs (mkfs: su, sw, agcount; mount: mountpoint, options)."""

    @property
    def actionable(self) -> bool:
        return self.status == CHANGE

    @property
    def shown_value(self) -> str:
        """The value as a table shows it: files by their size, not their content."""
        if self.kind in FILE_KINDS:
            lines = [line for line in self.value.splitlines() if not line.startswith("#")]
            return f"{len(lines)} line(s)"
        return self.value


FILE_KINDS = frozenset({"sysctl.d", "udev", "tmpfiles", "limits", "fstab"})


@dataclass
class ProvisionPlan(Serialisable):
    """Every OS and storage setting of a config as steps, with the live values read."""

    config: str
    hardware: str
    steps: list[Step] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    created: str = ""
    host: str = ""
    machine: str = ""
    """How contexts name the machine: the profile's name, or <vcpus>vcpu-<ram>gb detected."""
    schema_version: int = SCHEMA_VERSION

    def ordered(self) -> list[Step]:
        """Actionable steps in the safe order of PHASES (stable within a phase)."""
        rank = {kind: n for n, kind in enumerate(PHASES)}
        return sorted((s for s in self.steps if s.actionable), key=lambda s: rank[s.kind])


@dataclass
class AppliedStep:
    """A step of an apply, with what it replaced (saved before anything changed)."""

    step: Step
    previous: dict[str, str] = field(default_factory=dict)
    """Whatever restoring needs: the old value, a paired sysctl, a file's content, a mount;
    read again just before the step's write and saved with ``started``."""
    started: bool = False
    """The write-ahead record: True (on disk, fsynced) before the change is attempted. A step
    started but not done may or may not have changed the machine (a kill between the write
    and its record): rollback and revert restore it whenever it left something changed."""
    done: bool = False
    """True once the change was made and read back (what a rollback or revert undoes)."""

    @property
    def in_doubt(self) -> bool:
        """Started, never recorded as done: the write may or may not have happened."""
        return self.started and not self.done


@dataclass
class ProvisionState(Serialisable):
    """The state file: written before the first change, then before and after each step
    (the write-ahead record: a step is ``started`` on disk before its write is attempted)."""

    created: str
    host: str
    kernel: str
    config: str
    hardware: str
    steps: list[AppliedStep] = field(default_factory=list)
    status: str = "applying"
    """applying, applied, rolled back (a step failed; what was done is undone), reverted."""
    error: str = ""
    reverted_at: str = ""
    context: str = ""
    """The context whose journal records this apply (and its revert)."""
    pgdyno_version: str = ""
    schema_version: int = SCHEMA_VERSION
    path: str = field(default="", metadata={"serialise": False})

    def done(self) -> list[AppliedStep]:
        return [a for a in self.steps if a.done]

    def touched(self) -> list[AppliedStep]:
        """Steps that may have changed the machine: done, or started and cut short."""
        return [a for a in self.steps if a.done or a.started]


@dataclass
class Drift:
    """One planned value against the live one (verify)."""

    keys: list[str]
    kind: str
    target: str
    planned: str
    live: str
    ok: bool


@dataclass
class RevertReport:
    """What a revert restored, and what it could not (data destroyed by mkfs or mdadm)."""

    state_file: Path
    restored: list[str] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
