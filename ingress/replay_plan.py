"""What a partition worker reads next, from the segments it knows of. Pure functions.

Segments of any level may overlap (a level-1 merge next to the level-0 inputs it has not
yet deleted). From the next offset to replay, the worker reads the segment that covers it
and reaches furthest; records below the next offset in it are skipped. Because segments
name their covered ranges, offsets that hold no record (compacted away, transaction
markers) are covered like any other: only a real hole in the key space is a gap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from replicator.segment_key import SegmentKey


@dataclass(frozen=True)
class ReadNext:
    segment: SegmentKey


@dataclass(frozen=True)
class Gap:
    """Offsets [first, last] are covered by no known segment, but later ones exist."""

    first: int
    last: int


@dataclass(frozen=True)
class CaughtUp:
    pass


Step = ReadNext | Gap | CaughtUp


def next_step(next_offset: int, segments: Iterable[SegmentKey]) -> Step:
    best: SegmentKey | None = None
    later: int | None = None
    for segment in segments:
        if segment.end < next_offset:
            continue
        if segment.start <= next_offset:
            if best is None or (segment.end, segment.level) > (best.end, best.level):
                best = segment
        elif later is None or segment.start < later:
            later = segment.start
    if best is not None:
        return ReadNext(best)
    if later is not None:
        return Gap(next_offset, later - 1)
    return CaughtUp()


def lowest_start(segments: Iterable[SegmentKey]) -> int | None:
    starts = [s.start for s in segments]
    return min(starts) if starts else None


def retry_intervals(retries: int, timeout: float) -> list[float]:
    """Waits between re-listings of a late segment: doubling, adding up to ``timeout``.

    With 5 retries over 1 h: 1m56s, 3m52s, 7m45s, 15m29s, 30m58s.
    """
    if retries <= 0:
        return [timeout]
    unit = timeout / (2**retries - 1)
    return [unit * 2**i for i in range(retries)]
