"""Group offsets objects: ``{prefix}/{region}/{topic}/_groups/{group}.json``.

Egress writes one per (exported topic, consumer group) beside the topic's partitions, so
bucket replication carries it with the segments; the group id is percent-encoded (group
ids may hold any character, an S3 key component may not hold '/'). ``_groups`` can never
be a partition directory (those are numbers), so segment listings skip it.

Each change is also kept under ``{prefix}/{region}/{topic}/_group_history/{group}/
{time_ms:013d}.json`` (same value), so that a restore cut at an instant finds the offsets
the group had committed then. Expire it with a lifecycle rule like the segments.

Value: ``{"format_version": 1, "region", "topic", "group", "time", "offsets": {"0": X}}``
where X is the group's committed offset on that source partition: the offset of the next
record the group will read. Pure functions; the store does the I/O.

Signed like segments where the deployment signs (:mod:`replicator.core.segments.signing`):
a ``"signature"`` field over the object's S3 key (prefix included) and its value in one
canonical spelling (sorted keys, no spaces: what :meth:`GroupOffsets.to_json` gives, so
the reader signs over what it parsed and will use, not over bytes it might read
otherwise). Why: a bucket writer could otherwise give a group offsets at the end of the
exported data, and the group, failed over, would skip everything it had not read. Readers
check the signature after the value's types, before anything acts on it; a history entry
is signed for its own key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from replicator.core.decimal_text import parse_decimal
from replicator.core.groups.errors import GroupOffsetsError
from replicator.core.segments.key import MAX_OFFSET, MAX_PARTITION, topic_s3_prefix
from replicator.core.segments.signing import (
    OBJECT_SIGNATURE_FIELD,
    SigningKeys,
    object_signature_problem,
    signed_object,
)

FORMAT_VERSION = 1
GROUPS_DIRECTORY = "_groups"
HISTORY_DIRECTORY = "_group_history"
SUFFIX = ".json"
MAX_OBJECT_BYTES = 4 * 1024**2
"""Far above any real group's offsets (a partition costs ~30 bytes); a larger object is
refused before it is parsed."""
SIGNATURE_FIELD = OBJECT_SIGNATURE_FIELD
MAX_GROUP_ID_CHARS = 255
TIME_DIGITS = 13
"""History keys' times in ms are zero-padded to 13 digits (sorted in time order until 2286)."""


@dataclass(frozen=True)
class GroupOffsets:
    """One group's committed source offsets on one exported topic."""

    region: str
    topic: str
    group: str
    offsets: dict[int, int]
    """Source partition -> committed offset (the next record to read)."""
    time: float
    """When egress read them from the source cluster (epoch seconds)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "region": self.region,
            "topic": self.topic,
            "group": self.group,
            "time": self.time,
            "offsets": {str(p): o for p, o in sorted(self.offsets.items())},
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> GroupOffsets:
        """Validate an object's parsed JSON; ``where`` (its S3 key) names it in errors."""
        if not isinstance(data, dict):
            raise GroupOffsetsError(f"{where}: not a JSON object")
        if data.get("format_version") != FORMAT_VERSION:
            raise GroupOffsetsError(
                f"{where}: format_version {data.get('format_version')!r} is not {FORMAT_VERSION}"
            )
        offsets = data.get("offsets")
        if not isinstance(offsets, dict):
            raise GroupOffsetsError(f"{where}: 'offsets' is not an object")
        parsed: dict[int, int] = {}
        for name, offset in offsets.items():
            partition = parse_decimal(name, maximum=MAX_PARTITION)
            if partition is None:
                raise GroupOffsetsError(f"{where}: partition {str(name)[:40]!r} is not a number")
            if (
                isinstance(offset, bool)
                or not isinstance(offset, int)
                or not 0 <= offset <= MAX_OFFSET
            ):
                raise GroupOffsetsError(
                    f"{where}: offset {offset!r:.40} of partition {partition} is not an offset"
                )
            parsed[partition] = offset
        fields = {name: data.get(name) for name in ("region", "topic", "group")}
        for name, value in fields.items():
            if not isinstance(value, str) or not value:
                raise GroupOffsetsError(f"{where}: {name!r} is missing or not a string")
        stamp = data.get("time")
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
            raise GroupOffsetsError(f"{where}: 'time' is not a number")
        return cls(
            str(fields["region"]), str(fields["topic"]), str(fields["group"]), parsed, float(stamp)
        )


