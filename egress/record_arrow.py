"""The rows egress passes from its Kafka source to its segment sink, as Arrow.

Each Spark task handles planned ranges of partitions. A range's rows are one *range row*
first (``offset`` null; ``topic``, ``partition``, ``range_start``, ``range_end`` set: the
half-open range [range_start, range_end); ``topic_id``: the generation planned, which the
segments' signed footers name), then the records (``offset`` set, range
columns null). The range row tells the sink which
offsets the task covers even when the range holds no record at all (only transaction
markers, or records compacted away), so that the sink can still write the segment that
keeps the partition's offset space tiled. A *loss row* (``offset`` and ``topic`` null,
``range_start``/``range_end`` the lost half-open range) says that offsets of the range were
gone from the log when the task read it (``on_data_loss = "skip"``): the segment covering
them records the loss in its footer.

Conversion is column by column from lists, not row by row into Arrow builders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from egress.planning import OffsetRange
from replicator.core.kafka.records import message_columns
from replicator.core.segments.format import SCHEMA

SPARK_SCHEMA_DDL = (
    "topic string, partition int, range_start bigint, range_end bigint, offset bigint, "
    "timestamp bigint, timestamp_type tinyint, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, topic_id string"
)
"""The Spark schema of the source; ``timestamp`` is epoch milliseconds."""

_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("range_start", pa.int64()),
        ("range_end", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("timestamp_type", pa.int8()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", _HEADERS_TYPE),
        ("topic_id", pa.string()),
    ]
)


def range_row(planned: OffsetRange) -> pa.RecordBatch:
    """The first row of a planned range."""
    columns: list[Any] = [
        pa.array([planned.topic], pa.string()),
        pa.array([planned.partition], pa.int32()),
        pa.array([planned.start], pa.int64()),
        pa.array([planned.end], pa.int64()),
    ]
    columns += [pa.nulls(1, f.type) for f in ROW_SCHEMA][4:-1]
    columns.append(pa.array([planned.topic_id], pa.string()))
    return pa.RecordBatch.from_arrays(columns, schema=ROW_SCHEMA)


def loss_row(start: int, end: int) -> pa.RecordBatch:
    """Offsets [start, end) of the range being read were gone from the log."""
    columns: list[Any] = [pa.nulls(1, pa.string()), pa.nulls(1, pa.int32())]
    columns += [pa.array([start], pa.int64()), pa.array([end], pa.int64())]
    columns += [pa.nulls(1, f.type) for f in ROW_SCHEMA][4:]
    return pa.RecordBatch.from_arrays(columns, schema=ROW_SCHEMA)


def messages_to_rows(messages: Sequence[Any]) -> pa.RecordBatch:
    """confluent-kafka messages (no errors) of one partition -> record rows."""
    n = len(messages)
    columns = message_columns(messages, _HEADERS_TYPE)
    return pa.RecordBatch.from_arrays(
        [
            pa.nulls(n, pa.string()),
            pa.nulls(n, pa.int32()),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
            *columns,
            pa.nulls(n, pa.string()),
        ],
        schema=ROW_SCHEMA,
    )


def rows_to_segment(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Record rows -> the segment schema (drops range rows)."""
    offsets = batch.column("offset")
    if offsets.null_count:
        batch = batch.filter(pc.is_valid(offsets))
    headers = batch.column("headers").cast(SCHEMA.field("headers").type)
    return pa.RecordBatch.from_arrays(
        [
            batch.column("offset"),
            batch.column("timestamp").cast(pa.timestamp("ms", tz="UTC")),
            batch.column("timestamp_type"),
            batch.column("key"),
            batch.column("value"),
            headers,
        ],
        schema=SCHEMA,
    )


def record_bytes(batch: pa.RecordBatch) -> np.ndarray:
    """Bytes of each record as egress counts them: key + value + header keys and values."""
    size = _lengths(batch.column("key")) + _lengths(batch.column("value"))
    headers = batch.column("headers")
    if len(headers.values):
        structs = headers.flatten()
        per_header = _lengths(structs.field("key")) + _lengths(structs.field("value"))
        ends = np.cumsum(per_header)
        offsets = headers.offsets.to_numpy()
        start = offsets[:-1] - offsets[0]
        stop = offsets[1:] - offsets[0]
        padded = np.concatenate([[0], ends])
        size = size + (padded[stop] - padded[start])
    return size


def _lengths(array: pa.Array) -> np.ndarray:
    return pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
