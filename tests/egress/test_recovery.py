"""Egress restarts: a lost Spark checkpoint, and offsets the source no longer holds."""

from __future__ import annotations

import shutil
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from egress.catalog import SourceCatalog
from egress.errors import EgressFailedError
from egress.job import EgressJob, with_run_state
from egress.metrics import EgressMetrics
from replicator.core.segments.key import topic_descriptor_s3_key
from tests.fixtures.egress import create_topic, last_run_state
from tests.fixtures.independent import assert_tiles, read_partition, s3_segments, watermarks
from tests.fixtures.stack import SOURCE


def produce(stack, topic, count, partitions=(0, 1)):
    producer = Producer({"bootstrap.servers": stack.bootstrap(SOURCE), "linger.ms": 5})
    for i in range(count):
        producer.produce(
            topic, key=b"%d" % i, value=b"value-%d" % i, partition=partitions[i % len(partitions)]
        )
    producer.flush(30)


def run(config, spark):
    return EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()


def keys_by_partition(local_stack, config, topic):
    found = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)
    return {p: [(s.start, s.end) for s in segs] for p, segs in found.items()}, found


def test_lost_checkpoint_resumes_after_what_was_exported(local_stack, egress_config, unique, spark):
    topic = unique("ckpt")
    create_topic(local_stack, topic, 2)
    produce(local_stack, topic, 100)
    config, _ = egress_config({topic: {}})
    run(config, spark)
    first, _ = keys_by_partition(local_stack, config, topic)

    produce(local_stack, topic, 60)
    shutil.rmtree(config.egress.checkpoint_location)
    run(config, spark)

    ranges, segments = keys_by_partition(local_stack, config, topic)
    for partition in (0, 1):
        assert ranges[partition][: len(first[partition])] == first[partition]
        new = ranges[partition][len(first[partition]) :]
        assert new and new[0][0] == first[partition][-1][1] + 1, "only the new records"
        assert_tiles(segments[partition], 0, new[-1][1])
        exported = [r for s in segments[partition] for r in s.records()]
        assert exported == read_partition(local_stack.bootstrap(SOURCE), topic, partition)


def test_lost_checkpoint_and_lost_group_offsets_still_never_overlap(
    local_stack, egress_config, unique, spark
):
    # The bucket itself says how far egress got: a new consumer group changes nothing.
    topic = unique("ckpt2")
    create_topic(local_stack, topic, 2)
    produce(local_stack, topic, 50)
    config, _ = egress_config({topic: {}})
    run(config, spark)
    produce(local_stack, topic, 20)
    shutil.rmtree(config.egress.checkpoint_location)
    config, _ = egress_config({topic: {}}, group_id=unique("fresh-group"))
    run(config, spark)
    _, segments = keys_by_partition(local_stack, config, topic)
    for partition in (0, 1):
        assert_tiles(segments[partition], 0, segments[partition][-1].end)
        exported = [r for s in segments[partition] for r in s.records()]
        assert exported == read_partition(local_stack.bootstrap(SOURCE), topic, partition)


def recreate_shorter(local_stack, config, topic, count):
    """A log that lost its end (no broker operation truncates a log's end), so the topic
    is re-created shorter and the topic id egress recorded is
    forgotten — the same topic as far as egress can tell (a re-created topic it can tell
    apart is held as another generation: ``test_recreated_topic``)."""
    admin = local_stack.admin(SOURCE)
    admin.delete_topics([topic])[topic].result(timeout=30)
    create_topic(local_stack, topic, 2)
    produce(local_stack, topic, count)
    store = local_stack.store(SOURCE, config.bucket(SOURCE))
    key = topic_descriptor_s3_key("data", SOURCE, topic)
    descriptor = store.get_json(key)
    assert descriptor.pop("topic_id", None) is not None
    store.put_json(key, descriptor)


def test_offsets_the_source_no_longer_holds_stop_egress_with_the_range(
    local_stack, egress_config, unique, spark
):
    topic = unique("loss")
    create_topic(local_stack, topic, 2)
    produce(local_stack, topic, 80)
    config, _ = egress_config({topic: {}})
    run(config, spark)
    recreate_shorter(local_stack, config, topic, 10)

    with pytest.raises(
        EgressFailedError,
        match=rf"data loss: topic {topic} partition 0: the log ends at offset 5 "
        "but egress already exported up to 39",
    ):
        run(config, spark)
    events = last_run_state(config).data_loss_events()
    assert {(e["topic"], e["partition"], e["first"], e["last"]) for e in events} >= {
        (topic, 0, 0, 4)
    }
    metrics = {
        m.name: m
        for m in EgressMetrics(
            with_run_state(config, last_run_state(config).directory), SourceCatalog(config)
        ).collect()
    }
    samples = metrics["replicator_egress_data_loss_events"].samples
    assert any(s.labels["topic"] == topic and s.value >= 1 for s in samples)


