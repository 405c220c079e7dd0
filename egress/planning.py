"""Where each micro-batch of egress ends, per partition. Pure functions, no I/O.

Egress plans segment boundaries in the driver: a micro-batch's range of a partition is
exactly the range of the segment(s) it will write. Spark records the planned offsets in its
checkpoint before running a batch, so a replayed batch covers the same ranges and rewrites
the same keys: that, and not any deduplication, is what makes egress exactly-once.

A partition's range closes (the planned end moves past its start) when

- ``max_segment_messages`` offsets are pending: the segment covers exactly that many;
- the estimated pending record bytes reach ``max_segment_bytes`` (the sink also splits a
  range by actual bytes, so this only needs to be a good estimate);
- the oldest pending offset has waited ``max_segment_age`` since egress first saw it;
- or the query runs to a fixed end (``--stop-at-end``) and everything up to it is due.

Idle partitions plan nothing and each partition decides alone, so a partition with little
traffic never holds back a busy one.

Offsets travel through Spark as JSON: ``{"topic": {"partition": next_offset}}``, topics
and partitions sorted, partitions as strings.

One range convention throughout egress: ``start``/``end`` are half-open (``end`` is the next
offset), as Kafka's and Spark's offsets are; ``first``/``last`` name inclusive offsets.
The only place a half-open range becomes a segment key's inclusive covered range is
:attr:`OffsetRange.last`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

TopicPartitionKey = tuple[str, int]
Offsets = dict[TopicPartitionKey, int]


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one partition: one planned segment range."""

    topic: str
    partition: int
    start: int
    end: int
    lost: bool = False
    """Offsets the source no longer holds (a loss skipped with ``on_data_loss = "skip"``):
    not read, written as a segment without records, so that readers see the range covered
    and go on instead of waiting for a segment that can never come."""
    topic_id: str | None = None
    """The topic id of the generation planned (the one the topic descriptor records): the
    segments' footers name it, so that readers can refuse a segment of another generation."""

    @property
    def count(self) -> int:
        """Offsets in the range (records or not)."""
        return self.end - self.start

    @property
    def last(self) -> int:
        """The last offset in the range, inclusive: a segment key's covered end."""
        return self.end - 1

    def __str__(self) -> str:
        return f"{self.topic} partition {self.partition} offsets {self.start}..{self.last}"


def encode_offsets(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """Spark's JSON form: sorted topics, partitions as sorted decimal strings."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def decode_offsets(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


@dataclass(frozen=True)
class Limits:
    max_messages: int
    max_bytes: int
    max_age: float


@dataclass
class PendingClock:
    """When egress first saw each offset of one partition, at trigger granularity.

    Each observation records (time, high watermark) when the watermark grew. The record at
    offset ``o`` was first seen at the earliest observation whose watermark exceeds ``o``.
    """

    observations: list[tuple[float, int]] = field(default_factory=list)

    def observe(self, now: float, high: int) -> None:
        if not self.observations or high > self.observations[-1][1]:
            self.observations.append((now, high))

    def first_seen(self, offset: int) -> float | None:
        for seen_at, high in self.observations:
            if high > offset:
                return seen_at
        return None

    def forget_before(self, offset: int) -> None:
        """Drop observations that only describe offsets below ``offset`` (already exported)."""
        while len(self.observations) > 1 and self.observations[1][1] <= offset:
            self.observations.pop(0)
        if self.observations and self.observations[0][1] <= offset:
            self.observations.pop(0)


def plan_end(
    start: int,
    high: int,
    limits: Limits,
    *,
    waited: float | None,
    bytes_per_offset: float | None,
    drain: bool,
    lookahead: float = 0.0,
) -> int:
    """The exclusive end of the next range of one partition; ``start`` means "nothing yet".

    ``waited``: seconds since the offset at ``start`` was first seen (None if unknown).
    ``lookahead``: seconds until the next planning (the trigger interval). The age limit
    closes a segment now if waiting for that next planning would take its oldest offset
    past ``max_age``: the limit is a maximum, not a minimum.
    ``bytes_per_offset``: record bytes per covered offset seen so far (None if unknown).
    ``drain``: the query stops at a fixed end, so everything up to ``high`` is due now.
    """
    pending = high - start
    if pending <= 0:
        return start
    if pending >= limits.max_messages:
        return start + limits.max_messages
    if bytes_per_offset and pending * bytes_per_offset >= limits.max_bytes:
        return start + max(1, min(pending, int(limits.max_bytes / bytes_per_offset)))
    if drain or (waited is not None and waited + lookahead >= limits.max_age):
        return high
    return start


@dataclass(frozen=True)
class PositionProblem:
    """The next offset to export is not in the log.

    ``lost_first``..``lost_last`` are the offsets that will never be exported;
    ``resume_at`` is where a query that skips the loss continues.
    """

    topic: str
    partition: int
    next_offset: int
    log_start: int
    log_end: int
    lost_first: int
    lost_last: int
    resume_at: int
    reason: str

    def describe(self) -> str:
        return (
            f"topic {self.topic} partition {self.partition}: {self.reason}; offsets "
            f"{self.lost_first}..{self.lost_last} ({self.lost_last - self.lost_first + 1} "
            "offsets) will not be exported"
        )


def check_position(
    topic: str, partition: int, next_offset: int, log_start: int, log_end: int
) -> PositionProblem | None:
    """Compare the next offset to export with the partition's log [log_start, log_end).

    - ``next_offset < log_start``: retention (or delete-records) removed offsets before
      they were exported; they are lost, and skipping resumes at the log start.
    - ``next_offset > log_end``: the log is shorter than what was already exported (the
      topic was deleted and re-created, or truncated). Its records below ``next_offset``
      would overlap segments already written, so skipping resumes at ``next_offset`` and
      the log's current records are reported as not exported.
    """
    if next_offset < log_start:
        return PositionProblem(
            topic,
            partition,
            next_offset,
            log_start,
            log_end,
            next_offset,
            log_start - 1,
            log_start,
            f"retention removed offsets {next_offset}..{log_start - 1} before egress "
            f"exported them (log now starts at {log_start})",
        )
    if next_offset > log_end:
        return PositionProblem(
            topic,
            partition,
            next_offset,
            log_start,
            log_end,
            log_start,
            log_end - 1 if log_end > log_start else log_start - 1,
            next_offset,
            f"the log ends at offset {log_end} but egress already exported up to "
            f"{next_offset - 1} (topic deleted and re-created, or truncated)",
        )
    return None


def assign_tasks(sizes: Sequence[int], tasks: int) -> list[list[int]]:
    """Group ranges (by index) into at most ``tasks`` Spark tasks of similar size.

    Spark pays a fixed cost per task (a Python worker round trip, ~0.3 s measured on the
    local stack) that dwarfs reading a few seconds' worth of one partition, so a batch runs
    one task per core rather than one per Kafka partition. Largest ranges first, each onto
    the least-loaded task (ties: the lowest task); within a task, ranges keep their input
    order. Deterministic, so a replayed batch groups alike (not that segment keys depend on
    it: they are the ranges').
    """
    if tasks < 1:
        raise ValueError(f"tasks must be at least 1, got {tasks}")
    loads = [0] * min(tasks, len(sizes))
    groups: list[list[int]] = [[] for _ in loads]
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        target = min(range(len(loads)), key=lambda t: (loads[t], t))
        loads[target] += sizes[index]
        groups[target].append(index)
    return [sorted(group) for group in groups if group]
