"""A closed writer's client is gone at once, not when Python's cyclic collector runs.

Ingress opens a writer per partition with segments to replay and closes it when another
partition needs the slot (``max_open_writers``); the relay and restore close theirs on the
way out. The producer's error callback is a method of the writer, so writer and producer
form a reference cycle, and the services run the cyclic collector rarely (see
``replicator.core.collector``): at 512 partitions an ingress process held the producers
of ~250 closed writers, over a thousand librdkafka threads, and peaked over 512 MiB."""

from __future__ import annotations

import gc
import os
import time

import pyarrow as pa

from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.ingress import segment_batch
from tests.fixtures.writer import writer_destination


def native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def settled_thread_count(at_most: int, seconds: float = 5.0) -> int:
    """The process's thread count, once it is at most ``at_most`` or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    while (count := native_threads()) > at_most and time.monotonic() < deadline:
        time.sleep(0.1)
    return count


def test_closed_writers_leave_no_client_threads_behind(local_stack, unique):
    where = writer_destination(local_stack, unique)
    # The checkpoint store's one admin client (shared by its writers, for destination
    # topic ids) lives as long as the store: made before counting.
    where.store.topic_id(where.target.destination_topic)
    gc.disable()  # as rare as the services make it: what close() leaves stays
    try:
        before = native_threads()
        for round_ in range(3):
            writer = PartitionWriter(
                where.kafka, unique("g"), where.target, where.store, kind="ingress"
            )
            writer.open()
            writer.write(pa.Table.from_batches([segment_batch(round_ * 10, 10)]))
            writer.commit((round_ + 1) * 10)
            writer.close()
            writer.close()  # closing twice is harmless
            del writer
        # A transactional producer runs four threads or more: three left behind would
        # add twelve.
        assert settled_thread_count(before + 3) <= before + 3, (before, native_threads())
    finally:
        gc.enable()
