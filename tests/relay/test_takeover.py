"""Two relay instances share the partitions; one is killed with SIGKILL while records are
still arriving, the other takes its partitions over, and the destination holds every
source record exactly once, in order. A ``--stop-at-end`` run goes through a rebalance
(a member joining and leaving) without taking the moment it owns nothing for its end."""

from __future__ import annotations

import os
import signal
import threading
import time

from confluent_kafka import KafkaException, Producer

from replicator.core.kafka import provenance
from tests.fixtures.groups import join_and_leave
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import create_topic, record_counts, start_relay
from tests.fixtures.stack import DESTINATION, SOURCE, log_end

PARTITIONS = 4
RECORDS = 8000


def counts(local_stack, region: str, topic: str) -> list[int]:
    return record_counts(local_stack.bootstrap(region), topic, PARTITIONS)


def test_a_killed_instance_is_taken_over_and_nothing_is_lost_or_doubled(
    local_stack, relay_setup, tmp_path
):
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, PARTITIONS)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})

    def produce(start: int, count: int, pause: float) -> None:
        for i in range(start, start + count):
            producer.produce(setup.source, key=b"%d" % i, value=b"v%d" % i, partition=i % 4)
            if i % 200 == 199:
                producer.flush(10)
                time.sleep(pause)

    produce(0, 2000, 0)
    logs = [tmp_path / "relay-a.log", tmp_path / "relay-b.log"]
    a, b = (start_relay(setup, log) for log in logs)
    try:
        deadline = time.monotonic() + 90
        while sum(counts(local_stack, DESTINATION, setup.destination)) < 1000:
            assert time.monotonic() < deadline, logs[0].read_text()[-3000:]
            assert a.poll() is None and b.poll() is None
            time.sleep(0.2)
        # More records arrive for every partition, those of the victim included, while
        # it is killed: it still had work.
        more = threading.Thread(target=produce, args=(2000, RECORDS - 2000, 0.3))
        more.start()
        time.sleep(1.0)
        assert more.is_alive(), "the kill must land while records are still arriving"
        os.killpg(a.pid, signal.SIGKILL)
        a.wait(10)
        more.join(120)
        producer.flush(30)
        source = counts(local_stack, SOURCE, setup.source)
        assert sum(source) == RECORDS
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


def relayed_so_far(local_stack, topic: str) -> int:
    """The destination's log ends (records and transaction markers): cheaper than
    reading it; 0 before the topic exists."""
    try:
        return sum(log_end(local_stack, topic, p) for p in range(PARTITIONS))
    except KafkaException:
        return 0


def test_a_rebalance_during_a_stop_at_end_run_does_not_end_it_early(
    local_stack, relay_setup, tmp_path
):
    records = 200_000
    # 50,000 records per partition at 2,000 a second while the gate is there (25 s: the
    # relay's share after the first rebalance is not done before the joining member has
    # left, however loaded the machine), at full speed once the test removes it.
    gate = tmp_path / "paced"
    gate.touch()
    setup = relay_setup(
        topic_options='filters = [{ plugin = "tests.fixtures.filter_plugins:paced",'
        f' config = {{ records_per_second = 2000, while_exists = "{gate}" }} }}]'
    )
    create_topic(local_stack.bootstrap(SOURCE), setup.source, PARTITIONS)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 20})
    for i in range(records):
        producer.produce(setup.source, key=b"%d" % i, value=b"v%d" % i, partition=i % 4)
        if i % 50_000 == 0:
            producer.flush(30)
    producer.flush(30)
    log = tmp_path / "relay.log"
    relay = start_relay(setup, log, "--stop-at-end")
    try:
        deadline = time.monotonic() + 90
        while relayed_so_far(local_stack, setup.destination) == 0:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            assert relay.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        join_and_leave(
            local_stack.bootstrap(DESTINATION),
            setup.group,
            setup.config.relay.assignment_topic,
            lambda: relay.poll() is None,
        )
        assert relayed_so_far(local_stack, setup.destination) < records, (
            "the relay ended before the rebalance: the test showed nothing"
        )
        gate.unlink()
        assert relay.wait(240) == 0, log.read_text()[-3000:]
    finally:
        if relay.poll() is None:
            os.killpg(relay.pid, signal.SIGKILL)
            relay.wait(10)
    assert counts(local_stack, DESTINATION, setup.destination) == counts(
        local_stack, SOURCE, setup.source
    ), log.read_text()[-3000:]
