"""A tail read gives its partition back when it ends.

Tail readers ask the broker not to hold fetches (``fetch.wait.max.ms`` 10, so that the
empty fetch revealing the end comes at once). A reader still assigned after its scan
would go on fetching the partition a hundred times a second while its owner waits for
something else: a writer's resume point scans the checkpoint partition, then may wait
up to a transaction timeout for the destination partition's transactions to end, with
the same reader. Dozens of writers opening at once made that a load of their own on a
broker that was slow already.

A read from a broker that is down gives up within a second of its owner stopping, not
after the read timeout: a relay asked to stop while it compared a record with an upstream
that had just died took more than a minute to exit (the failback drill's relays, stopped
with their old region's broker killed under them).

A partition whose records all belong to aborted transactions holds no record: its first
committed record is none, though its last stable offset is past the aborted ones (a
restore killed mid-transaction and run again refused its own aborted records as another
writer's).
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer, TopicPartition

from infra.ports import free_port
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.tail import (
    READ_TIMEOUT,
    first_committed,
    read_range,
    scan_back,
    tail_reader,
)
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION


def test_a_range_read_to_its_end_or_abandoned_leaves_the_reader_unassigned(local_stack, unique):
    bootstrap = local_stack.bootstrap(DESTINATION)
    topic = unique("tail")
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    reader = tail_reader({"bootstrap.servers": bootstrap}, unique("g"))
    tp = TopicPartition(topic, 0)
    try:
        assert [m.offset() for m in read_range(reader, tp, 4, None)] == list(range(4, 10))
        assert reader.assignment() == []

        abandoned = read_range(reader, tp, 0, 8)
        assert next(abandoned).offset() == 0
        assert reader.assignment() != []  # assigned while the read goes on
        abandoned.close()
        assert reader.assignment() == []
    finally:
        reader.close()


def test_the_first_committed_record_skips_aborted_transactions(local_stack, unique):
    bootstrap = local_stack.bootstrap(DESTINATION)
    topic = unique("aborted")
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("t")})
    producer.init_transactions(30)

    def transaction(count: int, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, b"%d" % i, partition=0)
        assert producer.flush(30) == 0  # an abort purges what was not yet sent
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    reader = tail_reader({"bootstrap.servers": bootstrap}, unique("g"))
    tp = TopicPartition(topic, 0)
    try:
        transaction(3, commit=False)  # offsets 0-2, its abort marker at 3
        deadline = time.monotonic() + 30
        while reader.get_watermark_offsets(tp, timeout=10)[1] < 4:
            assert time.monotonic() < deadline, "the abort marker never came"
            time.sleep(0.1)
        assert first_committed(reader, tp, 0) is None
        assert reader.assignment() == []
        transaction(2, commit=True)  # offsets 4-5, its commit marker at 6
        deadline = time.monotonic() + 30
        while reader.get_watermark_offsets(tp, timeout=10)[1] < 7:
            assert time.monotonic() < deadline, "the commit marker never came"
            time.sleep(0.1)
        assert first_committed(reader, tp, 0) == 4
        assert first_committed(reader, tp, 5) == 5
        assert reader.assignment() == []
    finally:
        reader.close()


@pytest.mark.parametrize("read", ["range", "scan back"])
def test_a_read_from_a_broker_that_is_down_gives_up_once_its_owner_stops(read):
    reader = tail_reader({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, "stopping")
    tp = TopicPartition("orders", 0)
    stopping = threading.Event()
    timer = threading.Timer(1.0, stopping.set)
    began = time.monotonic()
    timer.start()
    try:
        with pytest.raises(BrokerError, match="stopping: gave up reading orders partition 0"):
            if read == "range":
                list(read_range(reader, tp, 5, 6, stopping))
            else:
                scan_back(reader, tp, 0, 6, lambda m: m, below_high=True, stopping=stopping)
    finally:
        timer.cancel()
        reader.close()
    took = time.monotonic() - began
    assert took < READ_TIMEOUT / 4, f"gave up after {took:.1f} s"
