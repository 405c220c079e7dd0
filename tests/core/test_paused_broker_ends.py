"""A partition's ends asked of a broker that does not answer fail as a BrokerError.

A writer's resume point starts with the ends of its checkpoint and destination partitions
(:func:`settled_end`). With the destination broker paused (SIGSTOP), the client's
``get_watermark_offsets`` gives up after its timeout with ``_TIMED_OUT``,
``_ALL_BROKERS_DOWN`` or ``_UNKNOWN_PARTITION``; as a raw ``KafkaException`` that reached
a worker as an unknown failure, logged with a traceback (issue 46). As a BrokerError it
keeps the client's code and names the partition and what was asked."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, TopicPartition

from replicator.core.kafka.checkpoints import TAIL_READER_GROUP
from replicator.core.kafka.clients import await_leaders
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.tail import SETTLE_WAIT, settled_end, tail_reader, watermark_reader
from tests.fixtures.stack import DESTINATION
from tests.fixtures.writer import writer_destination

CLIENT_GAVE_UP = {
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._TRANSPORT,
}


def test_ends_asked_of_a_paused_broker_fail_as_a_broker_error(local_stack, unique):
    where = writer_destination(local_stack, unique)
    tp = TopicPartition(where.target.destination_topic, 0)
    await_leaders(local_stack.admin(DESTINATION), tp.topic, 1)  # else _UNKNOWN_PARTITION too
    committed = tail_reader(where.kafka, TAIL_READER_GROUP)
    uncommitted = watermark_reader(where.kafka, TAIL_READER_GROUP)
    try:
        assert settled_end(committed, uncommitted, tp, SETTLE_WAIT) == (0, 0)  # answered
        with local_stack.paused(f"kafka-{DESTINATION}"), pytest.raises(BrokerError) as raised:
            settled_end(committed, uncommitted, tp, SETTLE_WAIT, timeout=1.0)
    finally:
        committed.close()
        uncommitted.close()
    error = raised.value
    assert error.code in CLIENT_GAVE_UP, error
    assert f"{tp.topic} partition 0" in str(error), error
    assert "Failed to get watermark offsets" in str(error), error  # the client's own text
