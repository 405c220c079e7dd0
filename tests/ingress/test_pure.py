import json

import pytest

from ingress.replay_plan import retry_intervals
from ingress.segment_events import (
    SegmentEvent,
    events_partition,
    parse_notification,
)
from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import Checkpoint, checkpoint_partition
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.selection import CaughtUp, Gap, ReadNext, next_step

SOURCES = {("us-east-1", "orders.v1")}


def key(start, end, level=0, partition=0):
    return SegmentKey("us-east-1", "orders.v1", partition, level, start, end)


def notification(*records):
    return json.dumps({"Records": list(records)})


def s3_record(name, object_key, size=10):
    return {
        "eventName": name,
        "eventTime": "2026-11-22T00:00:00Z",
        "s3": {"object": {"key": object_key, "size": size}},
    }


def test_created_and_removed_events_with_url_encoded_keys():
    encoded = "data%2Fus-east-1%2Forders.v1%2F3%2F0%2F00000000000000000000-00000000000000000009"
    parsed = parse_notification(
        notification(
            s3_record("ObjectCreated:Put", encoded), s3_record("ObjectRemoved:Delete", encoded)
        ),
        "data",
        SOURCES,
    )
    assert [(src, e.kind) for src, e in parsed.events] == [
        (("us-east-1", "orders.v1", 3), "created"),
        (("us-east-1", "orders.v1", 3), "removed"),
    ]
    assert (
        parsed.events[0][1].key
        == "data/us-east-1/orders.v1/3/0/00000000000000000000-00000000000000000009"
    )


def test_test_event_foreign_keys_and_unconfigured_sources_are_ignored():
    assert parse_notification(
        '{"Service":"Amazon S3","Event":"s3:TestEvent"}', "data", SOURCES
    ).ignored
    parsed = parse_notification(
        notification(
            s3_record("ObjectCreated:Put", "data/us-east-1/orders.v1/_topic.json"),
            s3_record("ObjectCreated:Put", "data/us-east-1/orders.v1/0/0/x.tmp"),
            s3_record(
                "ObjectCreated:Put",
                "data/us-east-1/other/0/0/00000000000000000000-00000000000000000009",
            ),
            s3_record("ObjectCreated:Put", "elsewhere/file+with+spaces"),
        ),
        "data",
        SOURCES,
    )
    assert parsed.events == [] and len(parsed.ignored) == 4


@pytest.mark.parametrize("body", ["not json", "[1,2]", '{"Records": 5}', "{}"])
def test_messages_that_are_not_notifications_raise(body):
    with pytest.raises(ValueError):
        parse_notification(body, "data", SOURCES)


def test_event_json_round_trip_and_stable_partitioning():
    event = SegmentEvent("created", "data/x", 5, "t")
    assert SegmentEvent.from_json(event.to_json()) == event
    source = ("us-east-1", "orders.v1", 7)
    assert events_partition(source, 16) == events_partition(source, 16)
    assert {events_partition(("r", "t", p), 8) for p in range(64)} == set(range(8))


def test_next_step_reads_the_covering_segment_that_reaches_furthest():
    segments = [key(0, 9), key(10, 19), key(0, 99, level=1), key(100, 109)]
    assert next_step(5, segments) == ReadNext(key(0, 99, level=1))
    assert next_step(100, segments) == ReadNext(key(100, 109))


def test_next_step_reports_a_gap_before_later_segments():
    assert next_step(20, [key(0, 19), key(30, 39), key(50, 59)]) == Gap(20, 29)


def test_next_step_caught_up_when_nothing_lies_ahead():
    assert next_step(20, [key(0, 19)]) == CaughtUp()
    assert next_step(0, []) == CaughtUp()


def test_retry_intervals_double_and_add_up_to_the_timeout():
    intervals = retry_intervals(5, 3600.0)
    assert intervals == pytest.approx([3600 / 31 * 2**i for i in range(5)])
    assert sum(intervals) == pytest.approx(3600.0)
    assert retry_intervals(0, 60.0) == [60.0]


def test_checkpoint_round_trip_and_key():
    checkpoint = Checkpoint("copy", 3, "us-east-1", "orders.v1", 120, 57, 1.5)
    assert Checkpoint.from_json(checkpoint.to_json()) == checkpoint
    assert checkpoint.key == "copy/3/us-east-1/orders.v1"
    assert 0 <= checkpoint_partition(checkpoint.key, 4) < 4


def test_provenance_header_names_the_source_record():
    headers = [
        ("app", b"x"),
        (provenance.HEADER, provenance.encode(SourcePartition("us-east-1", "o", 2), 41)),
    ]
    assert provenance.source_offset(headers, SourcePartition("us-east-1", "o", 2)) == 41
    assert provenance.source_offset(headers, SourcePartition("us-east-1", "o", 3)) is None
    assert provenance.source_offset(None, SourcePartition("us-east-1", "o", 2)) is None


def test_provenance_is_appended_to_headers_of_a_sliced_segment_table():
    import pyarrow as pa

    from replicator.core.segments.format import SCHEMA

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
