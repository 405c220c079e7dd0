"""Two relay instances share the partitions; one is killed with SIGKILL while records are
still arriving, the other takes its partitions over, and the destination holds every
source record exactly once, in order."""

from __future__ import annotations

import os
import signal
import threading
import time

from confluent_kafka import Producer

from replicator.core.kafka import provenance
from tests.fixtures.egress import finish_bursts
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import create_topic, start_relay
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 4
RECORDS = 6000


def counts(local_stack, region: str, topic: str) -> list[int]:
    return [len(read_partition(local_stack.bootstrap(region), topic, p)) for p in range(PARTITIONS)]


def test_a_killed_instance_is_taken_over_and_nothing_is_lost_or_doubled(
    local_stack, relay_setup, tmp_path
):
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, PARTITIONS)
    producing = threading.Event()
    producing.set()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
        for i in range(RECORDS):
            producer.produce(setup.source, key=b"%d" % i, value=b"v%d" % i, partition=i % 4)
            if i % 200 == 199:
                producer.flush(10)
                time.sleep(0.1)  # ~2,000 records/s
        finish_bursts(producer, setup.source, range(PARTITIONS))
        producing.clear()

    producer_thread = threading.Thread(target=produce)
    producer_thread.start()
    logs = [tmp_path / "relay-a.log", tmp_path / "relay-b.log"]
    a, b = (start_relay(setup, log) for log in logs)
    try:
        deadline = time.monotonic() + 90
        while sum(counts(local_stack, DESTINATION, setup.destination)) < 1000:
            assert time.monotonic() < deadline, logs[0].read_text()[-3000:]
            assert a.poll() is None and b.poll() is None
            time.sleep(0.2)
        assert producing.is_set(), "the kill must land while records are still arriving"
        os.killpg(a.pid, signal.SIGKILL)
        a.wait(10)
        producer_thread.join(120)
        source = counts(local_stack, SOURCE, setup.source)
        deadline = time.monotonic() + 120
        while counts(local_stack, DESTINATION, setup.destination) != source:
            assert time.monotonic() < deadline, logs[1].read_text()[-3000:]
            assert b.poll() is None, logs[1].read_text()[-3000:]
            time.sleep(0.5)
        b.send_signal(signal.SIGTERM)
        assert b.wait(60) == 0, logs[1].read_text()[-3000:]
    finally:
        for process in (a, b):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
    for partition in range(PARTITIONS):
        source_records = read_partition(local_stack.bootstrap(SOURCE), setup.source, partition)
        copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, partition)
        named = provenance.SourcePartition(SOURCE, setup.source, partition)
        offsets = [provenance.source_offset(list(r[5]), named) for r in copied]
        assert offsets == [r[0] for r in source_records], (
            f"partition {partition}: {len(offsets)} records, "
            f"{len(offsets) - len(set(offsets))} duplicates"
        )
