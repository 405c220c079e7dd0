"""What a restore prints: the plan, progress lines and the final table. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from replicator.core.units import format_size
from restore.planning import PartitionPlan
from restore.task import PartitionResult


@dataclass
class TopicPlan:
    topic: str
    into_topic: str
    partitions: int
    """The destination's partition count (the source's)."""
    configs: dict[str, str]
    plans: list[PartitionPlan] = field(default_factory=list)
    cuts: dict[int, int | None] = field(default_factory=dict)
    """``--plan --until``: per partition the source offset of the first record after the
    cut (None: none, the whole planned range is restored)."""


def describe(topics: list[TopicPlan], until_ms: int | None) -> list[str]:
    lines = []
    for topic in topics:
        lines.append(f"{topic.topic} -> {topic.into_topic} ({topic.partitions} partitions)")
        for plan in topic.plans:
            classes: dict[str, int] = {}
            for segment in plan.segments:
                classes[segment.storage_class] = classes.get(segment.storage_class, 0) + 1
            stored = ", ".join(f"{n} {c}" for c, n in sorted(classes.items())) or "none"
            line = (
                f"  partition {plan.partition}: offsets {plan.start}..{plan.end - 1} "
                f"({len(plan.segments)} segments, {format_size(plan.bytes)}; {stored})"
            )
            if plan.start >= plan.end:
                line = f"  partition {plan.partition}: nothing in the archive"
            if until_ms is not None:
                cut = topic.cuts.get(plan.partition)
                line += (
                    f"; cut at offset {cut} (first record after {_time(until_ms)})"
                    if cut is not None
                    else f"; no record after {_time(until_ms)}: restored whole"
                )
            if plan.gap is not None:
                line += f"; MISSING offsets {plan.gap[0]}..{plan.gap[1]}: stops before them"
            for segment in plan.archived:
                line += f"\n    archived ({segment.storage_class}): {segment.s3_key}"
            lines.append(line)
    return lines


def progress_line(
    topic: str, done: int, planned: int, planned_bytes: int, eta: float | None
) -> str:
    """One topic's progress, in offsets (what checkpoints count) and the bytes they stand
    for."""
    share = done / planned if planned else 1.0
    filled = int(share * 20)
    bar = "#" * filled + "." * (20 - filled)
    text = (
        f"{topic} [{bar}] {share:4.0%} offsets {done:,}/{planned:,} "
        f"(~{format_size(int(planned_bytes * share))} of {format_size(planned_bytes)})"
    )
    return text + (f" ETA {eta:.0f}s" if eta is not None else "")


def render(results: list[PartitionResult], seconds: float) -> str:
    header = (
        "topic",
        "partitions",
        "records",
        "bytes",
        "first offset",
        "last offset",
        "first timestamp",
        "last timestamp",
        "state",
    )
    rows: list[tuple[str, ...]] = [header]
    for topic in sorted({r.topic for r in results}):
        mine = [r for r in results if r.topic == topic]
        firsts = [r for r in mine if r.first_offset is not None]
        lasts = [r for r in mine if r.last_offset is not None]
        bad = [r for r in mine if not r.ok]
        state = (
            "complete"
            if not bad
            else "; ".join(f"partition {r.partition} {r.status}: {r.message}" for r in bad)
        )
        rows.append(
            (
                topic,
                f"{len(mine) - len(bad)}/{len(mine)} complete",
                f"{sum(r.records for r in mine):,}",
                format_size(sum(r.bytes for r in mine)),
                _num(
                    min(
                        (r.first_offset for r in firsts if r.first_offset is not None), default=None
                    )
                ),
                _num(
                    max((r.last_offset for r in lasts if r.last_offset is not None), default=None)
                ),
                _stamp(
                    min(
                        (r.first_timestamp for r in firsts if r.first_timestamp is not None),
                        default=None,
                    )
                ),
                _stamp(
                    max(
                        (r.last_timestamp for r in lasts if r.last_timestamp is not None),
                        default=None,
                    )
                ),
                state,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    table = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join([*table, "", f"restore took {seconds:.1f}s"])


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _stamp(ms: int | None) -> str:
    return "-" if ms is None or ms < 0 else _time(ms)


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
