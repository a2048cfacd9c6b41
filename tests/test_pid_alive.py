"""A server's process read as gone once it has exited, also when it was this process's own
child (a zombie until reaped): a later run in the same process stops a kept server at once
instead of waiting out the stop's timeout."""

from __future__ import annotations

import os
import subprocess
import sys

from pgdyno.targets.local import pid_alive


def test_an_exited_child_reads_as_gone_and_a_running_one_as_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    assert pid_alive(child.pid)
    # Exited, not reaped (WNOWAIT): a zombie that signal 0 still reaches.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    assert not pid_alive(child.pid)
    assert child.poll() is not None  # the Popen that owned it still ends cleanly


def test_a_process_that_is_not_a_child_is_read_by_signal() -> None:
    assert pid_alive(1)  # init: not our child, alive
