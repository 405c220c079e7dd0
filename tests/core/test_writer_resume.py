"""What a checkpoint may claim, and what the resume point and offset translation make of
it, on Apache Kafka.

- A commit that carries no records (a segment or read holding only filtered records,
  aborted ones or compacted-away offsets) keeps the destination offset of the last record
  written, even as the first commit of a new writer: a checkpoint claiming "nothing
  written" would win the resume point, and translation would send every group to the
  partition's first offset, marked exact.
- A destination partition deleted and created again is empty: a checkpoint whose
  destination offset lies beyond its log end describes records that are not there, and is
  not a resume point. The writer starts as if nothing had been written, and the records
  are written again.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from replicator.core.groups.destination import OffsetTranslator
from replicator.core.kafka.checkpoints import Checkpoint, furthest
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.ingress import segment_table as table
from tests.fixtures.relay import recreate_topic
from tests.fixtures.writer import writer_destination


def test_a_first_commit_without_records_keeps_the_last_destination_offset(local_stack, unique):
    where = writer_destination(local_stack, unique)
    group = unique("g")
    first = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    first.open()
    first.write(table(0, 100))
    assert first.commit(100) == 99
    first.close()

    # A second run whose records were all filtered out: a commit of no records.
    second = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    second.open()
    last_destination_offset = second.commit(150)
    second.close()

    translated = OffsetTranslator(where.kafka, where.store).translate(where.target, [50, 120])
    assert [(t.destination_offset, t.exact) for t in translated] == [(50, True), (100, True)], (
        "a group committed at source offset 50 must start at the record of source offset "
        f"50, not at {translated[0].destination_offset}"
    )
    assert last_destination_offset == 99
    resume = where.store.resume_point(where.target)
    assert (resume.next_source_offset, resume.destination_offset) == (150, 99)


def test_a_checkpoint_claiming_no_records_does_not_lower_the_destination_offset():
    # Checkpoints an earlier version wrote after a commit without records.
    claims_nothing = Checkpoint("copy", 0, "us-east-1", "o", 150, -1, 1.0)
    resume = furthest(claims_nothing, (99, 99))
    assert (resume.next_source_offset, resume.destination_offset) == (150, 99)


def test_a_re_created_destination_does_not_resume_from_its_stale_checkpoint(
    local_stack, unique, caplog
):
    where = writer_destination(local_stack, unique)
    group = unique("g")
    writer = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    writer.open()
    writer.write(table(0, 500))
    writer.commit(500)
    writer.close()
    # Progress (restore's lines) reads the same checkpoints; a partition without one: None.
    unwritten = replace(where.target, source=replace(where.target.source, partition=1))
    assert where.store.progress([where.target, unwritten]) == {where.target: 500, unwritten: None}

    topic = where.target.destination_topic
    recreate_topic(where.bootstrap, topic, 1)
    assert where.store.progress([where.target]) == {where.target: None}

    again = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    with caplog.at_level(logging.WARNING):
        resume = again.open()
    again.close()
    assert resume.next_source_offset is None, (
        f"resumed at source offset {resume.next_source_offset} in an empty partition"
    )
    assert resume.destination_offset == -1
    assert "not a resume point" in caplog.text
    assert f"{topic} partition 0" in caplog.text
