"""A writer resumes only once the transactions open in its destination partition ended.

A transaction's records are invisible to read_committed readers while it is open: a
resume computed at that moment would stop at the last checkpoint, and the records of the
transaction, once it committed, would be in the destination twice. (Found on the stand-in
broker the project used before Apache Kafka, after a kill -9 mid-transaction; on Kafka a
successor's ``init_transactions`` ends its predecessor's transaction first, and another
writer's transaction in a shared checkpoint partition is what the wait still covers.)"""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from replicator.core.kafka.checkpoints import ResumePoint
from replicator.core.kafka.tail import SETTLE_WAIT
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.ingress import segment_batch
from tests.fixtures.writer import writer_destination


def test_a_resume_waits_for_the_open_transaction_to_end(local_stack, unique):
    where = writer_destination(local_stack, unique, checkpoint_partitions=2)
    store, target = where.store, where.target
    writer = PartitionWriter(where.kafka, unique("g"), target, store)
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
