"""Provenance headers and checkpoints: their bytes are what existing destinations hold."""

import pyarrow as pa
import pytest

from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import (
    Checkpoint,
    WriteTarget,
    checkpoint_partition,
    furthest,
)
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.format import SCHEMA


def test_checkpoint_round_trip_and_bytes():
    checkpoint = Checkpoint("copy", 3, "us-east-1", "orders.v1", 120, 57, 1.5)
    assert Checkpoint.from_json(checkpoint.to_json()) == checkpoint
    # What existing destinations hold: no field added where partitions match.
    assert checkpoint.to_json() == (
        b'{"destination_topic":"copy","partition":3,"source_region":"us-east-1",'
        b'"source_topic":"orders.v1","next_source_offset":120,"destination_offset":57,'
        b'"time":1.5,"halted":""}'
    )
    merged = Checkpoint("copy", 0, "east", "o", 5, 9, 1.0, source_partition=2)
    assert Checkpoint.from_json(merged.to_json()) == merged
    restored = Checkpoint("copy", 3, "us-east-1", "orders.v1", 120, 57, 1.5, writer="restore")
    assert restored.to_json().endswith(b'"halted":"","writer":"restore"}')
    assert Checkpoint.from_json(restored.to_json()) == restored
    key = WriteTarget(SourcePartition("us-east-1", "orders.v1", 3), "copy", 3).checkpoint_key
    assert 0 <= checkpoint_partition(key, 4) < 4


def test_a_checkpoint_of_a_newer_version_with_more_fields_is_still_read():
    newer = (
        b'{"destination_topic":"copy","partition":3,"source_region":"r","source_topic":"t",'
        b'"next_source_offset":5,"destination_offset":4,"time":1.0,"added_later":[1]}'
    )
    assert Checkpoint.from_json(newer) == Checkpoint("copy", 3, "r", "t", 5, 4, 1.0)


@pytest.mark.parametrize(
    "raw",
    [
        b"[]",
        b'{"destination_topic":"copy"}',
        b'{"destination_topic":"c","partition":"3","source_region":"r","source_topic":"t",'
        b'"next_source_offset":5,"destination_offset":4,"time":1.0}',
        b'{"destination_topic":"c","partition":3,"source_region":"r","source_topic":"t",'
        b'"next_source_offset":-5,"destination_offset":4,"time":1.0}',
        b"[" * 100_000,
    ],
)
def test_a_malformed_checkpoint_is_a_value_error(raw):
    with pytest.raises(ValueError):
        Checkpoint.from_json(raw)


def test_merged_source_partitions_get_their_own_writer_and_checkpoint():
    targets = [WriteTarget(SourcePartition("east", "o", p), "all", 0) for p in range(3)]
    assert [t.transactional_id("g") for t in targets] == [
        "g.all.0",
        "g.all.0.east.o.1",
        "g.all.0.east.o.2",
    ]
    assert [t.checkpoint_key for t in targets] == [
        "all/0/east/o",
        "all/0/east/o/1",
        "all/0/east/o/2",
    ]


def test_provenance_header_names_the_source_record():
    headers = [
        ("app", b"x"),
        (provenance.HEADER, provenance.encode(SourcePartition("us-east-1", "o", 2), 41)),
    ]
    assert provenance.source_offset(headers, SourcePartition("us-east-1", "o", 2)) == 41
    assert provenance.source_offset(headers, SourcePartition("us-east-1", "o", 3)) is None
    assert provenance.source_offset(None, SourcePartition("us-east-1", "o", 2)) is None


@pytest.mark.parametrize(
    "tail", [b"9" * 5000, b"99999999999999999999", "²".encode(), "\u0661".encode(), b"-5", b"05"]
)
def test_a_provenance_header_with_no_offset_names_none(tail):
    """A forged header (a destination writer chooses it) is not an offset: no ValueError
    out of int(), no offset past Kafka's range."""
    source = SourcePartition("us-east-1", "o", 2)
    headers = [(provenance.HEADER, source.header_prefix.encode() + tail)]
    assert provenance.source_offset(headers, source) is None


