"""A writer resumes only once the transactions open in its destination partition ended.

A transaction's records are invisible to read_committed readers while it is open: a
resume computed at that moment would stop at the last checkpoint, and the records of the
transaction, once it committed, would be in the destination twice. (Found on the stand-in
broker the project used before Apache Kafka, after a kill -9 mid-transaction; on Kafka a
successor's ``init_transactions`` ends its predecessor's transaction first, and another
writer's transaction in a shared checkpoint partition or a merged destination partition is
what the wait still covers: it lasts until every transaction open when the resume was
asked for has ended, up to past the transaction timeout.)"""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from replicator.core.kafka.checkpoints import ResumePoint, WriteTarget
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.tail import SETTLE_WAIT
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.ingress import segment_batch
from tests.fixtures.writer import writer_destination


def test_a_resume_waits_for_the_open_transaction_to_end(local_stack, unique):
    where = writer_destination(local_stack, unique, checkpoint_partitions=2)
    store, target = where.store, where.target
    writer = PartitionWriter(where.kafka, unique("g"), target, store, kind="ingress")
    writer.open()
    writer.write(pa.Table.from_batches([segment_batch(0, 1500)]))
    writer.commit(1500)
    writer.write(pa.Table.from_batches([segment_batch(1500, 1500)]))
    writer._producer.flush(30)  # produced, transaction still open

    resumed: list[ResumePoint] = []
    reader = threading.Thread(
        target=lambda: resumed.append(store.resume_point(target, settle=SETTLE_WAIT))
    )
    reader.start()
    time.sleep(2)
    writer.commit(3000)  # the transaction ends while the resume is being computed
    reader.join(60)
    writer.close()
    assert resumed and resumed[0].next_source_offset == 3000, resumed


def test_a_sibling_transaction_open_across_a_commit_does_not_regress_the_resume(
    local_stack, unique
):
    # Two source partitions merged into one destination partition, one checkpoint
    # partition: the sibling's transaction, holding records and a checkpoint, opens
    # before this writer commits and stays open longer than the old 10 s wait (a sibling
    # frozen between its checkpoint and its commit).
    where = writer_destination(local_stack, unique)
    group = unique("g")
    ours = WriteTarget(SourcePartition("us-east-1", "t", 1), where.target.destination_topic, 0)
    writer = PartitionWriter(where.kafka, group, ours, where.store, kind="relay")
    writer.open()
    sibling = PartitionWriter(where.kafka, group, where.target, where.store, kind="relay")
    sibling.open()
    sibling.write(pa.Table.from_batches([segment_batch(0, 10)]))
    sibling._producer.flush(30)
    sibling._checkpoint(10)  # as if it stopped between its checkpoint and its commit
    sibling._producer.flush(30)  # on the broker, its transaction open in both partitions
    writer.write(pa.Table.from_batches([segment_batch(0, 100)]))
    writer.commit(100)
    writer.close()

    threading.Timer(12.0, lambda: sibling.commit(10)).start()
    started = time.monotonic()
    again = PartitionWriter(where.kafka, group, ours, where.store, kind="relay")
    resume = again.open()
    again.close()
    sibling.close()
    assert resume.next_source_offset == 100, (
        f"resumed at {resume.next_source_offset} after committing up to 100: the records "
        "committed behind the sibling's open transaction would be written again"
    )
    assert time.monotonic() - started >= 11.0
