"""``--drivers``: the driver hosts opened before a run starts, and closed when it ends.

Every driver is reached, given pgbench and a scratch directory before the run directory
exists, so a driver that cannot be reached refuses the run in one line and leaves nothing.
The iterations themselves run in the pgbench engine (``workloads.engine.drivers``).
"""

from __future__ import annotations

import os
import secrets

from pgdyno.options import BenchOptions
from pgdyno.targets import Target
from pgdyno.targets.drivers import DriverPool, open_pool


def open_drivers(opts: BenchOptions, target: Target | None) -> DriverPool | None:
    """The run's drivers (None without --drivers)."""
    if opts.drivers is None or target is None:
        return None
    return open_pool(opts.drivers, opts.target.ssh_config, target.install,
                     f"run-{os.getpid()}-{secrets.token_hex(4)}", opts.clients,
                     group=opts.drivers_group)
