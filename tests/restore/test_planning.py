"""Restore planning and reporting, pure."""

from __future__ import annotations

import pytest

from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import StoredSegment
from restore.planning import parse_until, plan_partition, segments_from
from restore.report import progress_line


def stored(start: int, end: int, level: int = 0, storage_class: str | None = None) -> StoredSegment:
    key = SegmentKey("us-east-1", "t", 0, level, start, end)
    return StoredSegment(key, f"k/{level}/{start}-{end}", 100, None, "e", storage_class)


def test_overlapping_levels_are_read_as_ingress_reads_them():
    listed = [stored(0, 9), stored(10, 19), stored(0, 19, level=1), stored(20, 29)]
    plan = plan_partition("t", 0, listed, 0)
    assert [(s.level, s.start, s.end) for s in plan.segments] == [(1, 0, 19), (0, 20, 29)]
    assert (plan.start, plan.end, plan.gap) == (0, 30, None)
    assert [s.start for s in segments_from(plan, 25)] == [20]


def test_the_plan_starts_where_the_export_started_and_stops_before_a_gap():
    listed = [stored(10, 19), stored(30, 39)]
    missing_first = plan_partition("t", 0, listed, 0)
    assert (missing_first.end, missing_first.gap, missing_first.segments) == (0, (0, 9), [])
    middle = plan_partition("t", 0, listed, None)
    assert (middle.start, middle.end, middle.gap) == (10, 20, (20, 29))


def test_archived_classes_are_named_and_glacier_ir_is_readable():
    plan = plan_partition(
        "t",
        0,
        [stored(0, 9, storage_class="GLACIER_IR"), stored(10, 19, storage_class="DEEP_ARCHIVE")],
        0,
    )
    assert [s.s3_key for s in plan.archived] == ["k/0/10-19"]
    assert plan.segments[0].storage_class == "GLACIER_IR"


def test_an_empty_partition_plans_nothing():
    plan = plan_partition("t", 3, [], None)
    assert (plan.start, plan.end, plan.segments) == (0, 0, [])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1700000000000", 1_700_000_000_000),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T23:13:20.5+01:00", 1_700_000_000_500),
    ],
)
def test_until_accepts_epoch_ms_and_iso_with_a_zone(text, expected):
    assert parse_until(text) == expected


@pytest.mark.parametrize(
    "text",
    ["2023-11-14T22:13:20", "yesterday", "-5", "\u0661\u0662\u0663"],  # Arabic-Indic 123
)
def test_until_without_a_zone_or_unparseable_is_refused(text):
    with pytest.raises(ValueError, match="--until"):
        parse_until(text)


def test_progress_line_shows_share_bytes_and_eta():
    line = progress_line("orders", 250, 1000, 4 * 1024**2, 30.0)
    assert "[#####...............]  25%" in line
    assert "offsets 250/1,000 (~1.0MiB of 4.0MiB) ETA 30s" in line
