"""The workloads pgdyno knows: one line per plugin. Adding a workload adds a line here."""

from __future__ import annotations

import dataclasses
from typing import Any

from pgdyno import serde
from pgdyno.errors import UsageError
from pgdyno.results.manifest import BenchOptions, Manifest
from pgdyno.workloads.base import Workload
from pgdyno.workloads.cpu.plugin import Cpu
from pgdyno.workloads.fio.plugin import Fio
from pgdyno.workloads.oltp.plugin import OltpReadOnly, OltpReadWrite
from pgdyno.workloads.pgbench.plugin import Custom, SelectOnly, SimpleUpdate, Tpcb
from pgdyno.workloads.tprocc.plugin import Tprocc
from pgdyno.workloads.tproch.plugin import Tproch

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Tpcb(), SimpleUpdate(), SelectOnly(), Custom(),
    Tprocc(),
    Tproch(),
    OltpReadOnly(), OltpReadWrite(),
    Cpu(),
    Fio(),
)}


def names() -> list[str]:
    return list(WORKLOADS)


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"workload {name!r} is unknown; accepted: {', '.join(WORKLOADS)}") \
            from None


def typed_options(opts: BenchOptions) -> BenchOptions:
    """The manifest's options with the workload's own options back in their dataclass."""
    raw: Any = opts.workload_options
    if isinstance(raw, dict):
        typed = serde.from_dict(get(opts.workload).options_type, raw)
        return dataclasses.replace(opts, workload_options=typed)
    return opts


def typed_manifest(manifest: Manifest) -> Manifest:
    return dataclasses.replace(manifest, options=typed_options(manifest.options))
