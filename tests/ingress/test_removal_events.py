"""Removal events (compaction deleting what it merged) cost a partition a listing only
when they touch what it has not replayed yet, and one listing for all those drained
together: after a compaction of thousands of segments, re-listing per event made the
work quadratic in the number of segments."""

from __future__ import annotations

from ingress.segment_events import REMOVED, SegmentEvent
from ingress.worker import PartitionWorker
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.segments.key import SegmentKey
from tests.fixtures.worker import REGION, TOPIC, MemorySegments, config, memory_worker


def worker_with_removals(
    segments: MemorySegments, writer: MemoryWriter, removed: list[tuple[int, int]]
) -> PartitionWorker:
    settings = config("fail")
    worker = memory_worker(settings, segments, writer)
    for start, end in removed:  # queued before the worker's first look at its events
        s3_key = SegmentKey(REGION, TOPIC, 0, 0, start, end).to_s3_key(settings.s3.prefix)
        worker.notify(SegmentEvent(REMOVED, s3_key, 0, ""))
    return worker


def test_removals_of_replayed_segments_cost_no_listing():
    replayed = [(s, s + 99) for s in range(0, 1000, 100)]
    segments = MemorySegments([*replayed, (1000, 1099)])
    writer = MemoryWriter(committed=list(range(1000)))  # 0..999 replayed before a restart
    worker_with_removals(segments, writer, replayed).run()
    assert writer.committed == list(range(1100))
    assert segments.listings == 1  # the first listing only (it was 1 + one per event)


def test_removals_of_segments_not_replayed_cost_one_listing_together():
    pending = [(0, 99), (100, 199), (200, 299)]
    segments = MemorySegments(list(pending))
    writer = MemoryWriter()
    worker_with_removals(segments, writer, pending).run()
    assert writer.committed == list(range(300))
    assert segments.listings == 2  # the first, then one for the three removals