def test_skip_continues_without_going_back(local_stack, egress_config, unique, spark):
    topic = unique("skip")
    create_topic(local_stack, topic, 2)
    produce(local_stack, topic, 80)
    config, _ = egress_config({topic: {}}, on_data_loss="skip")
    run(config, spark)
    before, _ = keys_by_partition(local_stack, config, topic)
    recreate_shorter(local_stack, config, topic, 10)
    run(config, spark)  # reports, exports nothing below what was exported
    assert keys_by_partition(local_stack, config, topic)[0] == before
    assert last_run_state(config).data_loss_events()

    produce(local_stack, topic, 100)  # the new log grows past the old position
    run(config, spark)
    after, segments = keys_by_partition(local_stack, config, topic)
    for partition in (0, 1):
        assert after[partition][: len(before[partition])] == before[partition]
        assert_tiles(segments[partition], 0, after[partition][-1][1])


def delete_below(local_stack, topic: str, partition: int, offset: int) -> None:
    """DeleteRecords: the broker moves the partition's log start to ``offset``."""
    admin = local_stack.admin(SOURCE)
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    futures[TopicPartition(topic, partition, offset)].result(timeout=30)


def expire_by_retention(local_stack, topic: str) -> None:
    """A tiny ``retention.ms`` and ``segment.ms``: the broker's retention deletes every
    record (the log start reaches the log end), as a source whose retention passed egress
    would; the topic keeps its retention afterwards."""
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "100", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", "100", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin = local_stack.admin(SOURCE)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def log_start(local_stack, topic: str, partition: int) -> int:
    return watermarks(local_stack.bootstrap(SOURCE), topic, partition)[0]


@pytest.mark.parametrize("deletion", ["DeleteRecords", "retention"])
def test_records_deleted_at_the_source_before_egress_read_them_are_reported_as_a_range(
    local_stack, egress_config, unique, spark, deletion
):
    topic = unique("deleted")
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, 50, partitions=(0,))
    config, _ = egress_config({topic: {}}, on_data_loss="skip")
    run(config, spark)  # exports 0..49
    produce(local_stack, topic, 50, partitions=(0,))  # 50..99, then gone before egress runs
    if deletion == "DeleteRecords":
        delete_below(local_stack, topic, 0, 80)
        lost_last, kept = 79, list(range(80, 100))
    else:
        expire_by_retention(local_stack, topic)
        deadline = time.monotonic() + 60
        while log_start(local_stack, topic, 0) < 100:
            assert time.monotonic() < deadline, "retention did not delete the records"
            time.sleep(0.5)
        lost_last, kept = 99, []

    run(config, spark)
    events = last_run_state(config).data_loss_events()
    assert {(e["topic"], e["partition"], e["first"], e["last"]) for e in events} == {
        (topic, 0, 50, lost_last)
    }
    _, segments = keys_by_partition(local_stack, config, topic)
    assert_tiles(segments[0], 0, 99 if kept else lost_last)
    lost = [s for s in segments[0] if s.start == 50]
    assert len(lost) == 1 and lost[0].end == lost_last and lost[0].table.num_rows == 0
    store = local_stack.store(SOURCE, config.bucket(SOURCE))
    footer = store.open(
        next(s for s in store.list_segments(SOURCE, topic, 0) if s.segment_key.start == 50)
    ).footer
    assert footer.source_data_loss  # ingress reports it when it replays the range
    exported = [r[0] for s in segments[0] for r in s.records()]
    assert exported == list(range(50)) + kept


def test_records_deleted_at_the_source_stop_egress_naming_the_range_with_fail(
    local_stack, egress_config, unique, spark
):
    topic = unique("deleted")
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, 50, partitions=(0,))
    config, _ = egress_config({topic: {}})  # on_data_loss = "fail", the default
    run(config, spark)
    produce(local_stack, topic, 50, partitions=(0,))
    delete_below(local_stack, topic, 0, 80)
    with pytest.raises(EgressFailedError, match=rf"data loss: topic {topic} partition 0"):
        run(config, spark)
    events = last_run_state(config).data_loss_events()
    assert {(e["topic"], e["partition"], e["first"], e["last"]) for e in events} == {
        (topic, 0, 50, 79)
    }
    _, segments = keys_by_partition(local_stack, config, topic)
    assert segments[0][-1].end == 49  # nothing after the loss was exported
