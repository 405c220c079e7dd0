"""Segment naming: ``{prefix}/{region}/{topic}/{partition}/{level}/{start:020d}-{end:020d}``.

``[start, end]`` is the inclusive range of source offsets a segment *covers*: everything
that was consumed, including offsets where the log holds no record (compacted away,
transaction markers). Consecutive segments of a partition therefore tile its offset space
with no holes, and a reader can tell a missing segment from an empty stretch of log by the
keys alone. Offsets are zero-padded to 20 digits so that lexicographic S3 listings are in
offset order within a level.

Pure functions only; the store does the I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from replicator.core.segments.errors import SegmentKeyError

MAX_OFFSET = 2**63 - 1
"""Kafka offsets are signed 64-bit."""
MAX_PARTITION = 9_999_999_999
"""The highest partition number a segment key can spell (10 digits)."""
TOPIC_DESCRIPTOR = "_topic.json"
TOPIC_ACLS = "_acls.json"

# Matched with fullmatch: ``$`` would also accept a trailing newline ("a\n"), letting a
# forged S3 key ending in %0A parse to another segment's identity.
_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")
_REGION_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
# ASCII digits only: ``\d`` matches the digits of every script, and int() reads them
# (Arabic-Indic "\u0661\u0660" is 10), which would give one segment a second name.
_RANGE_RE = re.compile(r"([0-9]{20})-([0-9]{20})")
_INT_RE = re.compile(r"0|[1-9][0-9]{0,9}")
_DOTS = (".", "..")
"""Names that are path steps, not names."""


def check_topic_name(name: str) -> str:
    """Kafka's own rule for topic names; they become one S3 key component."""
    if name in _DOTS or not _TOPIC_RE.fullmatch(name):
        raise SegmentKeyError(
            f"invalid Kafka topic name {name!r}: use 1-249 characters of "
            "letters, digits, '.', '_' and '-'"
        )
    return name


def check_region_name(name: str) -> str:
    if name in _DOTS or not _REGION_RE.fullmatch(name):
        raise SegmentKeyError(
            f"invalid region name {name!r}: use 1-64 letters, digits, '.', '_' and '-' "
            "(it becomes part of every S3 key)"
        )
    return name


@dataclass(frozen=True, order=True)
class SegmentKey:
    """The identity of one segment. Orders by (region, topic, partition, level, start, end)."""

    region: str
    topic: str
    partition: int
    level: int
    start: int
    end: int

    def __post_init__(self) -> None:
        check_region_name(self.region)
        check_topic_name(self.topic)
        if self.partition < 0:
            raise SegmentKeyError(f"negative partition {self.partition}")
        if self.level < 0:
            raise SegmentKeyError(f"negative level {self.level}")
        if not 0 <= self.start <= self.end <= MAX_OFFSET:
            raise SegmentKeyError(
                f"invalid covered range [{self.start}, {self.end}]: need "
                f"0 <= start <= end <= {MAX_OFFSET}"
            )

    @property
    def offset_count(self) -> int:
        """How many offsets the segment covers (records or not)."""
        return self.end - self.start + 1

    def covers(self, offset: int) -> bool:
        return self.start <= offset <= self.end

    def to_s3_key(self, prefix: str) -> str:
        """The S3 object key of this segment under ``prefix``."""
        head = partition_s3_prefix(prefix, self.region, self.topic, self.partition)
        return f"{head}{self.level}/{self.start:020d}-{self.end:020d}"

    @classmethod
    def from_s3_key(cls, s3_key: str, prefix: str) -> SegmentKey:
        """Parse the S3 object key of a segment written under ``prefix``.

        Raises :class:`SegmentKeyError` saying what is wrong; callers listing a bucket
        treat that as "not a segment" (descriptors, foreign objects).
        """
        return _parse_s3_key(s3_key, prefix)

    def __str__(self) -> str:
        return (
            f"{self.region}/{self.topic}/{self.partition}/{self.level}/"
            f"{self.start:020d}-{self.end:020d}"
        )


def topic_s3_prefix(prefix: str, region: str, topic: str) -> str:
    """Key prefix (ending in '/') of everything stored for one source topic."""
    return f"{prefix}/{region}/{topic}/" if prefix else f"{region}/{topic}/"


def partition_s3_prefix(prefix: str, region: str, topic: str, partition: int) -> str:
    """Key prefix (ending in '/') of one partition's segments at every level."""
    return f"{topic_s3_prefix(prefix, region, topic)}{partition}/"


def topic_descriptor_s3_key(prefix: str, region: str, topic: str) -> str:
    """The S3 object key of a topic's descriptor (partition count and configs)."""
    return topic_s3_prefix(prefix, region, topic) + TOPIC_DESCRIPTOR


def topic_acls_s3_key(prefix: str, region: str, topic: str) -> str:
    """The S3 object key of the read side of a topic's ACLs (``[egress] sync_acls``)."""
    return topic_s3_prefix(prefix, region, topic) + TOPIC_ACLS


def _parse_s3_key(key: str, prefix: str) -> SegmentKey:
    head = f"{prefix}/" if prefix else ""
    if not key.startswith(head):
        raise SegmentKeyError(f"key {key!r} is not under prefix {prefix!r}")
    parts = key[len(head) :].split("/")
    if len(parts) != 5:
        raise SegmentKeyError(
            f"key {key!r} does not have the form region/topic/partition/level/start-end "
            f"under prefix {prefix!r}"
        )
    region, topic, partition, level, offsets = parts
    if not _INT_RE.fullmatch(partition):
        raise SegmentKeyError(f"key {key!r}: partition {partition!r} is not a number")
    if not _INT_RE.fullmatch(level):
        raise SegmentKeyError(f"key {key!r}: level {level!r} is not a number")
    match = _RANGE_RE.fullmatch(offsets)
    if not match:
        raise SegmentKeyError(
            f"key {key!r}: range {offsets!r} is not two 20-digit offsets 'start-end'"
        )
    try:
        parsed = SegmentKey(
            region, topic, int(partition), int(level), int(match.group(1)), int(match.group(2))
        )
    except SegmentKeyError as exc:
        raise SegmentKeyError(f"key {key!r}: {exc}") from None
    if parsed.to_s3_key(prefix) != key:  # one segment, one name
        raise SegmentKeyError(f"key {key!r} is not how segment {parsed} is written")
    return parsed
