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


def test_segments_partly_overlapping_a_higher_level_are_merged_and_covered_ones_deleted():
    # 20..29 reaches under the level-1 segment: readers use it (it holds 20..24), so it is
    # merged with the run before it; 30..39 is covered by the level-1 segment: redundant.
    segments = [*tiles(4), seg(25, 79, level=1)]
    plan = plan_partition(segments, rules(min_segment_count=1), NOW)
    assert ranges(plan) == [(1, 0, 29, 3)]
    assert [[c.segment_key.start for c in x.covered] for x in plan.cleanups] == [[30]]
    assert [c.segment_key.start for c in plan.cleanups[0].coverings] == [25]


def test_overlapping_level_0_versions_are_merged_once_and_the_rest_deleted():
    # An egress replay split 0..9 differently: both versions are in the bucket.
    segments = [seg(0, 9), seg(0, 4), seg(5, 9), seg(10, 19), seg(20, 29)]
    plan = plan_partition(segments, rules(), NOW)
    assert ranges(plan) == [(1, 0, 29, 3)]
    assert [(c.segment_key.start, c.segment_key.end) for c in plan.merges[0].inputs] == [
        (0, 9),
        (10, 19),
        (20, 29),
    ]
    assert sorted(c.segment_key.start for x in plan.cleanups for c in x.covered) == [0, 5]


def test_level_0_next_to_a_level_1_version_no_longer_blocks_consolidation():
    # A level-1 segment of 0..9 next to level-0 segments of another split from 5.
    segments = [seg(0, 9, level=1), seg(5, 14), seg(15, 24), seg(25, 34)]
    first = plan_partition(segments, rules(), NOW)
    assert ranges(first) == [(1, 5, 34, 3)]
    merged = [seg(0, 9, level=1), seg(5, 34, level=1)]
    second = plan_partition(merged, rules(min_segment_count=2), NOW, from_level=1, to_level=2)
    assert ranges(second) == [(2, 0, 34, 2)]
