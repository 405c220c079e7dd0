"""bench.latency's per-segment stages, from a Spark checkpoint written as Spark writes it:
each stage is the time between two moments of the segment, and the product's stages are
all of them but the copy between buckets (S3 replication's on AWS), or all of them when
the copy ended before Spark's commit (it then hid inside the batch)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.latency import stage_times
from ingress.segment_events import CREATED, SegmentEvent
from replicator.core.segments.key import SegmentKey

PLANNED, COMMITTED, COPIED, EVENT, READABLE = 100.0, 100.6, 101.1, 101.12, 101.3


def spark_checkpoint(root: Path, batch: int, planned: float, committed: float, ends) -> Path:
    checkpoint = root / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(exist_ok=True)
    metadata = {"batchTimestampMs": int(planned * 1000)}
    offsets = {"offsets": {"bench": {str(p): end for p, end in ends.items()}}}
    lines = ["v1", json.dumps(metadata), json.dumps(offsets)]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines))
    commit = checkpoint / "commits" / str(batch)
    commit.write_text("v1\n{}")
    os.utime(commit, (committed, committed))
    return checkpoint


def test_each_stage_is_the_time_between_two_moments_of_the_segment(tmp_path):
    checkpoint = spark_checkpoint(tmp_path, 3, PLANNED, COMMITTED, {0: 2000})
    segment = SegmentKey("us-east-1", "bench", 0, 0, 1000, 1999)
    s3_key = segment.to_s3_key("data")
    stamp = "1970-01-01T00:01:41.100000Z"  # COPIED
    events = {s3_key: (SegmentEvent(CREATED, s3_key, 10, stamp), EVENT)}
    stages = stage_times(checkpoint, {(0, 1999): READABLE}, events)
    expected = {
        "batch": COMMITTED - PLANNED,
        "to_destination_bucket": COPIED - COMMITTED,
        "notification": EVENT - COPIED,
        "replay": READABLE - EVENT,
        "total": READABLE - PLANNED,
        "product": (READABLE - PLANNED) - (COPIED - COMMITTED),
    }
    assert {name: times for name, times in stages.items()} == {
        name: [pytest.approx(value, abs=1e-6)] for name, value in expected.items()
    }


def test_a_copy_before_sparks_commit_is_not_taken_off_the_products_time(tmp_path):
    checkpoint = spark_checkpoint(tmp_path, 3, PLANNED, COMMITTED, {0: 2000})
    segment = SegmentKey("us-east-1", "bench", 0, 0, 1000, 1999)
    s3_key = segment.to_s3_key("data")
    stamp = "1970-01-01T00:01:40.500000Z"  # copied at 100.5, before the commit at 100.6
    events = {s3_key: (SegmentEvent(CREATED, s3_key, 10, stamp), EVENT)}
    stages = stage_times(checkpoint, {(0, 1999): READABLE}, events)
    assert stages["to_destination_bucket"] == [pytest.approx(-0.1, abs=1e-6)]
    assert stages["product"] == stages["total"] == [pytest.approx(READABLE - PLANNED, abs=1e-6)]


def test_segments_of_batches_planned_before_the_timed_load_are_left_out(tmp_path):
    checkpoint = spark_checkpoint(tmp_path, 3, PLANNED, COMMITTED, {0: 2000})
    segment = SegmentKey("us-east-1", "bench", 0, 0, 1000, 1999)
    s3_key = segment.to_s3_key("data")
    stamp = "1970-01-01T00:01:41.100000Z"
    events = {s3_key: (SegmentEvent(CREATED, s3_key, 10, stamp), EVENT)}
    timed = stage_times(checkpoint, {(0, 1999): READABLE}, events, since=PLANNED)
    assert len(timed["total"]) == 1
    warm = stage_times(checkpoint, {(0, 1999): READABLE}, events, since=PLANNED + 0.001)
    assert all(times == [] for times in warm.values())
