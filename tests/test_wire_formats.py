"""The bytes other processes, regions and versions depend on, pinned with golden files
written by the current version (``tests/golden/``): the ``replicator.source`` header, the
checkpoint value, the segment-event value, the topic descriptor, and a segment's Parquet
schema and footer. A change to any encoder fails here, not in an existing deployment whose
destinations, checkpoints and archive were written the old way.

Changing a format on purpose means a new format version that still reads these files.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ingress.segment_events import SegmentEvent
from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import (
    Checkpoint,
    WriteTarget,
    checkpoint_partition,
)
from replicator.core.segments.descriptor import describe, parse_descriptor
from replicator.core.segments.format import (
    FOOTER_KEY,
    SCHEMA,
    SegmentReader,
    SegmentWriter,
    content_checksum,
)
from replicator.core.segments.key import SegmentKey

GOLDEN = Path(__file__).parent / "golden"
ORDERS = provenance.SourcePartition("us-east-1", "orders.placed", 3)
SEGMENT_KEY = SegmentKey("us-east-1", "orders.placed", 3, 0, 1000, 1003)
Header = tuple[str, bytes | None]
RECORDS: list[tuple[int, int, int, bytes | None, bytes | None, list[Header]]] = [
    (1000, 1763805600000, 1, b"customer-42", b'{"total":12.5}', [("trace-id", b"abc")]),
    (1001, 1763805600001, 1, None, b"", []),
    (1003, 1763805600005, 1, b"customer-7", None, [("a", None), ("a", b"2")]),
]


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def test_the_provenance_header():
    assert golden("provenance-header.bin") == b"us-east-1/orders.placed/3/1234"
    assert provenance.HEADER == "replicator.source"
    assert provenance.encode(ORDERS, 1234) == golden("provenance-header.bin")
    headers = [("trace-id", b"x"), (provenance.HEADER, golden("provenance-header.bin"))]
    assert provenance.source_offset(headers, ORDERS) == 1234


def test_the_checkpoint_value_key_placement_and_transactional_id():
    written = Checkpoint(
        "orders.placed.copy", 3, "us-east-1", "orders.placed", 1235, 987, 1763856000.25
    )
    assert written.to_json() == golden("checkpoint.json")
    assert Checkpoint.from_json(golden("checkpoint.json")) == written
    merged = Checkpoint(
        "orders.all", 0, "us-east-1", "orders.placed", 1235, 987, 1763856000.25,
        halted="segment data/x is corrupt", source_partition=3,
    )  # fmt: skip
    assert merged.to_json() == golden("checkpoint-merged-halted.json")
    assert Checkpoint.from_json(golden("checkpoint-merged-halted.json")) == merged
    # Where a checkpoint lives and which producer owns a destination partition.
    same = WriteTarget(ORDERS, "orders.placed.copy", 3)
    assert same.checkpoint_key == "orders.placed.copy/3/us-east-1/orders.placed"
    assert same.transactional_id("replicator-ingress") == "replicator-ingress.orders.placed.copy.3"
    into_one = WriteTarget(ORDERS, "orders.all", 0)
    assert into_one.checkpoint_key == "orders.all/0/us-east-1/orders.placed/3"
    assert into_one.transactional_id("replicator-relay") == (
        "replicator-relay.orders.all.0.us-east-1.orders.placed.3"
    )
    assert checkpoint_partition(same.checkpoint_key, 8) == 7  # crc32 of the key, mod 8
    assert checkpoint_partition(into_one.checkpoint_key, 8) == 4


def test_the_segment_event_value():
    event = SegmentEvent(
        "created",
        "data/us-east-1/orders.placed/3/0/00000000000000001000-00000000000000001999",
        48213,
        "2026-11-22T10:00:00.000Z",
    )
    assert event.to_json() == golden("segment-event.json")
    assert SegmentEvent.from_json(golden("segment-event.json")) == event


def test_the_topic_descriptor():
    written = describe(
        "orders.placed",
        6,
        {"retention.ms": "604800000", "cleanup.policy": "delete"},
        "us-east-1",
        {0: 0, 3: 1000},
        "AAAAAAAAAAAAAAAAAAAAAQ",
    )
    assert json.dumps(written, separators=(",", ":")).encode() == golden("topic-descriptor.json")
    parsed = parse_descriptor(json.loads(golden("topic-descriptor.json")), "golden")
    assert (parsed.partitions, parsed.export_start) == (6, {0: 0, 3: 1000})


def test_a_segment_written_by_this_version_reads_back_with_its_footer():
    reader = SegmentReader(
        pa.BufferReader(golden("segment-v1.parquet")), SEGMENT_KEY, "segment-v1.parquet"
    )
    footer = reader.footer
    assert (footer.format_version, footer.record_count) == (1, 3)
    assert (footer.first_record_offset, footer.last_record_offset) == (1000, 1003)
    assert footer.checksum == (
        "sha256:0e7f4eb0534e6695aee530b2cae2bb14b33b246e63f707d0183276dc8e6636d4"
    )
    table = reader.read_all()
    rows = [
        (
            r["offset"],
            int(r["timestamp"].timestamp() * 1000),
            r["timestamp_type"],
            r["key"],
            r["value"],
            [(h["key"], h["value"]) for h in r["headers"]],
        )
        for r in table.to_pylist()
    ]
    assert rows == RECORDS
    # The checksum algorithm itself: old segments are verified with it.
    assert content_checksum(table) == footer.row_group_checksums[0]


def test_a_segment_written_now_has_the_golden_schema_and_footer():
    batch = pa.RecordBatch.from_pydict(
        {
            "offset": [r[0] for r in RECORDS],
            "timestamp": [r[1] for r in RECORDS],
            "timestamp_type": [r[2] for r in RECORDS],
            "key": [r[3] for r in RECORDS],
            "value": [r[4] for r in RECORDS],
            "headers": [[{"key": k, "value": v} for k, v in r[5]] for r in RECORDS],
        },
        schema=SCHEMA,
    )
    sink = io.BytesIO()
    writer = SegmentWriter(sink, SEGMENT_KEY)
    writer.write(batch)
    writer.close()
    now = pq.ParquetFile(io.BytesIO(sink.getvalue()))
    then = pq.ParquetFile(io.BytesIO(golden("segment-v1.parquet")))
    # Parquet physical types and nesting (the printout's first line is an object address).
    assert str(now.schema).split("\n", 1)[1] == str(then.schema).split("\n", 1)[1]
    assert now.schema_arrow.equals(then.schema_arrow, check_metadata=True)
    column_encodings = [
        (then.metadata.row_group(0).column(i).path_in_schema,
         then.metadata.row_group(0).column(i).compression)
        for i in range(then.metadata.num_columns)
    ]  # fmt: skip
    assert column_encodings == [
        (now.metadata.row_group(0).column(i).path_in_schema,
         now.metadata.row_group(0).column(i).compression)
        for i in range(now.metadata.num_columns)
    ]  # fmt: skip
    footers = [json.loads((f.metadata.metadata or {})[FOOTER_KEY]) for f in (now, then)]
    for footer in footers:  # when and by which release: the only fields that may differ
        del footer["created_at"], footer["writer_version"]
    assert footers[0] == footers[1]
