"""An egress process a failed test left running is killed at the test's end, with its
process group (its Spark JVM and Python workers)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.fixtures.egress import _started_egress, kill_leftover_egress


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_process_left_running_is_killed_with_its_group():
    # A stand-in for egress: a process in a session of its own with a child in its group.
    process = subprocess.Popen(
        ["sh", "-c", "sleep 600 & echo $!; wait"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    child = int(process.stdout.readline())
    _started_egress.append(process)

    kill_leftover_egress()

    assert process.poll() is not None, "the leftover process is still running"
    deadline = time.monotonic() + 10
    while running(child):
        assert time.monotonic() < deadline, "the leftover process's child is still running"
        time.sleep(0.1)
    assert not _started_egress
