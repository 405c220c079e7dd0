"""Independent views of the data for verification: S3 objects read with boto3 and pyarrow
(not the project's store or reader), and Kafka partitions read with a plain consumer."""

from __future__ import annotations

import io
import itertools
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, TopicPartition

KEY_RE = re.compile(
    r"^(?P<prefix>.*)/(?P<region>[^/]+)/(?P<topic>[^/]+)/(?P<partition>\d+)/"
    r"(?P<level>\d+)/(?P<start>\d{20})-(?P<end>\d{20})$"
)


@dataclass
class Segment:
    key: str
    partition: int
    level: int
    start: int
    end: int
    table: pa.Table

    def records(self) -> list[tuple]:
        return [normalize_row(r) for r in self.table.to_pylist()]


def normalize_row(row: dict) -> tuple:
    ts = row["timestamp"]
    millis = ts if isinstance(ts, int) else int(ts.timestamp() * 1000)
    headers = tuple((h["key"], h["value"]) for h in row["headers"] or [])
    return (row["offset"], millis, row["timestamp_type"], row["key"], row["value"], headers)


def s3_segments(s3, bucket: str, prefix: str, region: str, topic: str) -> dict[int, list[Segment]]:
    """Every segment object of ``topic``, per partition, sorted by (start, level)."""
    found: dict[int, list[Segment]] = {}
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{prefix}/{region}/{topic}/"):
        for item in page.get("Contents", []):
            match = KEY_RE.match(item["Key"])
            if not match or match["topic"] != topic:
                continue
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            table = pq.read_table(io.BytesIO(body))
            found.setdefault(int(match["partition"]), []).append(
                Segment(
                    item["Key"],
                    int(match["partition"]),
                    int(match["level"]),
                    int(match["start"]),
                    int(match["end"]),
                    table,
                )
            )
    for segments in found.values():
        segments.sort(key=lambda s: (s.start, s.level))
    return found


def assert_tiles(segments: list[Segment], first: int, last: int) -> None:
    """The segments cover [first, last] exactly: no hole, no overlap."""
    assert segments, f"no segments for [{first}, {last}]"
    ranges = [(s.start, s.end) for s in segments]
    assert ranges[0][0] == first, f"first segment starts at {ranges[0][0]}, expected {first}"
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert start == end + 1, f"hole or overlap between ranges {ranges}"
    assert ranges[-1][1] == last, f"last segment ends at {ranges[-1][1]}, expected {last}"


def read_partition(
    bootstrap: str, topic: str, partition: int, isolation: str = "read_committed"
) -> list[tuple]:
    """Every record of one partition up to its current end, as normalized tuples."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "independent-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    consumer.assign([TopicPartition(topic, partition, low)])
    records = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, f"{topic}/{partition}: timed out reading"
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(message.error().str())
            ts_type, ts = message.timestamp()
            headers = tuple((k, v) for k, v in (message.headers() or []))
            records.append((message.offset(), ts, ts_type, message.key(), message.value(), headers))
    finally:
        consumer.close()
    return records


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "independent-reader",
            "isolation.level": "read_committed",
        }
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()
