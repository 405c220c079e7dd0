"""The partition worker's gap handling, against an in-memory segment listing and the
in-memory writer: no Kafka, no S3. A gap is a range no segment covers while later segments
exist; the worker waits for it (late segment), then halts or skips (lost segment)."""

from __future__ import annotations

import pytest

from ingress.replay_plan import retry_intervals
from ingress.worker import ExportStart
from replicator.core.kafka.testing import MemoryWriter
from tests.fixtures.worker import MemorySegments, config, run_worker


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
