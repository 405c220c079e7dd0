"""A source topic grows from 4 to 6 partitions (CreatePartitions) while the relay runs:
the destination grows with it, the new partitions are relayed from their first offset
exactly, and a restart afterwards relays on without repeating anything."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import NewPartitions

from relay.failover import UpstreamState, grown_partition_counts
from relay.service import RelayService
from replicator.core.kafka import provenance
from replicator.core.kafka.clients import await_leaders
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION, SOURCE


def produce(producer: Producer, topic: str, partitions: int, per_partition: int) -> None:
    for i in range(partitions * per_partition):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    producer.flush(30)


def relayed_exactly(local_stack, setup, partitions: int) -> bool:
    """Every source record of each partition once, in order, in the destination."""
    try:
        for partition in range(partitions):
            source = read_partition(local_stack.bootstrap(SOURCE), setup.source, partition)
            copied = read_partition(
                local_stack.bootstrap(DESTINATION), setup.destination, partition
            )
            named = provenance.SourcePartition(SOURCE, setup.source, partition)
            offsets = [provenance.source_offset(list(r[5]), named) for r in copied]
            if offsets != [r[0] for r in source]:
                return False
        return True
    except Exception:  # a partition the reader does not know yet
        return False


def test_a_source_that_grows_while_the_relay_runs_is_relayed_exactly(
    local_stack, relay_setup, caplog
):
    # start_from = "latest": a partition added while the relay runs starts at its first
    # offset all the same.
    setup = relay_setup(relay_options='start_from = "latest"')
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 4)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 5})
    service = RelayService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while sum("starting at offset 0" in r.getMessage() for r in caplog.records) < 4:
            assert time.monotonic() < deadline, "the relay did not start its four partitions"
            time.sleep(0.2)
        produce(producer, setup.source, 4, 500)
        deadline = time.monotonic() + 90
        while not relayed_exactly(local_stack, setup, 4):
            assert time.monotonic() < deadline, "the first four partitions were not relayed"
            time.sleep(0.5)

        admin = local_stack.admin(SOURCE)
        admin.create_partitions([NewPartitions(setup.source, 6)])[setup.source].result(30)
        await_leaders(admin, setup.source, 6)
        producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})  # sees 6
        produce(producer, setup.source, 6, 500)  # into the new partitions at once
        deadline = time.monotonic() + 90
        while not relayed_exactly(local_stack, setup, 6):
            assert time.monotonic() < deadline, "the added partitions were not relayed"
            assert runner.is_alive()
            time.sleep(0.5)
    finally:
        service.request_stop()
        runner.join(60)
    assert not runner.is_alive()
    topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert len(topics[setup.destination].partitions) == 6

    # A restart after the growth relays the records added since, nothing twice.
    produce(producer, setup.source, 6, 100)
    assert RelayService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    assert relayed_exactly(local_stack, setup, 6)


def test_growth_is_read_from_the_first_healthy_upstream_in_order():
    known = {"a": 4, "b": 2}
    grown = UpstreamState(True, {("a", p): 0 for p in range(6)} | {("b", 0): 0, ("b", 1): 0})
    same = UpstreamState(True, {("a", p): 0 for p in range(4)} | {("b", 0): 0, ("b", 1): 0})
    down = UpstreamState(False, problem="no metadata")
    assert grown_partition_counts(known, ["x", "y"], {"x": grown, "y": same}) == {"a": 6}
    assert grown_partition_counts(known, ["x", "y"], {"x": same, "y": grown}) == {}
    assert grown_partition_counts(known, ["x", "y"], {"x": down, "y": grown}) == {"a": 6}
    assert grown_partition_counts(known, ["x"], {"x": down}) == {}
    # A topic seen with fewer partitions than known (a stale look) is not a change.
    fewer = UpstreamState(True, {("a", 0): 0, ("b", 0): 0, ("b", 1): 0})
    assert grown_partition_counts(known, ["x"], {"x": fewer}) == {}
