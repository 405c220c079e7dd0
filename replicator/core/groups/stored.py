"""Reading exported group offsets objects out of a bucket (I/O).

A damaged or foreign object under ``_groups/`` is skipped with a warning naming its key:
it must not stop the other groups from failing over.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from replicator.core.aws.errors import StorageError
from replicator.core.groups.errors import GroupOffsetsError
from replicator.core.groups.offsets_file import (
    MAX_OBJECT_BYTES,
    GroupOffsets,
    group_history_s3_prefix,
    group_of_s3_key,
    groups_s3_prefix,
    history_entry,
)
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)


def read_group_offsets(store: SegmentStore, region: str, topic: str) -> list[GroupOffsets]:
    """Every group's exported offsets on ``region``/``topic`` in ``store``'s bucket."""
    listed = store.list_objects(groups_s3_prefix(store.prefix, region, topic))
    return _read(store, region, topic, [(k, size, group_of_s3_key(k)) for k, size in listed])


def read_group_offsets_at(
    store: SegmentStore, region: str, topic: str, until_ms: int | None
) -> list[GroupOffsets]:
    """Every group's offsets on ``region``/``topic`` as they were at ``until_ms`` (the
    last change read at or before it; None: the latest), from the groups' history."""
    latest: dict[str, tuple[int, str, int]] = {}
    for s3_key, size in store.list_objects(group_history_s3_prefix(store.prefix, region, topic)):
        entry = history_entry(s3_key)
        if entry is None:
            log.warning("skipping group offsets history object %s: not a history key", s3_key)
            continue
        group, stamp = entry
        if until_ms is not None and stamp > until_ms:
            continue
        if group not in latest or latest[group][0] < stamp:
            latest[group] = (stamp, s3_key, size)
    chosen = [(s3_key, size, group) for group, (_, s3_key, size) in sorted(latest.items())]
    return _read(store, region, topic, chosen)


def _read(
    store: SegmentStore, region: str, topic: str, objects: Sequence[tuple[str, int, str | None]]
) -> list[GroupOffsets]:
    found = []
    for s3_key, size, group in objects:
        try:
            if group is None:
                raise GroupOffsetsError(f"{s3_key}: not a group offsets object")
            if size > MAX_OBJECT_BYTES:
                raise GroupOffsetsError(f"{s3_key}: {size} bytes, over {MAX_OBJECT_BYTES}")
            offsets = GroupOffsets.from_json(store.get_json(s3_key), s3_key)
            if (offsets.region, offsets.topic, offsets.group) != (region, topic, group):
                raise GroupOffsetsError(
                    f"{s3_key}: names {offsets.region}/{offsets.topic} group "
                    f"{offsets.group!r}, not what its key says"
                )
        except (GroupOffsetsError, StorageError) as exc:
            log.warning("skipping group offsets: %s", exc)
            continue
        found.append(offsets)
    return found
