"""Reading exported group offsets objects out of a bucket (I/O).

A damaged or foreign object under ``_groups/`` is skipped with a warning naming its key:
it must not stop the other groups from failing over. In a deployment that signs, one not
signed by its keys (forged, or copied from another key) is refused with an error naming
it, and its group is skipped the same way (:func:`offsets_file.signature_problem`).
Which groups are read at all is the caller's
:class:`~replicator.core.groups.offsets_file.GroupSelection`, decided from the object
keys before any object is fetched: a bucket holding a million forged groups costs one
listing and at most ``limit`` reads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from replicator.core.aws.errors import StorageError
from replicator.core.groups.errors import GroupOffsetsError
from replicator.core.groups.offsets_file import (
    MAX_OBJECT_BYTES,
    GroupOffsets,
    GroupSelection,
    group_history_s3_prefix,
    group_of_s3_key,
    groups_s3_prefix,
    history_entry,
    signature_problem,
)
from replicator.core.segments.store import SegmentStore
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)

EVERY_GROUP = GroupSelection()


def read_group_offsets(
    store: SegmentStore, region: str, topic: str, selection: GroupSelection = EVERY_GROUP
) -> list[GroupOffsets]:
    """The exported offsets of the ``selection``'s groups on ``region``/``topic`` in
    ``store``'s bucket."""
    listed = store.list_objects(groups_s3_prefix(store.prefix, region, topic))
    found: dict[str, tuple[str, int]] = {}
    for s3_key, size in listed:
        group = group_of_s3_key(s3_key)
        if group is None:
            log.warning("skipping group offsets: %s: not a group offsets object", escape(s3_key))
        else:
            found[group] = (s3_key, size)
    chosen = _choose(selection, found, f"{region}/{topic}")
    return _read(store, region, topic, [(*found[group], group) for group in chosen])


def read_group_offsets_at(
    store: SegmentStore,
    region: str,
    topic: str,
    until_ms: int | None,
    selection: GroupSelection = EVERY_GROUP,
) -> list[GroupOffsets]:
    """The offsets of the ``selection``'s groups on ``region``/``topic`` as they were at
    ``until_ms`` (the last change read at or before it; None: the latest), from the
    groups' history."""
    latest: dict[str, tuple[int, str, int]] = {}
    for s3_key, size in store.list_objects(group_history_s3_prefix(store.prefix, region, topic)):
        entry = history_entry(s3_key)
        if entry is None:
            log.warning(
                "skipping group offsets history object %s: not a history key", escape(s3_key)
            )
            continue
        group, stamp = entry
        if until_ms is not None and stamp > until_ms:
            continue
        if group not in latest or latest[group][0] < stamp:
            latest[group] = (stamp, s3_key, size)
    chosen = _choose(
        selection, {g: (k, size) for g, (_, k, size) in latest.items()}, f"{region}/{topic}"
    )
    return _read(store, region, topic, [(latest[g][1], latest[g][2], g) for g in chosen])


def _choose(selection: GroupSelection, found: dict[str, tuple[str, int]], where: str) -> list[str]:
    chosen, left_out = selection.choose(found)
    if left_out:
        log.warning(
            "%s: %d exported groups match, only the first %d by id are read (the limit)",
            where,
            len(chosen) + left_out,
            len(chosen),
        )
    return chosen


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
            data = store.get_json(s3_key)
            offsets = GroupOffsets.from_json(data, s3_key)
            if (offsets.region, offsets.topic, offsets.group) != (region, topic, group):
                raise GroupOffsetsError(
                    f"{s3_key}: names {offsets.region}/{offsets.topic} group "
                    f"{offsets.group!r}, not what its key says"
                )
        except (GroupOffsetsError, StorageError) as exc:
            log.warning("skipping group offsets: %s", escape(exc))
            continue
        problem = signature_problem(data, offsets, s3_key, store.keys)
        if problem is not None:
            log.error(
                "refusing group offsets %s: %s; group %s is left as it is",
                escape(s3_key),
                problem,
                escape(group),
            )
            continue
        found.append(offsets)
    return found
