"""What the disaster-recovery drill checks and prints. Pure functions, no I/O.

A record here is ``(offset, key, value, timestamp_ms, headers)`` as a plain consumer
returns it; headers are a tuple of ``(name, value)`` pairs with the replicator's
provenance header already removed from the destination's copy.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Record = tuple[int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of unsorted ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def compare_partition(source: Sequence[Record], copied: Sequence[Record]) -> list[str]:
    """Problems that make ``copied`` differ from ``source``; empty when identical.

    ``copied`` carries the source offset each record came from (from its provenance
    header), so missing, duplicated and reordered records are named by source offset.
    """
    if list(source) == list(copied):
        return []
    problems: list[str] = []
    wanted = [r[0] for r in source]
    got = [r[0] for r in copied]
    missing = sorted(set(wanted) - set(got))
    if missing:
        problems.append(f"{len(missing)} missing (first at offset {missing[0]})")
    duplicated = sorted(o for o, n in Counter(got).items() if n > 1)
    if duplicated:
        problems.append(f"{len(duplicated)} duplicated (first at offset {duplicated[0]})")
    by_offset = {r[0]: r for r in source}
    unexpected = sorted(set(got) - set(wanted))
    if unexpected:
        problems.append(f"{len(unexpected)} not in the source (first at offset {unexpected[0]})")
    known = [o for o in got if o in by_offset]
    if not duplicated and known != sorted(known):
        first = next(b for a, b in itertools.pairwise(known) if b < a)
        problems.append(f"out of order at offset {first}")
    differing = [r[0] for r in copied if r[0] in by_offset and by_offset[r[0]] != r]
    if differing:
        problems.append(f"{len(differing)} differ in content (first at offset {differing[0]})")
    return problems or ["records differ"]


def coverage_gaps(ranges: Iterable[tuple[int, int]], start: int, end: int) -> list[str]:
    """Offsets in [start, end) covered by none of the inclusive ``ranges``."""
    gaps: list[str] = []
    position = start
    for first, last in sorted(ranges):
        if first > position:
            gaps.append(f"{position}..{min(first, end) - 1}")
        position = max(position, last + 1)
        if position >= end:
            break
    if position < end:
        gaps.append(f"{position}..{end - 1}")
    return gaps


@dataclass
class TopicSummary:
    topic: str
    destination: str
    partitions: int = 0
    records: int = 0
    segments: dict[int, int] = field(default_factory=dict)
    """Segment count per level in the source region's bucket, after compaction."""
    s3_bytes: int = 0
    lags: list[float] = field(default_factory=list)
    """Seconds from each record's source timestamp to its arrival in the destination."""
    problems: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return not self.problems and self.records > 0


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def render_summary(summaries: Sequence[TopicSummary]) -> str:
    header = (
        "topic",
        "records",
        "segments in S3",
        "bytes in S3",
        "lag p50",
        "lag p99",
        "lag max",
        "verification",
    )
    lines = [header]
    for s in summaries:
        segments = " ".join(f"L{level}:{n}" for level, n in sorted(s.segments.items())) or "-"
        verdict = (
            f"OK: {s.partitions} partitions identical"
            if s.verified
            else "FAILED: " + "; ".join(s.problems or ["no records"])
        )
        lines.append(
            (
                f"{s.topic} -> {s.destination}",
                f"{s.records:,}",
                segments,
                _size(s.s3_bytes),
                _seconds(percentile(s.lags, 50)),
                _seconds(percentile(s.lags, 99)),
                _seconds(max(s.lags) if s.lags else None),
                verdict,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def progress_bar(done: int, total: int, width: int = 20) -> str:
    fraction = 0.0 if total <= 0 else min(1.0, done / total)
    filled = round(fraction * width)
    return "[" + "#" * filled + "." * (width - filled) + f"] {fraction * 100:3.0f}%"
