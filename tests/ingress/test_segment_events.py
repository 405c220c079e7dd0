"""Segment events: S3 notifications parsed into events, and their JSON on the events topic."""

import json

import pytest

from ingress.segment_events import (
    SegmentEvent,
    parse_notification,
    partition_key,
)
from replicator.core.kafka.placement import slot_of
from replicator.core.kafka.provenance import SourcePartition
from tests.fixtures.notifications import POISON_NOTIFICATIONS

SOURCES = {("us-east-1", "orders.v1")}


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
        (SourcePartition("us-east-1", "orders.v1", 3), "created"),
        (SourcePartition("us-east-1", "orders.v1", 3), "removed"),
    ]
    assert (
        parsed.events[0][1].s3_key
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
    # The wire format of the events topic (instances of two versions share it).
    assert json.loads(event.to_json()) == {
        "kind": "created",
        "key": "data/x",
        "size": 5,
        "event_time": "t",
    }
    source = SourcePartition("us-east-1", "orders.v1", 7)
    assert slot_of(source, 16) == 1  # placement is stable across versions
    assert partition_key(source) == "us-east-1/orders.v1/7"
    spread = {slot_of(SourcePartition("r", "t", p), 8) for p in range(64)}
    assert spread == set(range(8))


@pytest.mark.parametrize("body", POISON_NOTIFICATIONS)
def test_a_malformed_notification_is_a_value_error_naming_where(body):
    with pytest.raises(ValueError) as raised:
        parse_notification(body, "data", SOURCES)
    if body.startswith('{"Records": [{'):
        assert "Records[0]" in str(raised.value)
