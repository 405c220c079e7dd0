"""The drill's independent archive reader: every offset once, and a copy of an offset that
differs from another copy, or lies outside its object's name, is reported."""

from __future__ import annotations

import pyarrow as pa

from infra.archive_reader import archived_records
from replicator.core.segments.format import SCHEMA
from replicator.core.segments.key import SegmentKey
from tests.fixtures.stack import SOURCE


def batch(start: int, count: int, value: bytes = b"v") -> pa.RecordBatch:
    offsets = list(range(start, start + count))
    return pa.RecordBatch.from_pydict(
        {
            "offset": offsets,
            "timestamp": [1_700_000_000_000 + o for o in offsets],
            "timestamp_type": [1] * count,
            "key": [b"k%d" % o for o in offsets],
            "value": [value] * count,
            "headers": [[{"key": "h", "value": b"%d" % o}] for o in offsets],
        },
        schema=SCHEMA,
    )


def test_each_offset_once_across_levels_and_differing_copies_reported(local_stack, unique):
    bucket = local_stack.new_bucket(unique("archive"))
    store = local_stack.store(SOURCE, bucket)
    topic = unique("archived")
    store.write_segment(SegmentKey(SOURCE, topic, 0, 0, 0, 9), batch(0, 10))
    store.write_segment(SegmentKey(SOURCE, topic, 0, 0, 10, 19), batch(10, 10))
    store.write_segment(SegmentKey(SOURCE, topic, 0, 1, 0, 19), batch(0, 20))  # mid-merge
    store.write_segment(SegmentKey(SOURCE, topic, 1, 0, 0, 4), batch(0, 5, b"other"))
    s3 = local_stack.s3()
    s3.put_object(Bucket=bucket, Key=f"data/{SOURCE}/{topic}/_topic.json", Body=b"{}")

    records, problems = archived_records(s3, bucket, "data", SOURCE, topic, 0)
    assert problems == []
    assert [r[0] for r in records] == list(range(20))
    assert records[3] == (3, b"k3", b"v", 1_700_000_000_003, (("h", b"3"),))

    altered = SegmentKey(SOURCE, topic, 0, 2, 0, 19)
    store.write_segment(altered, batch(0, 20, b"changed"))
    _, problems = archived_records(s3, bucket, "data", SOURCE, topic, 0)
    assert len(problems) == 20 and problems[0].startswith("offset 0 differs between two segments")
