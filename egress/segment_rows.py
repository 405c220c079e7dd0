"""The rows egress passes from its Kafka source to its segment sink: one per segment written.

Records never cross into Spark. The task that reads a planned range writes the
segment(s) covering it in the same Python worker (:func:`egress.segment_sink.write_range`)
and hands Spark one small *segment row* per segment: the planned range it belongs to
(``topic``, ``partition``, the half-open [``range_start``, ``range_end``), the
``topic_id`` planned) and what was written (``segment_start``/``segment_end``, the
inclusive offsets the segment covers, and its ``records``, ``record_bytes`` and ``size``).
The sink's task turns them back into the commit message the driver's commit reads
(:class:`egress.segment_sink.SegmentsWritten`), as it did when it wrote the segments
itself. A micro-batch's read and write are one Spark task with no shuffle between them,
so a failed or retried task reads and writes its ranges again either way.

Every planned range has at least one segment (a range without records still gets the
segment that keeps the partition's offset space tiled), so every range reaches the
driver's commit. Rows of a range are in segment order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from egress.planning import OffsetRange
from replicator.core.segments.key import SegmentKey

SPARK_SCHEMA_DDL = (
    "topic string, partition int, range_start bigint, range_end bigint, topic_id string, "
    "segment_start bigint, segment_end bigint, records bigint, record_bytes bigint, "
    "size bigint"
)
"""The Spark schema of the source: one row per segment written."""


@dataclass(frozen=True)
class WrittenSegment:
    segment_key: SegmentKey
    records: int
    record_bytes: int
    size: int


@dataclass
class WrittenRange:
    planned: OffsetRange
    segments: list[WrittenSegment] = field(default_factory=list)


SEGMENT_ROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("range_start", pa.int64()),
        ("range_end", pa.int64()),
        ("topic_id", pa.string()),
        ("segment_start", pa.int64()),
        ("segment_end", pa.int64()),
        ("records", pa.int64()),
        ("record_bytes", pa.int64()),
        ("size", pa.int64()),
    ]
)


def segment_rows(written: WrittenRange) -> pa.RecordBatch:
    """The rows of one written range, one per segment, in order."""
    planned = written.planned
    n = len(written.segments)
    return pa.RecordBatch.from_pydict(
        {
            "topic": [planned.topic] * n,
            "partition": [planned.partition] * n,
            "range_start": [planned.start] * n,
            "range_end": [planned.end] * n,
            "topic_id": [planned.topic_id] * n,
            "segment_start": [s.segment_key.start for s in written.segments],
            "segment_end": [s.segment_key.end for s in written.segments],
            "records": [s.records for s in written.segments],
            "record_bytes": [s.record_bytes for s in written.segments],
            "size": [s.size for s in written.segments],
        },
        schema=SEGMENT_ROW_SCHEMA,
    )


def written_ranges(region: str, batches: Iterable[pa.RecordBatch]) -> list[WrittenRange]:
    """The written ranges the rows of ``batches`` describe, in the order they came."""
    ranges: dict[tuple[str, int, int, int], WrittenRange] = {}
    for row in _rows(batches):
        planned = OffsetRange(
            row["topic"],
            row["partition"],
            row["range_start"],
            row["range_end"],
            topic_id=row["topic_id"],
        )
        written = ranges.setdefault(
            (planned.topic, planned.partition, planned.start, planned.end), WrittenRange(planned)
        )
        key = SegmentKey(
            region, planned.topic, planned.partition, 0, row["segment_start"], row["segment_end"]
        )
        written.segments.append(
            WrittenSegment(key, row["records"], row["record_bytes"], row["size"])
        )
    return list(ranges.values())


def _rows(batches: Iterable[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        yield from batch.to_pylist()
