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

"Overlapping no higher segment" is the specified "starting after the end of the highest
level above max_level" generalized: merges run in parallel, so a crash can leave a later
range merged and an earlier one not; the earlier one must still be merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from replicator.core.config import CompactionTopicConfig
from replicator.core.segments.key import SegmentKey
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
    """Inputs of an earlier run, covered by ``covering``: delete once it is verified."""

    covering: StoredSegment
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
    above = [s for s in segments if s.segment_key.level > high]
    plan.cleanups = _covered(segments, low, high, above)
    covered = {c.segment_key for cleanup in plan.cleanups for c in cleanup.covered}
    candidates = sorted(
        (
            s
            for s in segments
            if low <= s.segment_key.level <= high
            and s.segment_key not in covered
            and not any(
                h.segment_key.start <= s.segment_key.end
                and s.segment_key.start <= h.segment_key.end
                for h in above
            )
        ),
        key=lambda s: (s.segment_key.start, s.segment_key.end),
    )
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


def _runs(candidates: list[StoredSegment]) -> list[list[StoredSegment]]:
    """Maximal chains of segments whose covered ranges follow each other exactly."""
    runs: list[list[StoredSegment]] = []
    for segment in candidates:
        if runs and segment.segment_key.start == runs[-1][-1].segment_key.end + 1:
            runs[-1].append(segment)
        elif runs and segment.segment_key.start <= runs[-1][-1].segment_key.end:
            continue  # overlaps the chain (should not happen within levels): leave it
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


def _covered(
    segments: Sequence[StoredSegment], low: int, high: int, above: list[StoredSegment]
) -> list[Cleanup]:
    cleanups = []
    for covering in sorted(above, key=lambda s: (s.segment_key.start, -s.segment_key.end)):
        inside = tuple(
            s
            for s in segments
            if low <= s.segment_key.level <= high
            and s.segment_key.level < covering.segment_key.level
            and covering.segment_key.start <= s.segment_key.start
            and s.segment_key.end <= covering.segment_key.end
        )
        if inside:
            cleanups.append(Cleanup(covering, inside))
    return cleanups
