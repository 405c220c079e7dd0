"""Several ingress instances: they share the partitions, and when one is killed with
SIGKILL (at an arbitrary moment, or just after a produce and before its checkpoint) the
others take over and the destination ends up holding each source record exactly once."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from replicator.core.faults import WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT
from tests.fixtures.ingress import provenance_offsets, segment_batch

PARTITIONS = 4
SEGMENTS = 8
PER_SEGMENT = 1500


def fill(setup) -> None:
    setup.put_descriptor(PARTITIONS)
    for partition in range(PARTITIONS):
        for s in range(SEGMENTS):
            start = s * PER_SEGMENT
            setup.put_segment(
                partition, start, start + PER_SEGMENT - 1, segment_batch(start, PER_SEGMENT)
            )


def start_instance(setup, log: Path, crash_point: str | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("REPLICATOR_CRASH_POINT", None)
    if crash_point:
        env["REPLICATOR_CRASH_POINT"] = crash_point
    return subprocess.Popen(
        [sys.executable, "-m", "replicator", "ingress", "--config", str(setup.path)],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )


def owned(log: Path) -> int:
    counts = re.findall(r"owning (\d+) source partitions", log.read_text(errors="replace"))
    return int(counts[-1]) if counts else -1


def produced(local_stack, setup) -> int:
    return sum(len(provenance_offsets(local_stack, setup, p)) for p in range(PARTITIONS))


def wait_until(predicate, timeout: float, what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            tails = "\n".join(p.read_text(errors="replace")[-2000:] for p in logs)
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        time.sleep(0.3)


def assert_exactly_once(local_stack, setup) -> None:
    for partition in range(PARTITIONS):
        offsets = provenance_offsets(local_stack, setup, partition)
        assert offsets == list(range(SEGMENTS * PER_SEGMENT)), (
            f"partition {partition}: {len(offsets)} records, "
            f"{len(offsets) - len(set(offsets))} duplicates"
        )


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


def test_two_instances_share_and_survive_a_kill_9_mid_replay(local_stack, ingress_setup, tmp_path):
    setup = ingress_setup()
    fill(setup)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    a = start_instance(setup, logs[0])
    b = start_instance(setup, logs[1])
    try:
        wait_until(
            lambda: owned(logs[0]) > 0 and owned(logs[1]) > 0,
            60,
            "both instances to own partitions",
            logs,
        )
        total = PARTITIONS * SEGMENTS * PER_SEGMENT
        wait_until(lambda: produced(local_stack, setup) > total // 10, 60, "replay to start", logs)
        kill(a)
        wait_until(lambda: owned(logs[1]) == PARTITIONS, 60, "b to take over", logs)
        wait_until(lambda: produced(local_stack, setup) >= total, 120, "replay to finish", logs)
    finally:
        for process in (a, b):
            stop(process)
    assert_exactly_once(local_stack, setup)


def test_kill_just_after_produce_before_checkpoint_then_another_kill(
    local_stack, ingress_setup, tmp_path
):
    setup = ingress_setup()
    fill(setup)
    logs = [tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"]
    # a kills itself (SIGKILL) after its 3rd flush of records, before writing the checkpoint.
    a = start_instance(setup, logs[0], crash_point=f"{WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT}:3")
    b = start_instance(setup, logs[1])
    c = None
    try:
        a.wait(120)
        assert a.returncode == -signal.SIGKILL, logs[0].read_text()[-2000:]
        total = PARTITIONS * SEGMENTS * PER_SEGMENT
        wait_until(lambda: produced(local_stack, setup) > total // 2, 120, "b to go on", logs)
        kill(b)  # a second moment: mid-replay
        c = start_instance(setup, logs[2])
        wait_until(lambda: produced(local_stack, setup) >= total, 120, "c to finish", logs)
    finally:
        for process in (a, b, c):
            if process is not None:
                stop(process)
    assert_exactly_once(local_stack, setup)
