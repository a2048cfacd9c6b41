"""A two-host fleet against the same two campaigns run one after the other.

The "hosts" are two throwaway users behind two sshd on 127.0.0.1 (tests/sshhost.py), so
both share this machine's cores: on real separate hosts the fleet's advantage is larger.
Prints three times: the fleet's first run (wheels copied, venvs made, campaigns run), the
fleet again on a new campaign (install already done), and the two campaigns run serially
here with `pgdyno campaign`. Needs root (it creates the users) and ansible-core.

    .venv/bin/python bench/fleet_vs_serial.py [--duration 5] [--clients 1,2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.sshhost import ssh_hosts  # noqa: E402

PGDYNO = [sys.executable, "-m", "pgdyno"]


def campaign(path: Path, name: str, clients: str, duration: int) -> Path:
    path.write_text(f'[campaign]\nname = "{name}"\nworkloads = ["tpcb"]\n'
                    f"clients = [{clients}]\nrepeat = 1\n\n[bench]\nscale = 1\n"
                    f"duration = {duration}\nwarmup = 0\niterations = 1\n\n"
                    '[[config]]\nlabel = "default"\n')
    return path


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.monotonic()
    proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    print(proc.stdout.strip().splitlines()[-3:] if proc.stdout.strip() else "", flush=True)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--clients", default="1,2")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pgdyno-fleetbench-", dir="/var/tmp"))
    base.chmod(0o755)
    try:
        run(base, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(base: Path, args: argparse.Namespace) -> None:
    with ssh_hosts(2) as hosts:
        inv = base / "hosts.ini"
        inv.write_text("[db]\n" + "".join(
            f"{h.alias} ansible_user={h.user} ansible_ssh_common_args='-F {h.config_file}' "
            "ansible_python_interpreter=/usr/bin/python3\n" for h in hosts))
        fleet = [*PGDYNO, "fleet", "run", "--inventory", str(inv), "--group", "db",
                 "--results-dir", str(base / "fleet-results")]
        first = timed([*fleet, str(campaign(base / "a.toml", "a", args.clients,
                                            args.duration))])
        again = timed([*fleet, str(campaign(base / "b.toml", "b", args.clients,
                                            args.duration))])
        serial = 0.0
        for h in hosts:
            serial += timed([*PGDYNO, "campaign", str(base / "b.toml"), "--no-progress",
                             "--results-dir", str(base / "serial" / h.alias)],
                            {"PGDYNO_HARDWARE_NAME": h.alias,
                             "PGDYNO_WORKDIR": str(base / "serial-work")})
    print(f"fleet, first run (install + campaigns): {first:6.1f} s")
    print(f"fleet, installed (campaigns):            {again:6.1f} s")
    print(f"the two campaigns one after the other:   {serial:6.1f} s")


if __name__ == "__main__":
    main()
