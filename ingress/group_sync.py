"""Keeping exported consumer groups' offsets translated in the destination.

Every ``[ingress] group_sync_interval`` one ingress instance (the owner of segment-events
partition 0) reads the group offsets objects egress exported for each configured source,
translates them against what the destination holds and commits them for groups without
members, forward only. A group whose source offset is ahead of the replay is moved as far
as the destination goes and counted as behind; later rounds move it on. So at any moment
an application can start in the destination and read on exactly where the last exported
commit left it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ingress.metrics import IngressMetrics
from replicator.core.config import Config, IngressSource, required
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.destination import OffsetTranslator
from replicator.core.groups.plan import GroupPartition, translate_groups
from replicator.core.groups.stored import read_group_offsets
from replicator.core.groups.sync import GroupOffsetSync, SyncResult
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.store import SegmentStore


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
    """Translate the exported offsets of every group (or of ``groups``) on the concrete
    ``sources`` (see :mod:`ingress.sources`), read from ingress's bucket."""
    ingress = required(config, "ingress")
    store = SegmentStore.for_region(config, ingress.region)
    committed = [
        (exported.group, SourcePartition(source.region, source.topic, partition), offset)
        for source in sources
        for exported in read_group_offsets(store, source.region, source.topic)
        if groups is None or exported.group in groups
        for partition, offset in sorted(exported.offsets.items())
    ]
    checkpoints = CheckpointStore(kafka, ingress.checkpoint_topic, ingress.checkpoint_partitions)
    return translate_groups(
        OffsetTranslator(kafka, checkpoints),
        committed,
        ingress_targets(sources, partitions),
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
