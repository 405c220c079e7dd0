"""Keeping exported consumer groups' offsets translated in the destination.

Every ``[ingress] group_sync_interval`` one ingress instance (the owner of segment-events
partition 0) reads the group offsets objects egress exported for each configured source,
translates them against what the destination holds and commits them for groups without
members, forward only. A group whose source offset is ahead of the replay is moved as far
as the destination goes and counted as behind; later rounds move it on. So at any moment
an application can start in the destination and read on exactly where the last exported
commit left it.

Anyone who can write to the bucket can write a group's offsets object, so only the groups
``[ingress] consumer_groups`` names are read (none until named; at most ``max_groups`` a
topic), and an offset beyond the segments the bucket holds for its partition is not
committed: a group is never moved past data the bucket does not have (a real group's
offset that is ahead of the segments still on their way is committed once they are in).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from ingress.metrics import IngressMetrics
from replicator.core.config import Config, IngressConfig, IngressSource, required
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.destination import OffsetTranslator
from replicator.core.groups.offsets_file import GroupOffsets, GroupSelection
from replicator.core.groups.plan import GroupPartition, translate_groups
from replicator.core.groups.stored import read_group_offsets
from replicator.core.groups.sync import GroupOffsetSync, SyncResult
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.store import SegmentStore
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)


def ingress_targets(
    sources: list[IngressSource], partitions: dict[tuple[str, str], int]
) -> Callable[[SourcePartition], WriteTarget | None]:
    """Where ingress writes each source partition (None: not configured, or beyond the
    partitions known)."""
    by_source = {(s.region, s.topic): s for s in sources}

    def target(source: SourcePartition) -> WriteTarget | None:
        configured = by_source.get((source.origin, source.topic))
        if configured is None or source.partition >= partitions.get(
            (source.origin, source.topic), 0
        ):
            return None
        return WriteTarget(source, configured.destination, source.partition)

    return target


def translate_exported(
    config: Config,
    kafka: dict[str, Any],
    sources: list[IngressSource],
    partitions: dict[tuple[str, str], int],
    groups: set[str] | None = None,
) -> list[GroupPartition]:
    """Translate the exported offsets of the groups ``[ingress] consumer_groups`` names
    (or of ``groups``, an operator's choice) on the concrete ``sources`` (see
    :mod:`ingress.sources`), read from ingress's bucket."""
    ingress = required(config, "ingress")
    selection = synced_groups(ingress, groups)
    if selection.names is None and not selection.patterns:
        return []  # none named: nothing is read
    store = SegmentStore.for_region(config, ingress.region)
    targets = ingress_targets(sources, partitions)
    committed = [
        entry
        for source in sources
        for entry in _within_exported(
            store, targets, read_group_offsets(store, source.region, source.topic, selection)
        )
    ]
    checkpoints = CheckpointStore(kafka, ingress.checkpoint_topic, ingress.checkpoint_partitions)
    return translate_groups(OffsetTranslator(kafka, checkpoints), committed, targets)


def synced_groups(ingress: IngressConfig, names: set[str] | None = None) -> GroupSelection:
    """The exported groups ingress and ``replicator failover`` act on: the ``names`` an
    operator gave, else those ``[ingress] consumer_groups`` matches; ``max_groups`` at
    most."""
    return GroupSelection(
        patterns=tuple(ingress.consumer_groups),
        names=frozenset(names) if names is not None else None,
        limit=ingress.max_groups,
    )


def _within_exported(
    store: SegmentStore,
    targets: Callable[[SourcePartition], WriteTarget | None],
    exported: list[GroupOffsets],
) -> Iterator[tuple[str, SourcePartition, int]]:
    """(group, source partition, offset) of the ``exported`` groups' offsets on replayed
    partitions that the bucket's segments reach; those beyond are left out, logged."""
    ends: dict[SourcePartition, int] = {}
    for group in exported:
        beyond = []
        for partition, offset in sorted(group.offsets.items()):
            source = SourcePartition(group.region, group.topic, partition)
            if targets(source) is None:
                continue
            if source not in ends:
                ends[source] = store.exported_end(group.region, group.topic, partition) or 0
            if offset > ends[source]:
                beyond.append(f"partition {partition} at {offset} (segments end at {ends[source]})")
                continue
            yield group.group, source, offset
        if beyond:
            log.warning(
                "group %s on %s/%s: offsets beyond the segments in the bucket not committed: %s",
                escape(group.group),
                group.region,
                group.topic,
                "; ".join(beyond),
            )


def group_sync(
    config: Config,
    kafka: dict[str, Any],
    metrics: IngressMetrics,
    partitions: Callable[[], dict[tuple[str, str], int]],
    sources: Callable[[], list[IngressSource]],
    leading: Callable[[], bool],
) -> GroupOffsetSync:
    """The sync thread of an ingress instance (not started). ``partitions``: the source
    partition counts known now; ``sources``: the concrete sources now; ``leading``:
    whether this instance is the one that syncs."""
    ingress = required(config, "ingress")

    def observe(result: SyncResult) -> None:
        for group, (moved, behind) in result.items():
            metrics.groups_behind.labels(group).set(behind)
            if moved:
                metrics.group_partitions_moved.labels(group).inc(moved)

    return GroupOffsetSync(
        GroupAdmin(kafka, ingress.region),
        lambda: translate_exported(config, kafka, sources(), partitions()),
        ingress.group_sync_interval,
        leading=leading,
        observe=observe,
    )