def signed_json(record: GroupOffsets, s3_key: str, keys: SigningKeys) -> dict[str, Any]:
    """``record``'s value to store at ``s3_key``: signed where the deployment requires
    signatures (:class:`GroupOffsetsError` if this process holds no key to sign with)."""
    try:
        return signed_object(record.to_json(), s3_key, keys)
    except ValueError as exc:
        raise GroupOffsetsError(f"{s3_key}: not written: {exc}") from None


def signature_problem(
    data: dict[str, Any], record: GroupOffsets, s3_key: str, keys: SigningKeys
) -> str | None:
    """Why the object at ``s3_key`` (``data``, parsed as ``record``) is not signed by one
    of ``keys`` (None: it is, or the deployment does not sign)."""
    return object_signature_problem(data, record.to_json(), s3_key, keys)


def groups_s3_prefix(prefix: str, region: str, topic: str) -> str:
    """Key prefix (ending in '/') of a topic's group offsets objects."""
    return f"{topic_s3_prefix(prefix, region, topic)}{GROUPS_DIRECTORY}/"


def group_offsets_s3_key(prefix: str, region: str, topic: str, group: str) -> str:
    """The S3 object key of ``group``'s offsets on ``region``/``topic``."""
    return groups_s3_prefix(prefix, region, topic) + quote(group, safe="") + SUFFIX


def group_of_s3_key(s3_key: str) -> str | None:
    """The group id an object key of :func:`group_offsets_s3_key` names (None: another
    object)."""
    name = s3_key.rsplit("/", 1)[-1]
    if not name.endswith(SUFFIX):
        return None
    group = unquote(name[: -len(SUFFIX)])
    return group if 0 < len(group) <= MAX_GROUP_ID_CHARS else None


def group_history_s3_prefix(prefix: str, region: str, topic: str) -> str:
    """Key prefix (ending in '/') of every group's offsets history on a topic."""
    return f"{topic_s3_prefix(prefix, region, topic)}{HISTORY_DIRECTORY}/"


def group_history_s3_key(prefix: str, region: str, topic: str, group: str, time_ms: int) -> str:
    """The S3 object key of ``group``'s offsets as read at ``time_ms``."""
    head = group_history_s3_prefix(prefix, region, topic)
    return f"{head}{quote(group, safe='')}/{time_ms:0{TIME_DIGITS}d}{SUFFIX}"


def history_entry(s3_key: str) -> tuple[str, int] | None:
    """(group, time in ms) an object key of :func:`group_history_s3_key` names (None:
    another object)."""
    parts = s3_key.rsplit("/", 2)
    if len(parts) != 3 or not parts[2].endswith(SUFFIX):
        return None
    stamp = parse_decimal(parts[2][: -len(SUFFIX)], width=TIME_DIGITS)
    group = unquote(parts[1])
    if stamp is None or not 0 < len(group) <= MAX_GROUP_ID_CHARS:
        return None
    return group, stamp


@dataclass(frozen=True)
class GroupSelection:
    """Which exported groups a reader takes, by id: the ``names`` an operator gave, else
    the ids matching one of ``patterns`` (whole ids), else (neither given) every one; at
    most ``limit`` of them, the first by id. Pure."""

    patterns: tuple[str, ...] | None = None
    names: frozenset[str] | None = None
    limit: int | None = None

    def wants(self, group: str) -> bool:
        if self.names is not None:
            return group in self.names
        if self.patterns is not None:
            return any(re.fullmatch(p, group) for p in self.patterns)
        return True

    def choose(self, groups: Iterable[str]) -> tuple[list[str], int]:
        """The chosen ids in order, and how many more were wanted than the limit takes."""
        wanted = sorted(g for g in set(groups) if self.wants(g))
        if self.limit is None or len(wanted) <= self.limit:
            return wanted, 0
        return wanted[: self.limit], len(wanted) - self.limit
