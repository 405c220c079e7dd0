"""Which segment a reader takes next from overlapping segments of any level."""

import random

import pytest

from replicator.core.segments import selection
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.selection import (
    CaughtUp,
    Gap,
    ReadingCursor,
    ReadNext,
    exported_end,
    lowest_start,
    next_step,
    reading_chain,
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


def _chain_by_steps(keys: list[SegmentKey]) -> list[SegmentKey]:
    """The chain as a reader walks it, one next_step at a time."""
    chain: list[SegmentKey] = []
    offset = min((k.start for k in keys), default=0)
    while True:
        step = next_step(offset, keys)
        if isinstance(step, ReadNext):
            chain.append(step.segment)
            offset = step.segment.end + 1
        elif isinstance(step, Gap):
            offset = step.last + 1
        else:
            return chain


@pytest.mark.parametrize("seed", range(40))
def test_the_reading_chain_is_what_next_step_gives_step_by_step(seed):
    rng = random.Random(seed)
    keys = set()
    for _ in range(rng.randrange(0, 60)):
        start = rng.randrange(0, 500)
        keys.add(SegmentKey("r", "t", 0, rng.randrange(0, 3), start, start + rng.randrange(0, 80)))
    listed = sorted(keys, key=lambda k: k.to_s3_key("data"))  # listing order
    assert reading_chain(listed) == _chain_by_steps(listed)


def test_the_reading_chain_of_ten_thousand_segments_is_linear_in_steps():
    keys = [SegmentKey("r", "t", 0, 0, i * 10, i * 10 + 9) for i in range(10_000)]
    keys += [SegmentKey("r", "t", 0, 1, 0, 49_999)]  # a merge over the first half
    chain = reading_chain(keys)
    assert chain[0] == keys[-1] and chain[1] == keys[5_000] and len(chain) == 5_001


@pytest.mark.parametrize("seed", range(40))
def test_the_reading_cursor_steps_as_next_step_does(seed):
    """Through partial reads, skipped gaps and segments appearing and disappearing."""
    rng = random.Random(seed)

    def some_key() -> SegmentKey:
        start = rng.randrange(0, 500)
        return SegmentKey("r", "t", 0, rng.randrange(0, 3), start, start + rng.randrange(0, 80))

    keys = {some_key() for _ in range(rng.randrange(1, 60))}
    cursor = ReadingCursor()
    offset = min(k.start for k in keys)
    for _ in range(200):
        listed = sorted(keys, key=lambda k: k.to_s3_key("data"))  # listing order
        step = cursor.step(offset, listed)
        assert step == next_step(offset, listed), (offset, listed)
        if isinstance(step, ReadNext):
            end = step.segment.end
            partial = offset < end and rng.random() < 0.2
            offset = rng.randint(offset + 1, end) if partial else end + 1
        elif isinstance(step, Gap):
            offset = step.last + 1
        if isinstance(step, CaughtUp) or rng.random() < 0.1:
            if rng.random() < 0.3 and keys:
                keys.discard(rng.choice(sorted(keys)))
            keys.add(some_key())
            cursor.invalidate()


def test_the_reading_cursor_computes_the_chain_once_for_ten_thousand_segments(monkeypatch):
    computed = []
    original = selection.reading_chain

    def counting(segments, from_offset=None):
        computed.append(from_offset)
        return original(segments, from_offset)

    monkeypatch.setattr(selection, "reading_chain", counting)
    keys = [SegmentKey("r", "t", 0, 0, i * 10, i * 10 + 9) for i in range(10_000)]
    cursor, offset, read = ReadingCursor(), 0, 0
    while isinstance(step := cursor.step(offset, keys), ReadNext):
        offset, read = step.segment.end + 1, read + 1
    assert read == 10_000 and computed == [0]  # next_step would scan 10,000 keys per step
