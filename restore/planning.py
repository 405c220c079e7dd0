"""What a restore reads and where it stops. Pure functions.

Per partition, starting where the export started (the descriptor's ``export_start``, else
the lowest segment present), the segments are chosen as ingress chooses them
(:func:`replicator.core.segments.selection.next_step`): the one covering the next offset
that reaches furthest, any level. A range no segment covers while later ones exist is a
*gap*: the partition is restored up to it and stops there, so a restored partition is
always a prefix of its source log.

``--until T`` cuts each partition before the first record whose timestamp is later than
T, Kafka's rule for offsets by time: with out-of-order timestamps the cut is that first
later record, not the last earlier one. The cut is found while reading (or, for
``--plan``, from row-group statistics): the plan only bounds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from replicator.core.segments.selection import Gap, ReadNext, next_step
from replicator.core.segments.store import StoredSegment

ARCHIVED_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
"""Storage classes S3 cannot read without a restore request (GLACIER_IR it can)."""


@dataclass(frozen=True)
class PlannedSegment:
    s3_key: str
    level: int
    start: int
    end: int
    """Inclusive covered range."""
    size: int
    storage_class: str
    etag: str | None


@dataclass(frozen=True)
class PartitionPlan:
    topic: str
    partition: int
    start: int
    """First source offset to restore."""
    end: int
    """Half-open end of what the archive holds contiguously from ``start``."""
    segments: list[PlannedSegment] = field(default_factory=list)
    gap: tuple[int, int] | None = None
    """Missing source offsets (inclusive) after ``end``: the partition stops before them."""

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def archived(self) -> list[PlannedSegment]:
        return [s for s in self.segments if s.storage_class in ARCHIVED_CLASSES]


def plan_partition(
    topic: str, partition: int, listed: list[StoredSegment], export_start: int | None
) -> PartitionPlan:
    """The segments to read, in order, from ``export_start`` (None: the lowest present)."""
    keys = {s.segment_key: s for s in listed}
    starts = [k.start for k in keys]
    if not starts:
        return PartitionPlan(topic, partition, export_start or 0, export_start or 0)
    start = export_start if export_start is not None else min(starts)
    chosen: list[PlannedSegment] = []
    offset = start
    gap = None
    while True:
        step = next_step(offset, keys)
        if isinstance(step, ReadNext):
            stored = keys[step.segment]
            chosen.append(_planned(stored))
            offset = step.segment.end + 1
        elif isinstance(step, Gap):
            gap = (step.first, step.last)
            break
        else:
            break
    return PartitionPlan(topic, partition, start, offset, chosen, gap)


def _planned(stored: StoredSegment) -> PlannedSegment:
    key = stored.segment_key
    return PlannedSegment(
        stored.s3_key,
        key.level,
        key.start,
        key.end,
        stored.size,
        stored.storage_class or "STANDARD",
        stored.etag,
    )


def segments_from(plan: PartitionPlan, next_offset: int) -> list[PlannedSegment]:
    """The planned segments that still hold offsets at or after ``next_offset``."""
    return [s for s in plan.segments if s.end >= next_offset]


_EPOCH_MS = re.compile(r"[0-9]{1,16}")  # ASCII digits only


def parse_until(text: str) -> int:
    """``--until``: ISO-8601 with a zone (``2026-11-22T09:14:00+01:00``, ``...Z``) or epoch
    milliseconds; epoch milliseconds. Raises ``ValueError`` saying what is accepted."""
    if _EPOCH_MS.fullmatch(text):
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--until {text!r}: expected ISO-8601 with a zone (2026-11-22T09:14:00Z) or "
            "epoch milliseconds"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(
            f"--until {text!r} has no zone: add one (Z, +01:00) so the cut is one instant"
        )
    return int(moment.timestamp() * 1000)
