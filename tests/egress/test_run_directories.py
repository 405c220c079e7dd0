"""Each egress run's statistics directory (egress.driver_state.RunDirectory): made and
locked at its start, kept while its run lives (even beside another run), removed by the
next start once its run ended however it ended, and never brought back by a late write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from egress import driver_state
from egress.driver_state import DriverState, PartitionStats, RunDirectory, last_run_directory

HOLD = """
import sys, time
from egress.driver_state import RunDirectory
run = RunDirectory.start(sys.argv[1])
print(run.directory, flush=True)
time.sleep(600)
"""


def test_a_running_run_keeps_its_directory_and_an_ended_one_goes_at_the_next_start(tmp_path):
    first = RunDirectory.start(tmp_path)
    second = RunDirectory.start(tmp_path)  # another deployment beside it
    assert first.directory.is_dir() and second.directory.is_dir()
    assert last_run_directory(tmp_path) == second.directory
    first.release()
    third = RunDirectory.start(tmp_path)
    assert not first.directory.exists()
    assert second.directory.is_dir() and third.directory.is_dir()
    second.release()
    third.release()


def test_the_directory_of_a_run_killed_with_sigkill_goes_at_the_next_start(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    killed = tmp_path / os.path.basename(holder.stdout.readline().strip())
    survivor = RunDirectory.start(tmp_path)  # the holder lives: its directory stays
    assert killed.is_dir()
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    nxt = RunDirectory.start(tmp_path)
    assert not killed.exists()
    assert survivor.directory.is_dir()
    survivor.release()
    nxt.release()


def test_a_late_write_of_an_ended_run_does_not_bring_its_directory_back(tmp_path, caplog):
    ended = RunDirectory.start(tmp_path)
    ended.release()
    RunDirectory.start(tmp_path).release()  # removes the ended run's directory
    state = DriverState(ended.directory)
    state.write_partitions(7, {("orders", 0): PartitionStats(records=1)})
    state.record_data_loss({"topic": "orders", "partition": 0, "first": 0, "last": 1})
    assert not ended.directory.exists()
    assert "is gone (its run ended); not recorded" in caplog.text


def test_a_directory_a_run_was_killed_making_goes_once_it_is_old(tmp_path):
    abandoned = tmp_path / ".run-00000000000000000001-1-abc"
    fresh = tmp_path / ".run-00000000000000000002-2-def"
    abandoned.mkdir()
    fresh.mkdir()
    old = time.time() - driver_state.ABANDONED_AFTER - 5
    os.utime(abandoned, (old, old))
    RunDirectory.start(tmp_path).release()
    assert not abandoned.exists()
    assert fresh.exists()  # maybe being made right now
