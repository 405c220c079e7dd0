"""Kafka records as Arrow, column by column: the one conversion from confluent-kafka
messages, for the partition reader where the C one is not built (egress and the relay read
through it) and for failback's segments.

Columns are built from Python lists in one pass each, not row by row into Arrow builders.
Timestamps stay what Kafka says: epoch milliseconds and the timestamp type (0 none, 1
CreateTime, 2 LogAppendTime); keys and values keep null apart from empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from replicator.core.segments.format import SCHEMA


class MessageColumns(NamedTuple):
    offset: pa.Array
    timestamp_ms: pa.Array
    timestamp_type: pa.Array
    key: pa.Array
    value: pa.Array
    headers: pa.Array


def message_columns(messages: Sequence[Any], headers_type: pa.ListType) -> MessageColumns:
    """The columns of confluent-kafka ``messages`` (none an error), in order; headers as a
    list array of ``headers_type`` (a list of structs of ``key`` string, ``value`` binary)."""
    n = len(messages)
    # Column by column, each a comprehension over the messages and one Arrow conversion:
    # the cheapest spelling measured (zip(*) for the timestamp pairs: 0.2 us a record
    # against 0.56 for two comprehensions; a list then np.array for the header counts).
    pairs = [m.timestamp() for m in messages]
    timestamp_types, timestamp_ms = zip(*pairs, strict=True) if n else ((), ())
    headers = [m.headers() for m in messages]
    counts = np.array([len(h) if h else 0 for h in headers], dtype=np.int32)
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    flat = [pair for h in headers if h for pair in h]
    header_structs = pa.StructArray.from_arrays(
        [
            pa.array([k for k, _ in flat], pa.string()),
            pa.array([v for _, v in flat], pa.binary()),
        ],
        fields=list(headers_type.value_type),
    )
    return MessageColumns(
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array(timestamp_ms, pa.int64()),
        pa.array(timestamp_types, pa.int8()),
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.ListArray.from_arrays(pa.array(list_offsets), header_structs, type=headers_type),
    )


def messages_to_records(messages: Sequence[Any]) -> pa.RecordBatch:
    """confluent-kafka ``messages`` (none an error) as a batch of the segment schema, the
    form :class:`replicator.core.kafka.writer.PartitionWriter` writes."""
    columns = message_columns(messages, SCHEMA.field("headers").type)
    return pa.RecordBatch.from_arrays(
        [
            columns.offset,
            columns.timestamp_ms.cast(pa.timestamp("ms", tz="UTC")),
            columns.timestamp_type,
            columns.key,
            columns.value,
            columns.headers,
        ],
        schema=SCHEMA,
    )
