"""The partition worker's gap handling, against an in-memory segment listing and the
in-memory writer: no Kafka, no S3. A gap is a range no segment covers while later segments
exist; the worker waits for it (late segment), then halts or skips (lost segment)."""

from __future__ import annotations

import time

import pytest

from ingress.replay_plan import late_segment_wait, retry_intervals
from ingress.segment_events import CREATED, SegmentEvent
from ingress.worker import ExportStart
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.segments.key import SegmentKey
from tests.fixtures.worker import REGION, TOPIC, MemorySegments, config, memory_worker, run_worker


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


def test_events_of_later_segments_do_not_use_up_the_wait_for_a_late_one():
    """While offsets 10..19 are late, later segments keep arriving, each with its event (an
    export goes on): the worker looks again at each, but gives the late segment up only
    once ``lost_segment_timeout`` has passed since it was first missed, however many
    events woke it. It arrives after a third of the timeout and is replayed in order;
    with ``skip``, giving it up early would lose its offsets for good."""
    segments = MemorySegments([(0, 9), (20, 29)])
    writer = MemoryWriter()
    worker = memory_worker(config("skip", lost_segment_timeout="3s"), segments, writer)
    worker.start()
    for start in range(30, 330, 10):  # one event every 50 ms for 1.5 s
        segments.present.append((start, start + 9))
        s3_key = SegmentKey(REGION, TOPIC, 0, 0, start, start + 9).to_s3_key("data")
        worker.notify(SegmentEvent(CREATED, s3_key, 1, "2026-01-01T00:00:00Z"))
        time.sleep(0.05)
    segments.present.append((10, 19))
    worker.join(10)
    assert not worker.is_alive()
    assert worker.status.state == "done", worker.status
    assert writer.committed == list(range(30))


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


def test_the_first_replay_starts_where_the_export_started_even_if_that_segment_is_late():
    # The backlog's first segment reaches the bucket last: the worker sees (10, 19) first.
    segments = MemorySegments([(10, 19)], appear={3: [(0, 9)]})
    writer = MemoryWriter()
    worker = run_worker(config("fail"), segments, writer, export_start=ExportStart(True, 0))
    assert worker.status.state == "done", worker.status
    assert writer.committed == list(range(20))


def test_a_first_segment_that_never_arrives_is_a_lost_segment():
    segments = MemorySegments([(10, 19)])
    writer = MemoryWriter()
    worker = run_worker(config("fail"), segments, writer, export_start=ExportStart(True, 0))
    assert worker.status.state == "halted" and "offsets 0..9" in worker.status.reason
    assert writer.committed == []


def test_without_a_recorded_export_start_the_lowest_segment_present_is_the_start():
    # Descriptors of egress versions that did not record export starts.
    segments = MemorySegments([(10, 19)], appear={3: [(0, 9)]})
    writer = MemoryWriter()
    run_worker(config("fail"), segments, writer, export_start=ExportStart(False, None))
    assert writer.committed == list(range(10, 20))


def test_a_resume_point_beyond_every_listed_segment_halts_instead_of_skipping():
    # A forged checkpoint says 1000 while the bucket holds offsets 0..29.
    segments = MemorySegments([(0, 9), (10, 19), (20, 29)])
    writer = MemoryWriter(checkpoints=[1000])
    worker = run_worker(config("skip"), segments, writer)
    assert worker.status.state == "halted"
    assert "resumes at source offset 1000, beyond the last offset in the bucket (29)" in (
        worker.status.reason
    )
    assert writer.committed == [] and "beyond" in writer.halted


def test_a_resume_point_at_the_end_of_the_listed_segments_is_normal():
    segments = MemorySegments([(0, 9), (10, 19)])
    writer = MemoryWriter(checkpoints=[20])
    worker = run_worker(config("fail"), segments, writer)
    assert worker.status.state == "done" and writer.committed == []


def test_a_late_segment_is_looked_for_at_the_ends_of_its_retry_intervals_from_the_first_miss():
    # 2 retries over 3 s: looks at 1 s and 3 s after the first miss, then lost.
    assert late_segment_wait(2, 3.0, 0.0) == pytest.approx(1.0)
    assert late_segment_wait(2, 3.0, 0.4) == pytest.approx(0.6)  # woken early by an event
    assert late_segment_wait(2, 3.0, 1.0) == pytest.approx(2.0)
    assert late_segment_wait(2, 3.0, 2.9) == pytest.approx(0.1)
    assert late_segment_wait(2, 3.0, 3.0) is None
    assert late_segment_wait(0, 3.0, 2.9) == pytest.approx(0.1)
    assert late_segment_wait(0, 3.0, 3.5) is None
