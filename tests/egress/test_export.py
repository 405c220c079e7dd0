"""Egress end to end on the local stack, verified with an independent reader."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from egress.driver_state import DriverState
from egress.job import EgressJob, EgressRun
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import assert_tiles, read_partition, s3_segments, watermarks
from tests.fixtures.records import produce_every_shape as produce_shapes
from tests.fixtures.stack import SOURCE

PARTITIONS = 8


def produce_every_shape(bootstrap: str, topic: str, rounds: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    produce_shapes(producer, topic, PARTITIONS, rounds, lambda r, n: max(r["timestamp"], 0) + n)
    producer.flush(30)


def produce_transactions(
    bootstrap: str, topic: str, transactions: int, transactional_id: str
) -> None:
    """Committed transactions: each leaves a commit marker, so the log has offset gaps."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    for t in range(transactions):
        producer.begin_transaction()
        for partition in range(PARTITIONS):
            for i in range(3):
                producer.produce(
                    topic,
                    key=b"tx-%d-%d" % (t, i),
                    value=b"committed",
                    partition=partition,
                    headers=[("tx", b"%d" % t)],
                )
        producer.commit_transaction(30)


def run_to_end(config, spark) -> EgressRun:
    return EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()


def test_segments_tile_each_partition_and_hold_exactly_the_committed_records(
    local_stack, egress_config, unique, spark
):
    topic = unique("orders.v1")
    create_topic(local_stack, topic, PARTITIONS)
    bootstrap = local_stack.bootstrap(SOURCE)
    produce_every_shape(bootstrap, topic, rounds=20)
    produce_transactions(bootstrap, topic, transactions=4, transactional_id=unique("tx"))
    produce_every_shape(bootstrap, topic, rounds=5)

    config, _ = egress_config({topic: {"max_segment_messages": 75}})

    run_to_end(config, spark)

    segments = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)
    assert sorted(segments) == list(range(PARTITIONS))
    for partition in range(PARTITIONS):
        low, high = watermarks(bootstrap, topic, partition)
        parts = segments[partition]
        assert all(s.level == 0 for s in parts)
        assert_tiles(parts, low, high - 1)
        source = read_partition(bootstrap, topic, partition)
        exported = [r for s in parts for r in s.records()]
        assert exported == source, f"partition {partition} differs from the source"
        offsets = [r[0] for r in source]
        assert offsets[-1] - offsets[0] + 1 > len(offsets), "expected transaction-marker gaps"
        assert all(s.end - s.start + 1 <= 75 for s in parts)


def test_descriptor_statistics_and_group_offsets_are_published(
    local_stack, egress_config, unique, spark
):
    topic = unique("described")
    create_topic(
        local_stack, topic, 2, **{"cleanup.policy": "compact", "max.message.bytes": "2000000"}
    )
    bootstrap = local_stack.bootstrap(SOURCE)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * 10, partition=i % 2)
    producer.flush(30)
    config, _ = egress_config({topic: {}})

    run = run_to_end(config, spark)

    s3 = local_stack.s3()
    descriptor = s3.get_object(
        Bucket=config.bucket(SOURCE), Key=f"data/{SOURCE}/{topic}/_topic.json"
    )["Body"].read()
    import json

    data = json.loads(descriptor)
    assert data["partitions"] == 2
    assert data["configs"]["cleanup.policy"] == "compact"
    assert data["configs"]["max.message.bytes"] == "2000000"
    assert data["export_start"] == {"0": 0, "1": 0}
    _, stats = DriverState(run.state_dir).read_partitions()
    assert stats[(topic, 0)].records == 20 and stats[(topic, 1)].records == 20
    # Spark's input rows are the segments written (records never cross into Spark).
    written = s3_segments(s3, config.bucket(SOURCE), "data", SOURCE, topic)
    assert run.segments == sum(len(parts) for parts in written.values())
    assert run.records == 40
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": config.egress.group_id})
    committed = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    consumer.close()
    assert [tp.offset for tp in committed] == [20, 20]

    # Where the export started is kept when the first segments are gone (expired) and a
    # new run exports more.
    first = local_stack.store(SOURCE, config.bucket(SOURCE)).list_segments(SOURCE, topic, 0)
    s3.delete_object(Bucket=config.bucket(SOURCE), Key=first[0].s3_key)
    for i in range(4):
        producer.produce(topic, key=b"n%d" % i, value=b"v", partition=i % 2)
    producer.flush(30)
    run_to_end(config, spark)
    again = json.loads(
        s3.get_object(Bucket=config.bucket(SOURCE), Key=f"data/{SOURCE}/{topic}/_topic.json")[
            "Body"
        ].read()
    )
    assert again["export_start"] == {"0": 0, "1": 0}


def test_missing_topic_is_a_clear_error(local_stack, egress_config, unique, spark):
    config, _ = egress_config({unique("nope"): {}})
    from replicator.core.kafka.errors import BrokerError

    with pytest.raises(BrokerError, match=r"topics nope-\S+ do not exist in region us-east-1"):
        run_to_end(config, spark)