def test_provenance_is_appended_to_headers_of_a_sliced_segment_table():
    headers = [
        [],
        [{"key": "a", "value": b"1"}, {"key": "a", "value": None}],
        [{"key": "b", "value": b""}],
        [],
    ]
    table = pa.table(
        {
            "offset": [7, 8, 9, 12],
            "timestamp": [0, 0, 0, 0],
            "timestamp_type": [1, 1, 1, 1],
            "key": [None, b"", b"k", b"k"],
            "value": [b"v", None, b"", b"w"],
            "headers": headers,
        },
        schema=SCHEMA,
    ).slice(1, 3)
    orders = SourcePartition("us-east-1", "orders", 2)
    got = provenance.with_provenance(table.column("headers"), table.column("offset"), orders)
    source = lambda o: (provenance.HEADER, provenance.encode(orders, o))  # noqa: E731
    assert got == [
        [("a", b"1"), ("a", None), source(8)],
        [("b", b""), source(9)],
        [source(12)],
    ]


@pytest.mark.parametrize("per_record", [0, 1, 3])
def test_provenance_when_every_record_carries_the_same_number_of_headers(per_record: int):
    offsets = [4, 5, 6, 9, 10]
    headers = [
        [
            {"key": f"h{j}", "value": None if j == 1 else b"%d-%d" % (o, j)}
            for j in range(per_record)
        ]
        for o in offsets
    ]
    table = pa.table(
        {
            "offset": offsets,
            "timestamp": [0] * 5,
            "timestamp_type": [1] * 5,
            "key": [b"k"] * 5,
            "value": [b"v"] * 5,
            "headers": headers,
        },
        schema=SCHEMA,
    ).slice(1, 3)
    orders = SourcePartition("us-east-1", "orders", 2)
    got = provenance.with_provenance(table.column("headers"), table.column("offset"), orders)
    assert got == [
        [(h["key"], h["value"]) for h in headers[i]]
        + [(provenance.HEADER, provenance.encode(orders, offsets[i]))]
        for i in (1, 2, 3)
    ]
    assert all(type(record_headers) is list for record_headers in got)


def test_provenance_of_no_records_is_empty():
    empty = SCHEMA.empty_table()
    source = SourcePartition("us-east-1", "orders", 2)
    assert provenance.with_provenance(empty.column("headers"), empty.column("offset"), source) == []


def test_header_and_checkpoint_key_bytes_are_unchanged_for_a_region_origin():
    source = SourcePartition("us-east-1", "orders.v1", 3)
    assert provenance.encode(source, 120) == b"us-east-1/orders.v1/3/120"
    target = WriteTarget(source, "copy", 3)
    assert target.checkpoint_key == "copy/3/us-east-1/orders.v1"
    assert target.transactional_id("replicator-ingress") == "replicator-ingress.copy.3"


def test_a_relay_upstream_is_an_origin_like_a_region():
    upstream = SourcePartition("east-b", "orders", 0)
    headers = [(provenance.HEADER, provenance.encode(upstream, 9))]
    assert provenance.source_offset(headers, upstream) == 9
    assert provenance.source_offset(headers, SourcePartition("us-east-1", "orders", 0)) is None


def test_resume_point_is_the_furthest_of_checkpoint_and_destination_tail():
    checkpoint = Checkpoint("copy", 0, "us-east-1", "o", 120, 57, 1.0)
    # A segment ending in offsets without records: the checkpoint is ahead of the tail.
    assert furthest(checkpoint, (57, 99)).next_source_offset == 120
    # Records committed after the checkpoint: the tail is ahead.
    assert furthest(checkpoint, (80, 150)).next_source_offset == 151
    assert furthest(checkpoint, (80, 150)).destination_offset == 80
    assert furthest(None, None).next_source_offset is None
    assert furthest(None, (4, 9)).next_source_offset == 10
