"""A zombie: an ingress instance frozen (SIGSTOP) while it holds an open transaction
(records and checkpoint flushed, not committed), past its group session, while another
instance takes its partitions over and finishes the replay; then thawed (SIGCONT).

Two layers stop the thawed writer, and the test runs with each alone:

- the broker's fencing: the new owner's ``init_transactions`` bumped the producer epoch
  and aborted the open transaction, so the thawed commit is refused
  (``REPLICATOR_FREEZE_WATCH=off`` leaves only this layer);
- the project's freeze watch (:mod:`replicator.core.freezes`): the thawed writer refuses
  to commit because its process was frozen, before it asks the broker.

Either way nothing the zombie wrote becomes readable with read_committed."""

from __future__ import annotations

import os
import signal

import pytest

from replicator.core.faults import WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT, marker
from replicator.core.freezes import FREEZE_WATCH_ENV, GROUP_SESSION_SECONDS
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import start_ingress
from tests.fixtures.stack import DESTINATION
from tests.fixtures.takeover import (
    PARTITIONS,
    PER_SEGMENT,
    SEGMENTS,
    assert_exactly_once,
    fill,
    owned,
    process_state,
    produced,
    stop,
    wait_until,
)


def everything_in_the_log(local_stack, setup) -> int:
    """Records in the destination, committed, aborted or in an open transaction."""
    bootstrap = local_stack.bootstrap(DESTINATION)
    return sum(
        len(read_partition(bootstrap, setup.destination, p, "read_uncommitted"))
        for p in range(PARTITIONS)
    )


@pytest.mark.parametrize("defence", ["broker fencing alone", "freeze watch"])
def test_a_frozen_instance_thawed_after_a_takeover_commits_nothing_more(
    local_stack, ingress_setup, tmp_path, defence
):
    watch_off = defence == "broker fencing alone"
    setup = ingress_setup()
    fill(setup)
    total = PARTITIONS * SEGMENTS * PER_SEGMENT
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    crash_dir = tmp_path / "crash"
    point = WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT
    a = start_ingress(
        setup,
        logs[0],
        f"{point}:3",
        crash_dir,
        crash_action="stop",
        extra_env={FREEZE_WATCH_ENV: "off"} if watch_off else None,
    )
    b = None
    try:
        wait_until(lambda: marker(crash_dir, point) is not None, 120, "a to freeze", logs)
        hit = marker(crash_dir, point)
        assert hit is not None and hit["pid"] == a.pid, hit
        # The marker is written just before the SIGSTOP, and the whole process stops once
        # each of its threads is scheduled again: its main thread (what /proc/PID/stat
        # shows) was still running or asleep right after the marker in 28 of 100 tries.
        wait_until(lambda: process_state(a.pid) == "T", 10, "a to be stopped", logs)
        b = start_ingress(setup, logs[1])
        # b owns everything only once a's session (6 s) expired, and finishes the replay
        # while a is frozen with its transaction open.
        wait_until(lambda: owned(logs[1]) == PARTITIONS, 60, "b to take over", logs)
        wait_until(lambda: produced(local_stack, setup) >= total, 120, "b to finish", logs)
        assert_exactly_once(local_stack, setup)
        in_log_before_thaw = everything_in_the_log(local_stack, setup)

        os.kill(a.pid, signal.SIGCONT)
        if watch_off:
            refusal = f"{hit['where']} is now written by another instance"
        else:
            refusal = f"{hit['where']}: refusing to commit: this process was frozen for"
        wait_until(lambda: refusal in logs[0].read_text(errors="replace"), 60, "a to refuse", logs)
        if not watch_off:
            frozen_for = float(logs[0].read_text(errors="replace").split(refusal)[1].split()[0])
            assert frozen_for > GROUP_SESSION_SECONDS, frozen_for
        assert_exactly_once(local_stack, setup)
        # a rejoins the group and may own partitions again: its new writers resume from
        # the destination, which is complete, so they have nothing to add.
        wait_until(lambda: owned(logs[0]) > 0, 60, "a to rejoin", logs)
        assert everything_in_the_log(local_stack, setup) == in_log_before_thaw
    finally:
        for process in (a, b):
            if process is not None:
                os.kill(process.pid, signal.SIGCONT)
                stop(process)
    assert a.returncode == 0, logs[0].read_text(errors="replace")[-3000:]
    assert_exactly_once(local_stack, setup)
