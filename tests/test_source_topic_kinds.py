"""Source topics whose broker rewrites them: a compacted topic whose log cleaner runs
between and during exports, and a LogAppendTime topic whose broker stamps every record.
Source Kafka -> egress -> S3 replication -> ingress -> destination Kafka, on Apache Kafka.

The destination is exact when it holds every exported record once, in offset order, with
its key, value, headers and the source's timestamp: for a compacted source that is every
record egress read (some of them cleaned away at the source since), and at least every
record the source still holds."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer

from egress.job import EgressJob
from ingress.service import IngressService
from replicator.core.config import Config, load_config
from replicator.core.kafka import provenance
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import read_partition, s3_segments
from tests.fixtures.pipeline import pipeline_toml, wait_for_replication
from tests.fixtures.stack import DESTINATION, SOURCE, LocalStack

PARTITIONS = 2


def pipeline_config(local_stack: LocalStack, unique, tmp_path: Path, topic: str, copy: str):
    path = tmp_path / "replicator.toml"
    path.write_text(
        pipeline_toml(
            local_stack, unique, tmp_path, topic, copy, topic_limits="max_segment_messages = 50"
        )
    )
    return load_config(path)


def export(config: Config, spark) -> None:
    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()


def replicate_and_replay(local_stack: LocalStack, config: Config, topic: str) -> None:
    """Wait for the replication stand-in to copy every segment, then replay to the end."""
    wait_for_replication(local_stack, topic)
    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0


def without_provenance(headers: tuple) -> tuple:
    return tuple(h for h in headers if h[0] != provenance.HEADER)


def destination_records(local_stack: LocalStack, topic: str, copy: str, partition: int):
    """(source offset, timestamp, key, value, headers) of the destination partition."""
    named = provenance.SourcePartition(SOURCE, topic, partition)
    return [
        (provenance.source_offset(list(r[5]), named), r[1], r[3], r[4], without_provenance(r[5]))
        for r in read_partition(local_stack.bootstrap(DESTINATION), copy, partition)
    ]


def as_replayed(records) -> list[tuple]:
    return [(r[0], r[1], r[3], r[4], r[5]) for r in records]


def test_a_compacted_source_cleaned_between_and_during_exports_arrives_exactly(
    local_stack, unique, spark, tmp_path
):
    topic, copy = unique("accounts"), unique("accounts.copy")
    # The cleaner may clean any closed segment at once: segments roll every 100 ms.
    create_topic(
        local_stack,
        topic,
        PARTITIONS,
        **{
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "100",
        },
    )
    config = pipeline_config(local_stack, unique, tmp_path, topic, copy)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 5})

    def produce_round(round_: int) -> None:
        for i in range(400):
            key = b"account-%02d" % (i % 25)  # 25 keys, each rewritten 16 times a round
            value = None if i % 7 == 0 else b"balance %d/%d" % (round_, i)
            producer.produce(topic, key=key, value=value, partition=i % PARTITIONS)
            if i % 50 == 49:
                producer.flush(30)
                time.sleep(0.15)  # a new segment: the cleaner has closed ones to clean
        producer.flush(30)

    produce_round(0)
    export(config, spark)
    for round_ in (1, 2):
        produce_round(round_)
        export(config, spark)  # the cleaner keeps working while Spark reads
    produce_round(3)

    def cleaned() -> bool:
        holes = 0
        for p in range(PARTITIONS):
            offsets = [r[0] for r in read_partition(local_stack.bootstrap(SOURCE), topic, p)]
            holes += offsets[-1] + 1 - len(offsets)
        return holes > 0

    deadline = time.monotonic() + 60
    while not cleaned():  # the cleaner ran: offsets are missing from the source now
        assert time.monotonic() < deadline, "the log cleaner never cleaned the source"
        time.sleep(0.5)
    export(config, spark)
    replicate_and_replay(local_stack, config, topic)

    exported = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)
    for partition in range(PARTITIONS):
        copied = destination_records(local_stack, topic, copy, partition)
        from_segments = [
            (r[0], r[1], r[3], r[4], r[5]) for s in exported[partition] for r in s.records()
        ]
        assert copied == from_segments, f"partition {partition}: not what egress exported"
        offsets = [r[0] for r in copied]
        assert offsets == sorted(set(offsets)), f"partition {partition}: order or duplicates"
        source_now = as_replayed(read_partition(local_stack.bootstrap(SOURCE), topic, partition))
        held = set(copied)
        assert [r for r in source_now if r not in held] == [], (
            f"partition {partition}: records the source holds are missing in the destination"
        )
        # Some records egress read were cleaned away at the source since: it read a log
        # the cleaner was rewriting, and the destination kept what it read.
        assert len(copied) >= len(source_now)


def test_a_log_append_time_source_keeps_the_brokers_timestamps(
    local_stack, unique, spark, tmp_path
):
    topic, copy = unique("clicks"), unique("clicks.copy")
    create_topic(local_stack, topic, PARTITIONS, **{"message.timestamp.type": "LogAppendTime"})
    config = pipeline_config(local_stack, unique, tmp_path, topic, copy)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 5})
    for i in range(300):
        # The producer's own timestamp is overwritten by the broker's append time.
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % PARTITIONS,
            timestamp=1_000_000_000_000 + i,
            headers=[("n", b"%d" % i)],
        )
    producer.flush(30)
    export(config, spark)
    replicate_and_replay(local_stack, config, topic)
    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
        assert {r[2] for r in source} == {2}  # LogAppendTime
        assert all(r[1] > 1_600_000_000_000 for r in source)  # stamped by the broker
        copied = destination_records(local_stack, topic, copy, partition)
        assert copied == as_replayed(source), f"partition {partition}"
    stamps = read_partition(local_stack.bootstrap(DESTINATION), copy, 0)
    assert {r[2] for r in stamps} == {1}  # CreateTime: the source's stamps, kept
