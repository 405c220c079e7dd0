"""Reading exported group offsets objects out of a bucket (I/O).

A damaged or foreign object under ``_groups/`` is skipped with a warning naming its key:
it must not stop the other groups from failing over.
"""

from __future__ import annotations

import logging

from replicator.core.aws.errors import StorageError
from replicator.core.groups.errors import GroupOffsetsError
from replicator.core.groups.offsets_file import (
    MAX_OBJECT_BYTES,
    GroupOffsets,
    group_of_s3_key,
    groups_s3_prefix,
)
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)


def read_group_offsets(store: SegmentStore, region: str, topic: str) -> list[GroupOffsets]:
    """Every group's exported offsets on ``region``/``topic`` in ``store``'s bucket."""
    found = []
    for s3_key, size in store.list_objects(groups_s3_prefix(store.prefix, region, topic)):
        group = group_of_s3_key(s3_key)
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
