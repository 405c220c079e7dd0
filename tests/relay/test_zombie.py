"""A relay zombie: an instance frozen (SIGSTOP) while it holds an open transaction
(records and checkpoint flushed, not committed), past its group session, while another
instance takes its partitions over and relays everything; then thawed (SIGCONT).

As for ingress (``tests/ingress/test_zombie.py``) the test runs with the broker's fencing
alone (``REPLICATOR_FREEZE_WATCH=off``) and with the project's freeze watch: either way
the thawed writer's commit is refused and the destination holds every source record
exactly once, read_committed."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Producer

from replicator.core.faults import WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT, marker
from replicator.core.freezes import FREEZE_WATCH_ENV
from replicator.core.kafka import provenance
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import create_topic, start_relay
from tests.fixtures.stack import DESTINATION, SOURCE
from tests.fixtures.takeover import wait_until

PARTITIONS = 4
RECORDS = 40_000


def relayed_offsets(local_stack, setup, partition: int) -> list[int | None]:
    copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, partition)
    named = provenance.SourcePartition(SOURCE, setup.source, partition)
    return [provenance.source_offset(list(r[5]), named) for r in copied]


def exactly_once(local_stack, setup) -> bool:
    try:
        return all(
            relayed_offsets(local_stack, setup, p) == list(range(RECORDS // PARTITIONS))
            for p in range(PARTITIONS)
        )
    except Exception:  # the destination does not exist yet
        return False


@pytest.mark.parametrize("defence", ["broker fencing alone", "freeze watch"])
def test_a_frozen_relay_thawed_after_a_takeover_commits_nothing_more(
    local_stack, relay_setup, tmp_path, defence
):
    watch_off = defence == "broker fencing alone"
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, PARTITIONS)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 20})
    for i in range(RECORDS):
        producer.produce(setup.source, key=b"%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    producer.flush(30)

    logs = [tmp_path / "relay-a.log", tmp_path / "relay-b.log"]
    crash_dir = tmp_path / "crash"
    point = WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT
    env = {
        "REPLICATOR_CRASH_POINT": f"{point}:2",
        "REPLICATOR_CRASH_DIR": str(crash_dir),
        "REPLICATOR_CRASH_ACTION": "stop",
    }
    if watch_off:
        env[FREEZE_WATCH_ENV] = "off"
    a = start_relay(setup, logs[0], env=env)
    b = None
    try:
        wait_until(lambda: marker(crash_dir, point) is not None, 90, "a to freeze", logs)
        hit = marker(crash_dir, point)
        assert hit is not None and hit["pid"] == a.pid, hit
        b = start_relay(setup, logs[1])
        # b gets every partition once a's session (6 s) expired, and relays them all
        # while a is frozen with its transaction open.
        wait_until(lambda: exactly_once(local_stack, setup), 120, "b to relay everything", logs)

        os.kill(a.pid, signal.SIGCONT)
        if watch_off:
            refusal = f"{hit['where']} is now written by another instance"
        else:
            refusal = f"{hit['where']}: refusing to commit: this process was frozen for"
        wait_until(lambda: refusal in logs[0].read_text(errors="replace"), 60, "a to refuse", logs)
        time.sleep(3)  # a rejoins; what it could still write would show now
        assert exactly_once(local_stack, setup)
    finally:
        for process in (a, b):
            if process is not None and process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except Exception:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(10)
    for partition in range(PARTITIONS):
        offsets = relayed_offsets(local_stack, setup, partition)
        assert offsets == list(range(RECORDS // PARTITIONS)), (
            f"partition {partition}: {len(offsets)} records, "
            f"{len(offsets) - len(set(offsets))} duplicates"
        )
