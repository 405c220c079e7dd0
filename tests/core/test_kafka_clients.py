import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from replicator.core.kafka.clients import (
    client_config,
    consume_available,
    ensure_topic,
    retry_while_moving,
)
from tests.fixtures.records import every_shape
from tests.fixtures.stack import DESTINATION, SOURCE


@pytest.mark.parametrize("region", [SOURCE, DESTINATION])
def test_each_broker_creates_topics_and_round_trips_every_record_shape(local_stack, unique, region):
    topic = unique("roundtrip.topic")
    kafka = local_stack.config.region(region).kafka
    admin = local_stack.admin(region)
    # Not compacted: a compacted topic refuses records without a key.
    assert ensure_topic(admin, topic, 3, {"retention.bytes": "1073741824"}) is True
    assert ensure_topic(admin, topic, 3) is False  # idempotent
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 3

    records = every_shape()
    producer = Producer(client_config(kafka))
    for r in records:
        producer.produce(
            topic,
            key=r["key"],
            value=r["value"],
            partition=1,
            headers=[(h["key"], h["value"]) for h in r["headers"]],
            timestamp=max(r["timestamp"], 0),
        )
    producer.flush(10)
    consumer = Consumer(client_config(kafka, group_id=unique("g"), enable_auto_commit=False))
    consumer.assign([TopicPartition(topic, 1, 0)])
    seen: list[Message] = []
    while len(seen) < len(records):
        message = consumer.poll(10)
        assert message is not None, f"only {len(seen)} of {len(records)} records came back"
        assert message.error() is None
        seen.append(message)
    consumer.close()
    assert [m.key() for m in seen] == [r["key"] for r in records]
    assert [m.value() for m in seen] == [r["value"] for r in records]
    assert [m.headers() or [] for m in seen] == [
        [(h["key"], h["value"]) for h in r["headers"]] for r in records
    ]


def test_a_call_is_repeated_while_the_group_coordinator_moves_and_not_otherwise():
    answers = [KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, None]
    calls = []

    def call() -> str:
        calls.append(1)
        code = answers.pop(0)
        if code is not None:
            raise KafkaException(KafkaError(code))
        return "answered"

    assert retry_while_moving(call, pause=0) == "answered"
    assert len(calls) == 3

    def refused() -> str:
        raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        retry_while_moving(refused, pause=0)

    def never_ready() -> str:
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))

    with pytest.raises(KafkaException):
        retry_while_moving(never_ready, timeout=0.05, pause=0.01)


def test_consume_available_returns_what_is_there_without_waiting_for_a_full_batch(
    local_stack, unique
):
    topic = unique("available")
    kafka = local_stack.config.region(SOURCE).kafka
    assert ensure_topic(local_stack.admin(SOURCE), topic, 1) is True
    producer = Producer(client_config(kafka))
    for i in range(5):
        producer.produce(topic, value=b"%d" % i, partition=0)
    producer.flush(30)
    consumer = Consumer({**client_config(kafka), "group.id": unique("g")})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got: list[Message] = []
        started = time.monotonic()
        while len(got) < 5:
            got += consume_available(consumer, 1000, 60.0)
        # A batch consume of 1,000 would have waited the whole 60 s for the rest.
        assert time.monotonic() - started < 30
        assert [m.value() for m in got] == [b"%d" % i for i in range(5)]
        assert consume_available(consumer, 1000, 0.2) == []
        producer.produce(topic, value=b"5", partition=0)
        producer.flush(30)
        assert [m.value() for m in consume_available(consumer, 1, 60.0)] == [b"5"]
    finally:
        consumer.close()
