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

MAX_EVENT_BYTES = 64 * 1024
"""An event names one S3 key: anything longer is not one."""
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
        if len(raw) > MAX_EVENT_BYTES:
            raise ValueError(f"{len(raw)} bytes, more than an event's {MAX_EVENT_BYTES}")
        try:
            data = json.loads(raw)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
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

    Raises ``ValueError`` when the body is not an S3 notification at all: such a message
    must not be deleted (it goes to the dead-letter queue after its retries).
    """
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("Event") == "s3:TestEvent":
        return ParsedNotification([], ["s3:TestEvent"])
    records = data.get("Records")
    if not isinstance(records, list):
        raise ValueError("no Records list")
    events: list[tuple[SourcePartition, SegmentEvent]] = []
    ignored: list[str] = []
    for record in records:
        name = str(record.get("eventName", ""))
        if name.startswith("ObjectCreated:"):
            kind: Literal["created", "removed"] = CREATED
        elif name.startswith("ObjectRemoved:"):
            kind = REMOVED
        else:
            ignored.append(f"event {name!r}")
            continue
        obj = record.get("s3", {}).get("object", {})
        key = unquote_plus(str(obj.get("key", "")))
        try:
            segment = SegmentKey.from_s3_key(key, prefix)
        except SegmentKeyError:
            ignored.append(f"not a segment key: {key}")
            continue
        if (segment.region, segment.topic) not in sources:
            ignored.append(f"not a configured source: {key}")
            continue
        event = SegmentEvent(
            kind, key, int(obj.get("size", 0) or 0), str(record.get("eventTime", ""))
        )
        events.append((SourcePartition(segment.region, segment.topic, segment.partition), event))
    return ParsedNotification(events, ignored)
