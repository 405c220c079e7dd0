"""Record fixtures shared by tests: every shape a Kafka record can take."""

from __future__ import annotations

import pyarrow as pa

from replicator.core.segments.format import (
    SCHEMA,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NONE,
)


def every_shape(start: int = 0, step: int = 1) -> list[dict]:
    """Records covering null/empty keys and values, duplicate and null-valued headers,
    unicode header keys and every timestamp type, at offsets start, start+step, ..."""
    shapes = [
        {"key": b"k", "value": b"v", "headers": []},
        {"key": None, "value": b"null key", "headers": []},
        {"key": b"", "value": b"empty key", "headers": []},
        {"key": b"tombstone", "value": None, "headers": []},
        {"key": b"empty value", "value": b"", "headers": []},
        {"key": None, "value": None, "headers": []},
        {"key": b"dup", "value": b"x", "headers": [("h", b"1"), ("h", b"2"), ("h", b"1")]},
        {"key": b"nullhdr", "value": b"x", "headers": [("n", None), ("e", b""), ("n", None)]},
        {"key": b"uni", "value": "é✓".encode(), "headers": [("ключ-🔑", b"\x00\xff")]},
        {"key": bytes(range(256)), "value": bytes(range(255, -1, -1)) * 10, "headers": []},
    ]
    timestamps = [
        (TIMESTAMP_CREATE_TIME, 1_700_000_000_123),
        (TIMESTAMP_LOG_APPEND_TIME, 1_700_000_000_456),
        (TIMESTAMP_NONE, -1),
        (TIMESTAMP_CREATE_TIME, 0),
        (TIMESTAMP_CREATE_TIME, 946_684_800_000),  # an explicit old timestamp
    ]
    records = []
    for i, shape in enumerate(shapes):
        ts_type, ts = timestamps[i % len(timestamps)]
        records.append(
            {
                "offset": start + i * step,
                "timestamp": ts,
                "timestamp_type": ts_type,
                "key": shape["key"],
                "value": shape["value"],
                "headers": [{"key": k, "value": v} for k, v in shape["headers"]],
            }
        )
    return records


def to_batch(records: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(records, schema=SCHEMA)


def plain(count: int, start: int = 0, value_size: int = 100) -> pa.RecordBatch:
    """``count`` keyed records at consecutive offsets from ``start``."""
    return to_batch(
        [
            {
                "offset": start + i,
                "timestamp": 1_700_000_000_000 + i,
                "timestamp_type": TIMESTAMP_CREATE_TIME,
                "key": b"key-%d" % (start + i),
                "value": (b"%08d" % (start + i)) * (value_size // 8),
                "headers": [],
            }
            for i in range(count)
        ]
    )


def produce_every_shape(producer, topic: str, partitions: int, rounds: int, timestamp) -> None:  # type: ignore[no-untyped-def]
    """Produce ``every_shape()`` ``rounds`` times to each partition; ``timestamp(record,
    round)`` gives each record's CreateTime."""
    for round_ in range(rounds):
        for partition in range(partitions):
            for record in every_shape():
                producer.produce(
                    topic,
                    key=record["key"],
                    value=record["value"],
                    partition=partition,
                    headers=[(h["key"], h["value"]) for h in record["headers"]],
                    timestamp=timestamp(record, round_),
                )
