"""Which segment a reader takes next from overlapping segments of any level."""

from replicator.core.segments.key import SegmentKey
from replicator.core.segments.selection import (
    CaughtUp,
    Gap,
    ReadNext,
    exported_end,
    lowest_start,
    next_step,
)


def key(start: int, end: int, level: int = 0) -> SegmentKey:
    return SegmentKey("us-east-1", "orders.v1", 0, level, start, end)


def test_next_step_reads_the_covering_segment_that_reaches_furthest():
    segments = [key(0, 9), key(10, 19), key(0, 99, level=1), key(100, 109)]
    assert next_step(5, segments) == ReadNext(key(0, 99, level=1))
    assert next_step(100, segments) == ReadNext(key(100, 109))


def test_next_step_reports_a_gap_before_later_segments():
    assert next_step(20, [key(0, 19), key(30, 39), key(50, 59)]) == Gap(20, 29)


def test_next_step_caught_up_when_nothing_lies_ahead():
    assert next_step(20, [key(0, 19)]) == CaughtUp()
    assert next_step(0, []) == CaughtUp()


def test_lowest_start_of_the_known_segments():
    assert lowest_start([key(30, 39), key(10, 19, level=1)]) == 10
    assert lowest_start([]) is None


def test_exported_end_is_the_half_open_end_of_the_furthest_segment_at_any_level():
    assert exported_end([key(0, 9), key(0, 99, level=1), key(10, 19)]) == 100
    assert exported_end([]) is None
