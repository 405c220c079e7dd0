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

import heapq
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


def reading_chain(
    segments: Iterable[SegmentKey], from_offset: int | None = None
) -> list[SegmentKey]:
    """The segments a reader takes, in order, from ``from_offset`` (default: the lowest
    offset) to the end: what :func:`next_step` gives again and again, past holes (a hole
    moves on to the next segment's start), in O(n log n) rather than the O(n) per step of
    asking :func:`next_step` each time — a partition may hold 10,000 segments.

    Segments are taken in start order into a heap of those that cover the next offset,
    ordered as :func:`next_step` chooses (furthest end, then higher level, then — among
    equals — the lower start, the first in listing order); a segment is dropped for good
    once the next offset passed its end, since the next offset only grows."""
    if from_offset is not None:
        segments = (k for k in segments if k.end >= from_offset)
    pending = sorted(segments, key=lambda k: (k.start, k.level, k.end))
    covering: list[tuple[int, int, int, int, SegmentKey]] = []
    chain: list[SegmentKey] = []
    index = 0
    first = pending[0].start if pending else 0
    offset = from_offset if from_offset is not None else first
    while True:
        while index < len(pending) and pending[index].start <= offset:
            k = pending[index]
            heapq.heappush(covering, (-k.end, -k.level, k.start, index, k))
            index += 1
        while covering and covering[0][4].end < offset:
            heapq.heappop(covering)
        if covering:
            best = covering[0][4]
            chain.append(best)
            offset = best.end + 1
        elif index < len(pending):
            offset = pending[index].start  # a hole: on from the next segment
        else:
            return chain


class ReadingCursor:
    """:func:`next_step` for a reader that asks again and again as its next offset
    advances segment by segment: the chain (:func:`reading_chain`) is computed once per
    change of the segments, then each step costs O(1) — asking :func:`next_step` per
    segment costs O(n) each, O(n²) for a partition replaying n segments. Steps are those
    of :func:`next_step` (the chain's choices at the offsets it reaches are its choices);
    an offset the chain did not expect (a partial read, a skipped gap) recomputes it."""

    def __init__(self) -> None:
        self._chain: list[SegmentKey] | None = None
        self._position = 0
        self._expected = 0
        """The offset the chain's current segment was chosen at."""

    def invalidate(self) -> None:
        """The segments changed."""
        self._chain = None

    def step(self, next_offset: int, segments: Iterable[SegmentKey]) -> Step:
        chain = self._chain
        if chain is not None and self._position < len(chain) and next_offset != self._expected:
            previous = chain[self._position]
            if next_offset == previous.end + 1:  # the segment was read to its end
                self._position += 1
                self._expected = next_offset
            else:
                chain = None
        if chain is None or next_offset != self._expected:
            chain = self._chain = reading_chain(segments, next_offset)
            self._position, self._expected = 0, next_offset
        if self._position >= len(chain):
            return CaughtUp()
        segment = chain[self._position]
        if segment.start <= next_offset:
            return ReadNext(segment)
        return Gap(next_offset, segment.start - 1)


def lowest_start(segments: Iterable[SegmentKey]) -> int | None:
    starts = [s.start for s in segments]
    return min(starts) if starts else None


def exported_end(segments: Iterable[SegmentKey]) -> int | None:
    """The offset after the last one covered by ``segments`` (the half-open end of what
    they hold), or None when there are none."""
    ends = [s.end for s in segments]
    return max(ends) + 1 if ends else None
