"""Which segments a compaction run merges and deletes. Pure functions, no I/O.

Per partition, following the topic's rules: segments with a level in
[``min_level``, ``max_level``], older than ``min_segment_age``, overlapping no segment above
``max_level``, are grouped into runs of contiguous covered ranges; each
run is cut into merges of at most ``max_segment_count`` inputs and ``max_segment_bytes``
(inputs are never split); a merge is written only when it has ``min_segment_count``
inputs or ``min_segment_bytes``. The output covers the first input's start to the last
input's end, one level up (or ``to_level``). Because covered ranges tile, compacted and
transactional topics compact like any other.

Segments already covered by a segment of a higher level are garbage from an interrupted
run and are deleted once that segment is verified.

Segments may overlap: an egress replay that split a range differently, a changed
``max_segment_bytes``, a merge interrupted before its clean-up, a level-1 segment next to
the level-0 versions of part of it. Planning therefore walks the partition as a reader
does (:func:`replicator.core.segments.selection.reading_chain`: from the next offset, the
segment covering it that reaches furthest): that *chain* is what readers use. Chain
segments within the levels are merged (a merge input that overlaps the previous one
contributes only its offsets after it); every other segment within the levels that the
chain covers entirely is redundant and deleted once the chain segments covering it are
verified. Nothing is stranded, whatever the overlaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from replicator.core.config import CompactionTopicConfig
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.selection import reading_chain
from replicator.core.segments.store import StoredSegment


@dataclass(frozen=True)
class Merge:
    output: SegmentKey
    inputs: tuple[StoredSegment, ...]

    @property
    def input_bytes(self) -> int:
        return sum(s.size for s in self.inputs)


@dataclass(frozen=True)
class Cleanup:
    """Redundant segments (an earlier run's inputs, versions another split left), covered
    by the chain segments ``coverings``: delete once those are verified."""

    coverings: tuple[StoredSegment, ...]
    covered: tuple[StoredSegment, ...]


@dataclass
class PartitionPlan:
    merges: list[Merge] = field(default_factory=list)
    cleanups: list[Cleanup] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def plan_partition(
    segments: Sequence[StoredSegment],
    rules: CompactionTopicConfig,
    now: float,
    *,
    from_level: int | None = None,
    to_level: int | None = None,
) -> PartitionPlan:
    low = rules.min_level if from_level is None else from_level
    high = rules.max_level if from_level is None else from_level
    output_level = to_level if to_level is not None else high + 1
    if output_level <= high:
        raise ValueError(f"output level {output_level} must be above input level {high}")
    plan = PartitionPlan()
    chain = _chain(segments)
    in_levels = [s for s in segments if low <= s.segment_key.level <= high]
    plan.cleanups = _redundant(in_levels, chain, now, rules.min_segment_age)
    candidates = [s for s in chain if low <= s.segment_key.level <= high]
    young = [s for s in candidates if _age(s, now) < rules.min_segment_age]
    if young:
        plan.skipped.append(f"{len(young)} segments younger than min_segment_age")
        first_young = young[0].segment_key.start
        candidates = [s for s in candidates if s.segment_key.end < first_young]
    for run in _runs(candidates):
        for group in _cut(run, rules.max_segment_count, rules.max_segment_bytes):
            size = sum(s.size for s in group)
            if len(group) < rules.min_segment_count and size < rules.min_segment_bytes:
                plan.skipped.append(
                    f"{len(group)} segments ({size} bytes) at {group[0].segment_key.start}.."
                    f"{group[-1].segment_key.end}: below min_segment_count and min_segment_bytes"
                )
                continue
            first, last = group[0].segment_key, group[-1].segment_key
            output = SegmentKey(
                first.region, first.topic, first.partition, output_level, first.start, last.end
            )
            plan.merges.append(Merge(output, tuple(group)))
    return plan


def _age(segment: StoredSegment, now: float) -> float:
    if segment.last_modified is None:
        return 0.0
    return now - segment.last_modified.timestamp()


def _chain(segments: Sequence[StoredSegment]) -> list[StoredSegment]:
    """The segments a reader uses, in order: from the lowest offset, the one covering the
    next offset that reaches furthest; past a hole, on from the next segment."""
    by_key = {s.segment_key: s for s in segments}
    return [by_key[key] for key in reading_chain(by_key)]


def _redundant(
    in_levels: list[StoredSegment], chain: list[StoredSegment], now: float, min_age: float
) -> list[Cleanup]:
    """Segments within the levels, not in the chain, that the chain covers entirely."""
    in_chain = {s.segment_key for s in chain}
    cleanups: dict[tuple[StoredSegment, ...], list[StoredSegment]] = {}
    for segment in in_levels:
        key = segment.segment_key
        if key in in_chain or _age(segment, now) < min_age:
            continue
        coverings = tuple(
            c for c in chain if c.segment_key.start <= key.end and key.start <= c.segment_key.end
        )
        if _tiles(coverings, key.start, key.end):
            cleanups.setdefault(coverings, []).append(segment)
    return [Cleanup(coverings, tuple(covered)) for coverings, covered in cleanups.items()]


def _tiles(coverings: tuple[StoredSegment, ...], start: int, end: int) -> bool:
    """Whether ``coverings`` (chain order) cover [start, end] with no hole."""
    reached = start - 1
    for c in coverings:
        if c.segment_key.start > reached + 1:
            return False
        reached = max(reached, c.segment_key.end)
    return reached >= end


def _runs(candidates: list[StoredSegment]) -> list[list[StoredSegment]]:
    """Maximal runs of chain segments with no hole between them (a segment may start
    inside the previous one: the merge takes only its offsets after it)."""
    runs: list[list[StoredSegment]] = []
    for segment in candidates:
        if runs and segment.segment_key.start <= runs[-1][-1].segment_key.end + 1:
            runs[-1].append(segment)
        else:
            runs.append([segment])
    return runs


def _cut(run: list[StoredSegment], max_count: int, max_bytes: int) -> list[list[StoredSegment]]:
    groups: list[list[StoredSegment]] = [[]]
    size = 0
    for segment in run:
        group = groups[-1]
        if group and (len(group) >= max_count or size + segment.size > max_bytes):
            groups.append([])
            size = 0
        groups[-1].append(segment)
        size += segment.size
    return [g for g in groups if g]
