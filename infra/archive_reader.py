"""An independent reader of the archive, for the drill's and the chaos soak's verdicts.

It shares nothing with the product's own reading path (segment keys, selection,
verification): it lists the bucket with boto3, takes the offsets from the object names
with its own pattern, reads every segment whole with pyarrow, and keeps each offset's
record once, checking that every copy of it (a level-0 segment and the level-1 segment
merging it, during a compaction) is the same record. A bug in how the product names,
chooses or reads segments cannot hide behind it.
"""

from __future__ import annotations

import io
import re
from typing import Any

import pyarrow.parquet as pq

Record = tuple[int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]
"""(offset, key, value, timestamp in ms, headers), as the drill compares records."""

_SEGMENT_NAME = re.compile(r"/([0-9]+)/([0-9]+)/([0-9]{20})-([0-9]{20})$")


def archived_records(
    s3: Any, bucket: str, prefix: str, region: str, topic: str, partition: int
) -> tuple[list[Record], list[str]]:
    """Every record the archive holds for one partition, by offset, and the problems
    found (two copies of an offset that differ, a record outside its object's range)."""
    head = f"{prefix}/{region}/{topic}/{partition}/"
    records: dict[int, Record] = {}
    problems: list[str] = []
    for s3_key in _object_keys(s3, bucket, head):
        match = _SEGMENT_NAME.search(s3_key)
        if match is None or int(match.group(1)) != partition:
            continue
        first, last = int(match.group(3)), int(match.group(4))
        body = s3.get_object(Bucket=bucket, Key=s3_key)["Body"].read()
        # In this thread only, as the segment reader reads (see its ParquetFile).
        table = pq.read_table(io.BytesIO(body), use_threads=False, pre_buffer=False)
        for row in table.to_pylist():
            record: Record = (
                row["offset"],
                row["key"],
                row["value"],
                int(row["timestamp"].timestamp() * 1000),
                tuple((h["key"], h["value"]) for h in row["headers"]),
            )
            if not first <= record[0] <= last:
                problems.append(f"{s3_key} holds offset {record[0]} outside its name's range")
            elif records.setdefault(record[0], record) != record:
                problems.append(f"offset {record[0]} differs between two segments ({s3_key})")
    return [records[o] for o in sorted(records)], problems


def _object_keys(s3: Any, bucket: str, head: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=head):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys
