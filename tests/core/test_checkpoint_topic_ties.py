"""A checkpoint describes one destination topic, not a topic name (see
replicator/core/kafka/checkpoints.py), and claims only committed records.

- A destination deleted and created again whose log end has grown past the old
  checkpoint's destination offset (an application's writes, aborted transactions, a
  sibling writer of a merged partition) still finds that checkpoint no resume point: it
  was written into another topic (its topic id says so).
- A checkpoint whose claimed record holds other data (a partition truncated by an unclean
  leader election and written again) is no resume point either.
- A halt recorded after an aborted transaction claims the last committed record, not an
  aborted one.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from confluent_kafka import Producer, TopicPartition

from replicator.core.kafka.checkpoints import (
    Checkpoint,
    foreign_claim,
    other_writer,
    stale_reason,
)
from replicator.core.kafka.errors import DestinationRecreatedError
from replicator.core.kafka.tail import read_range, tail_reader
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.ingress import segment_table as table
from tests.fixtures.relay import recreate_topic
from tests.fixtures.writer import WriterDestination, writer_destination

OLD_ID, NEW_ID = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"


def _checkpoint(destination_offset: int, next_source_offset: int, topic: str = "") -> Checkpoint:
    return Checkpoint(
        "copy", 0, "us-east-1", "orders", next_source_offset, destination_offset, 1.0,
        destination_topic_id=topic,
    )  # fmt: skip


def test_a_checkpoint_of_another_topic_id_is_stale_whatever_the_log_end():
    written_before = _checkpoint(499, 500, OLD_ID)
    assert stale_reason(written_before, OLD_ID, 500) is None
    reason = stale_reason(written_before, NEW_ID, 10_000)
    assert reason is not None and OLD_ID in reason and NEW_ID in reason


def test_without_a_recorded_topic_id_the_log_end_still_decides():
    older_version = _checkpoint(499, 500)
    assert stale_reason(older_version, NEW_ID, 500) is None
    assert stale_reason(older_version, NEW_ID, 499) is not None
    unknown_now = _checkpoint(499, 500, OLD_ID)
    assert stale_reason(unknown_now, "", 500) is None


def test_a_claimed_record_holding_other_data_makes_the_checkpoint_stale():
    checkpoint = _checkpoint(99, 500)
    assert foreign_claim(checkpoint, 99, 499) is None  # its own last record
    assert foreign_claim(checkpoint, 99, 120) is None  # the last one before filtered ones
    assert foreign_claim(checkpoint, 104, None) is None  # compacted away: says nothing
    assert foreign_claim(checkpoint, 99, None) is not None  # another writer's record
    assert foreign_claim(checkpoint, 99, 500) is not None  # written again further on


def _write(where: WriterDestination, group: str, start: int, end: int) -> None:
    writer = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    writer.open()
    writer.write(table(start, end))
    writer.commit(end)
    writer.close()


def _committed_records(where: WriterDestination) -> int:
    """Records a read_committed reader finds in the destination partition."""
    consumer = tail_reader(where.kafka, "replicator-test-check")
    try:
        tp = TopicPartition(where.target.destination_topic, 0)
        return len(list(read_range(consumer, tp, 0, None)))
    finally:
        consumer.close()


def _produce_plain(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"application %d" % i, partition=0)
    assert producer.flush(30) == 0


def test_a_re_created_destination_written_past_the_old_offset_is_refilled(
    local_stack, unique, caplog
):
    where = writer_destination(local_stack, unique)
    group = unique("g")
    _write(where, group, 0, 500)
    topic = where.target.destination_topic
    before = where.store.topic_id(topic)

    recreate_topic(where.bootstrap, topic, 1)
    # An application (or a sibling writer) fills the new topic past offset 499.
    _produce_plain(where.bootstrap, topic, 600)
    assert where.store.topic_id(topic) not in ("", before)

    again = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    with caplog.at_level(logging.WARNING):
        resume = again.open()
    again.close()
    assert resume.next_source_offset is None, (
        f"resumed at source offset {resume.next_source_offset} in a topic that holds none "
        "of this source's records: offsets before it would never reach the new topic"
    )
    assert resume.discarded is not None and resume.discarded.next_source_offset == 500
    assert "earlier topic of this name" in caplog.text


@pytest.mark.parametrize(
    ("filled_by_others", "noticed_by"),
    [(0, "delivered at destination offset 49"), (300, "topic id")],
    ids=["empty", "filled past the writer's offset"],
)
def test_an_open_writer_commits_no_records_into_a_topic_created_again_under_it(
    local_stack, unique, filled_by_others, noticed_by
):
    """Empty, the new topic gives the writer's records offsets below the ones it wrote
    (a log only grows); filled by others past them, only its topic id tells it apart."""
    where = writer_destination(local_stack, unique)
    writer = PartitionWriter(where.kafka, unique("g"), where.target, where.store, kind="relay")
    writer.open()
    writer.write(table(0, 100))
    writer.commit(100)
    recreate_topic(where.bootstrap, where.target.destination_topic, 1)
    _produce_plain(where.bootstrap, where.target.destination_topic, filled_by_others)
    writer.write(table(100, 50))  # continuing from memory: would start the new topic at 100
    with pytest.raises(DestinationRecreatedError, match="created again") as refused:
        writer.commit(150)
    writer.close()
    assert noticed_by in str(refused.value)
    assert _committed_records(where) == filled_by_others


def test_every_checkpoint_names_its_destination_topic_id(local_stack, unique):
    where = writer_destination(local_stack, unique)
    _write(where, unique("g"), 0, 10)
    resume = where.store.resume_point(where.target)
    assert resume.checkpoint is not None
    assert resume.checkpoint.destination_topic_id == where.store.topic_id(
        where.target.destination_topic
    )
    assert resume.destination_topic_id == resume.checkpoint.destination_topic_id


def test_a_checkpoint_whose_claimed_record_is_another_writers_is_no_resume_point(
    local_stack, unique, caplog
):
    """What an unclean leader election leaves: the partition truncated, other records at
    the offsets the checkpoint claims (same topic, same id)."""
    where = writer_destination(local_stack, unique)
    topic = where.target.destination_topic
    _produce_plain(where.bootstrap, topic, 200)
    claims = Checkpoint(
        topic, 0, "us-east-1", "t", 500, 150, 1.0, writer="ingress",
        destination_topic_id=where.store.topic_id(topic),
    )  # fmt: skip
    producer = Producer({**where.kafka, "transactional.id": unique("forger")})
    producer.init_transactions(30)
    producer.begin_transaction()
    where.store.produce(producer, where.target, claims)
    producer.commit_transaction(30)

    with caplog.at_level(logging.WARNING):
        resume = where.store.resume_point(where.target)
    assert resume.next_source_offset is None, (
        f"resumed at source offset {resume.next_source_offset}: the record at destination "
        "offset 150 is not one this source wrote"
    )
    assert "truncated and written again" in caplog.text


def test_a_halt_after_an_abort_claims_the_last_committed_record(local_stack, unique):
    where = writer_destination(local_stack, unique)
    writer = PartitionWriter(where.kafka, unique("g"), where.target, where.store, kind="relay")
    writer.open()
    writer.write(table(0, 100))
    assert writer.commit(100) == 99
    writer.write(table(100, 150))
    writer._producer.flush(30)  # delivered, not committed: the halt comes now
    writer.abort()
    writer.record_halt(100, "a filter failed")
    writer.close()

    resume = where.store.resume_point(where.target)
    assert resume.checkpoint is not None and resume.checkpoint.halted == "a filter failed"
    assert resume.checkpoint.destination_offset == 99, (
        f"the halt checkpoint claims destination offset {resume.checkpoint.destination_offset}, "
        "a record of the aborted transaction"
    )
    assert _committed_records(where) == 100


def test_a_checkpoint_of_another_writer_kind_is_not_its_writers(local_stack, unique, caplog):
    """Ingress wrote source offsets 0..49; then a plain record (no transaction: visible to
    read_committed readers at once) claims to be a relay's checkpoint of the same key,
    source offsets up to 400 done, no destination record: taken as ingress's resume
    point, offsets 50..399 would never be replayed. Ingress resumes after its own."""
    where = writer_destination(local_stack, unique)
    group = unique("g")
    _write(where, group, 0, 50)
    forged = Checkpoint(
        where.target.destination_topic, 0, "us-east-1", "t", 400, -1, 2.0, writer="relay",
        destination_topic_id=where.store.topic_id(where.target.destination_topic),
    )  # fmt: skip
    producer = Producer(where.kafka)
    where.store.produce(producer, where.target, forged)
    assert producer.flush(30) == 0

    again = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    with caplog.at_level(logging.WARNING):
        resume = again.open()
    again.close()
    assert resume.next_source_offset == 50, (
        f"ingress resumes at source offset {resume.next_source_offset}, from a checkpoint "
        "the relay's kind wrote"
    )
    assert resume.checkpoint is not None and resume.checkpoint.writer == "ingress"
    assert "written by relay" in caplog.text


def test_only_a_checkpoint_of_the_readers_own_kind_or_of_no_recorded_kind_is_its():
    mine = replace(_checkpoint(9, 10), writer="ingress")
    assert other_writer(mine, "ingress") is None
    assert other_writer(replace(mine, writer=""), "ingress") is None  # older versions
    reason = other_writer(replace(mine, writer="restore"), "ingress")
    assert reason is not None and "written by restore" in reason
