"""Which segment to read next from a partition's segments. Pure functions.

Segments of any level may overlap (a level-1 merge next to the level-0 inputs it has not
yet deleted). From the next offset to read, a reader takes the segment that covers it
and reaches furthest, and skips records below the next offset in it. Because segments
name their covered ranges (inclusive), offsets that hold no record (compacted away,
transaction markers) are covered like any other: only a real hole in the key space is a
gap. Ingress replays by these rules, and so does anything else that reads a partition
back (the drill's verification of the archive).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from replicator.core.segments.key import SegmentKey


@dataclass(frozen=True)
class ReadNext:
    segment: SegmentKey


@dataclass(frozen=True)
class Gap:
    """Offsets [first, last] (inclusive) are covered by no known segment, but later ones exist."""

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


def exported_end(segments: Iterable[SegmentKey]) -> int | None:
    """The offset after the last one covered by ``segments`` (the half-open end of what
    they hold), or None when there are none."""
    ends = [s.end for s in segments]
    return max(ends) + 1 if ends else None
