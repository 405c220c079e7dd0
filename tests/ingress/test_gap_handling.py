"""The partition worker's gap handling, against an in-memory segment listing and the
in-memory writer: no Kafka, no S3. A gap is a range no segment covers while later segments
exist; the worker waits for it (late segment), then halts or skips (lost segment)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from ingress.metrics import IngressMetrics
from ingress.replay_plan import retry_intervals
from ingress.worker import PartitionWorker
from replicator.core.config import Config, parse_config
from replicator.core.kafka.checkpoints import WriteTarget
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.segments.format import SCHEMA
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import StoredSegment

REGION, TOPIC = "us-east-1", "orders"


def config(on_lost_segment: str, lost_segment_timeout: str = "0.3s") -> Config:
    return parse_config(
        f"""
[regions.us-east-1]
bucket = "east"
kafka.bootstrap_servers = "127.0.0.1:1"
[regions.us-west-1]
bucket = "west"
sqs_queue = "events"
kafka.bootstrap_servers = "127.0.0.1:2"
[ingress]
region = "us-west-1"
on_lost_segment = "{on_lost_segment}"
relist_interval = "0.05s"
[[ingress.sources]]
region = "{REGION}"
topic = "{TOPIC}"
first_segment_delay = "0s"
late_segment_retries = 2
lost_segment_timeout = "{lost_segment_timeout}"
""",
        "test.toml",
        {},
    )


def records(start: int, end: int) -> pa.Table:
    """Records at offsets start..end (inclusive), segment schema."""
    n = end - start + 1
    return pa.table(
        {
            "offset": list(range(start, end + 1)),
            "timestamp": [datetime(2026, 1, 1, tzinfo=UTC)] * n,
            "timestamp_type": [1] * n,
            "key": [None] * n,
            "value": [b"v"] * n,
            "headers": [[]] * n,
        },
        schema=SCHEMA,
    )


@dataclass
class _Reader:
    table: pa.Table

    def iter_tables(self) -> Iterator[pa.Table]:
        yield self.table


@dataclass
class MemorySegments:
    """A partition's listing; ``appear`` lists segments that show up at a later listing."""

    present: list[tuple[int, int]]
    appear: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    listings: int = 0

    def list_segments(self, region: str, topic: str, partition: int) -> list[StoredSegment]:
        self.listings += 1
        self.present += self.appear.pop(self.listings, [])
        return [
            StoredSegment(
                SegmentKey(region, topic, partition, 0, start, end),
                f"{region}/{topic}/{partition}/{start}-{end}",
                1,
                datetime(2026, 1, 1, tzinfo=UTC),
            )
            for start, end in sorted(self.present)
        ]

    def open(self, segment: StoredSegment) -> _Reader:
        return _Reader(records(segment.segment_key.start, segment.segment_key.end))


def run_worker(config: Config, segments: MemorySegments, writer: MemoryWriter) -> PartitionWorker:
    ingress = config.ingress
    assert ingress is not None
    opened: list[WriteTarget] = []

    def open_writer(target: WriteTarget) -> MemoryWriter:
        opened.append(target)
        return writer

    worker = PartitionWorker(
        config,
        ingress.sources[0],
        0,
        IngressMetrics(),
        open_writer=open_writer,
        segments=segments,
        stop_at_end=True,
        read_slots=threading.BoundedSemaphore(1),
    )
    worker.run()  # in this thread: --stop-at-end returns when done or halted
    assert [t.source.origin for t in opened] == [REGION]
    return worker


def test_a_late_segment_is_waited_for_and_replayed_in_order():
    segments = MemorySegments([(0, 9), (20, 29)], appear={3: [(10, 19)]})
    writer = MemoryWriter()
    worker = run_worker(config("fail"), segments, writer)
    assert worker.status.state == "done", worker.status
    assert writer.committed == list(range(30))
    assert writer.checkpoints[-1] == 30 and writer.closed


def test_a_lost_segment_halts_the_partition_after_the_retries_and_says_where():
    segments = MemorySegments([(0, 9), (20, 29)])
    writer = MemoryWriter()
    worker = run_worker(config("fail"), segments, writer)
    assert worker.status.state == "halted"
    assert "offsets 10..19" in worker.status.reason
    assert writer.committed == list(range(10))  # nothing after the gap
    assert "lost segment" in writer.halted and writer.checkpoints[-1] == 10
    # the first listing, then one per retry (2), then the decision
    assert segments.listings == 1 + 2


def test_a_lost_segment_is_skipped_when_configured_and_the_rest_replays():
    segments = MemorySegments([(0, 9), (20, 29)])
    writer = MemoryWriter()
    worker = run_worker(config("skip"), segments, writer)
    assert worker.status.state == "done"
    assert writer.committed == [*range(10), *range(20, 30)]
    assert writer.halted == ""


@pytest.mark.parametrize("resume_at", [5, 10])
def test_a_resumed_worker_writes_nothing_below_its_resume_point(resume_at):
    segments = MemorySegments([(0, 9), (10, 19)])
    writer = MemoryWriter(committed=list(range(resume_at)))
    run_worker(config("fail"), segments, writer)
    assert writer.committed == list(range(20))
    assert writer.opened == 1


def test_retry_intervals_double_and_add_up_to_the_timeout():
    intervals = retry_intervals(5, 3600.0)
    assert intervals == pytest.approx([3600 / 31 * 2**i for i in range(5)])
    assert sum(intervals) == pytest.approx(3600.0)
    assert retry_intervals(0, 60.0) == [60.0]
