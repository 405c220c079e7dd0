"""Opening a segment reads and parses its Parquet footer, which can take many times the
footer's size in memory while it is parsed: ingress opens under a read slot, as it reads
row groups, so ``read_concurrency`` bounds the footers parsed at once however many writers
(``max_open_writers``) are open. In-memory listing and writers: no Kafka, no S3."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ingress.metrics import IngressMetrics
from ingress.worker import PartitionWorker, TableSource
from replicator.core.kafka.checkpoints import WriteTarget
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.segments.store import StoredSegment
from replicator.core.workers import WriterSlots
from tests.fixtures.worker import MemorySegments, config

PARTITIONS = 4


class CountingOpens:
    """A partition's segments whose opening takes a while, counting the opens under way
    at once (over every partition sharing ``opens``)."""

    def __init__(
        self, present: list[tuple[int, int]], opens: dict[str, int], lock: threading.Lock
    ) -> None:
        self.segments = MemorySegments(present)
        self.opens, self.lock = opens, lock

    def list_segments(self, region: str, topic: str, partition: int) -> list[StoredSegment]:
        return self.segments.list_segments(region, topic, partition)

    def open(self, segment: StoredSegment) -> TableSource:
        with self.lock:
            self.opens["now"] += 1
            self.opens["most"] = max(self.opens["most"], self.opens["now"])
        time.sleep(0.1)  # parsing a large footer
        with self.lock:
            self.opens["now"] -= 1
        return self.segments.open(segment)


def writing_into(writer: MemoryWriter) -> Callable[[WriteTarget], MemoryWriter]:
    return lambda _target: writer


def test_segments_are_opened_only_under_a_read_slot():
    cfg = config("fail")
    assert cfg.ingress is not None
    read_slots = threading.BoundedSemaphore(1)
    writer_slots = WriterSlots(PARTITIONS)
    opens = {"now": 0, "most": 0}
    lock = threading.Lock()
    writers = [MemoryWriter() for _ in range(PARTITIONS)]
    workers = []
    for partition, writer in enumerate(writers):
        segments = CountingOpens([(0, 9), (10, 19)], opens, lock)
        workers.append(
            PartitionWorker(
                cfg,
                cfg.ingress.sources[0],
                partition,
                IngressMetrics(),
                open_writer=writing_into(writer),
                segments=segments,
                stop_at_end=True,
                read_slots=read_slots,
                writer_slots=writer_slots,
            )
        )
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert [w.status.state for w in workers] == ["done"] * PARTITIONS
    assert all(w.committed == list(range(20)) for w in writers)
    assert opens["most"] == 1, opens
