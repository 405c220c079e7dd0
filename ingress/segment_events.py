"""Segment events: what the S3 notifications on SQS say, as stored on the segment-events
topic. Pure functions.

An event names one object (created or removed) of a configured source. Its Kafka key is
the source partition ("region/topic/partition") and its events-topic partition a stable
function of it, so that every event of one source partition lands on one events-topic
partition — and the instance that owns that events-topic partition (by Kafka group
membership) owns the source partition.
"""

from __future__ import annotations

import json
from collections.abc import Container
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote_plus

from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.errors import SegmentKeyError
from replicator.core.segments.key import SegmentKey
from replicator.core.untrusted_json import json_object

MAX_EVENT_BYTES = 64 * 1024
"""An event names one S3 key: anything longer is not one."""
MAX_NOTIFICATION_BYTES = 1024 * 1024
"""SQS's own limit on a message body: anything longer did not come from S3."""
CREATED: Literal["created"] = "created"
REMOVED: Literal["removed"] = "removed"


@dataclass(frozen=True)
class SegmentEvent:
    kind: Literal["created", "removed"]
    s3_key: str
    """The S3 object key of the segment (``key`` in the event's JSON)."""
    size: int
    event_time: str

    def segment(self, prefix: str) -> SegmentKey:
        return SegmentKey.from_s3_key(self.s3_key, prefix)

    def to_json(self) -> bytes:
        data = {"kind": self.kind, "key": self.s3_key, "size": self.size}
        return json.dumps({**data, "event_time": self.event_time}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> SegmentEvent:
        """Parse an event; raises ``ValueError`` saying why for anything else (a
        tombstone, another JSON value, a field of the wrong type, text too deep)."""
        if raw is None:
            raise ValueError("a tombstone, not an event")
        data = json_object(raw, MAX_EVENT_BYTES)
        kind, s3_key = data.get("kind"), data.get("key")
        size, event_time = data.get("size", 0), data.get("event_time", "")
        if kind not in (CREATED, REMOVED):
            raise ValueError(f"unknown event kind {kind!r}")
        if not isinstance(s3_key, str):
            raise ValueError("key is not a string")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("size is not a non-negative integer")
        if not isinstance(event_time, str):
            raise ValueError("event_time is not a string")
        return cls(kind, s3_key, size, event_time)


def partition_key(source: SourcePartition) -> str:
    return f"{source.origin}/{source.topic}/{source.partition}"


@dataclass(frozen=True)
class ParsedNotification:
    events: list[tuple[SourcePartition, SegmentEvent]]
    ignored: list[str]
    """Why records were ignored: test events, foreign keys, unconfigured sources."""


def parse_notification(
    body: str, prefix: str, sources: Container[tuple[str, str]]
) -> ParsedNotification:
    """Parse one SQS message body of S3 notifications.

    Raises ``ValueError`` saying why when the body is not an S3 notification — not JSON, too
    large, nested too deep, or any record of the wrong shape: such a message must not be
    deleted (it goes to the dead-letter queue after its retries). Nothing else escapes.
    """
    data = json_object(body, MAX_NOTIFICATION_BYTES)
    if data.get("Event") == "s3:TestEvent":
        return ParsedNotification([], ["s3:TestEvent"])
    records = data.get("Records")
    if not isinstance(records, list):
        raise ValueError("no Records list")
    events: list[tuple[SourcePartition, SegmentEvent]] = []
    ignored: list[str] = []
    for index, record in enumerate(records):
        parsed = _parse_record(record, f"Records[{index}]", prefix, sources)
        if isinstance(parsed, str):
            ignored.append(parsed)
        else:
            events.append(parsed)
    return ParsedNotification(events, ignored)


def _parse_record(
    record: object, where: str, prefix: str, sources: Container[tuple[str, str]]
) -> tuple[SourcePartition, SegmentEvent] | str:
    """One S3 event record: the event, or why it is ignored (a string); ``ValueError``
    for a record of the wrong shape."""
    if not isinstance(record, dict):
        raise ValueError(f"{where} is a JSON {type(record).__name__}, not an object")
    name = record.get("eventName", "")
    if not isinstance(name, str):
        raise ValueError(f"{where}.eventName is not a string")
    if name.startswith("ObjectCreated:"):
        kind: Literal["created", "removed"] = CREATED
    elif name.startswith("ObjectRemoved:"):
        kind = REMOVED
    else:
        return f"event {name!r}"
    s3 = record.get("s3")
    obj = s3.get("object") if isinstance(s3, dict) else None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}.s3.object is not an object")
    raw_key, size, event_time = obj.get("key"), obj.get("size", 0), record.get("eventTime", "")
    if not isinstance(raw_key, str):
        raise ValueError(f"{where}.s3.object.key is not a string")
    if size is None:
        size = 0
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"{where}.s3.object.size is not a non-negative integer")
    if not isinstance(event_time, str):
        raise ValueError(f"{where}.eventTime is not a string")
    key = unquote_plus(raw_key)
    try:
        segment = SegmentKey.from_s3_key(key, prefix)
    except SegmentKeyError:
        return f"not a segment key: {key}"
    if (segment.region, segment.topic) not in sources:
        return f"not a configured source: {key}"
    source = SourcePartition(segment.region, segment.topic, segment.partition)
    return source, SegmentEvent(kind, key, size, event_time)
