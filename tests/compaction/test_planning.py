from datetime import UTC, datetime

import pytest

from compaction.planning import plan_partition
from replicator.core.config import CompactionTopicConfig
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import StoredSegment

NOW = 1_800_000_000.0
OLD = datetime.fromtimestamp(NOW - 7200, UTC)


def seg(start, end, level=0, size=100, modified=OLD):
    key = SegmentKey("us-east-1", "t", 0, level, start, end)
    return StoredSegment(key, key.to_s3_key("data"), size, modified)


def tiles(count, size=100, level=0, width=10):
    return [seg(i * width, i * width + width - 1, level, size) for i in range(count)]


def rules(**overrides):
    base = dict(
        min_level=0,
        max_level=0,
        min_segment_age=3600,
        min_segment_count=3,
        min_segment_bytes=10**9,
        max_segment_count=1000,
        max_segment_bytes=10**12,
    )
    return CompactionTopicConfig(**{**base, **overrides})


def ranges(plan):
    return [(m.output.level, m.output.start, m.output.end, len(m.inputs)) for m in plan.merges]


def test_contiguous_level_0_segments_merge_into_one_level_1_segment():
    assert ranges(plan_partition(tiles(5), rules(), NOW)) == [(1, 0, 49, 5)]


def test_min_count_holds_back_too_few_inputs():
    plan = plan_partition(tiles(2), rules(), NOW)
    assert plan.merges == [] and "below min_segment_count" in plan.skipped[0]


def test_min_bytes_alone_is_enough():
    assert ranges(plan_partition(tiles(2, size=600), rules(min_segment_bytes=1000), NOW)) == [
        (1, 0, 19, 2)
    ]


def test_max_count_cuts_runs():
    plan = plan_partition(tiles(7), rules(max_segment_count=3, min_segment_count=1), NOW)
    assert ranges(plan) == [(1, 0, 29, 3), (1, 30, 59, 3), (1, 60, 69, 1)]


def test_max_bytes_cuts_runs_without_splitting_inputs():
    plan = plan_partition(
        tiles(5, size=400), rules(max_segment_bytes=1000, min_segment_count=1), NOW
    )
    assert ranges(plan) == [(1, 0, 19, 2), (1, 20, 39, 2), (1, 40, 49, 1)]


def test_min_age_keeps_young_segments_and_everything_after_them():
    young = datetime.fromtimestamp(NOW - 60, UTC)
    segments = [*tiles(4), seg(40, 49, modified=young), seg(50, 59)]
    plan = plan_partition(segments, rules(), NOW)
    assert ranges(plan) == [(1, 0, 39, 4)]
    assert "younger than min_segment_age" in plan.skipped[0]


def test_holes_split_runs():
    segments = [*tiles(3), seg(40, 49), seg(50, 59), seg(60, 69)]
    assert ranges(plan_partition(segments, rules(), NOW)) == [(1, 0, 29, 3), (1, 40, 69, 3)]


def test_segments_covered_by_a_higher_level_are_cleaned_not_merged_again():
    merged = seg(0, 29, level=1)
    plan = plan_partition([*tiles(3), merged, seg(30, 39), seg(40, 49), seg(50, 59)], rules(), NOW)
    assert ranges(plan) == [(1, 30, 59, 3)]
    assert [c.segment_key.start for c in plan.cleanups[0].covered] == [0, 10, 20]


def test_manual_consolidation_from_level_1_to_2():
    segments = [*tiles(3, level=1, width=100), *tiles(2, level=0)]
    plan = plan_partition(segments, rules(), NOW, from_level=1, to_level=2)
    assert ranges(plan) == [(2, 0, 299, 3)]


def test_output_level_must_be_above_inputs():
    with pytest.raises(ValueError, match="output level 1 must be above input level 1"):
        plan_partition(tiles(3, level=1), rules(), NOW, from_level=1, to_level=1)


def test_segments_before_a_higher_level_segment_are_still_merged():
    # Parallel merges: a crash can leave 40..79 merged while 0..39 is not.
    segments = [*tiles(4), seg(40, 79, level=1)]
    assert ranges(plan_partition(segments, rules(), NOW)) == [(1, 0, 39, 4)]


def test_segments_partly_overlapping_a_higher_level_are_left_alone():
    segments = [*tiles(4), seg(25, 79, level=1)]
    plan = plan_partition(segments, rules(min_segment_count=1), NOW)
    assert ranges(plan) == [(1, 0, 19, 2)]
