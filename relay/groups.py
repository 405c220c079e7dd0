"""Consumer-group offsets for a direct relay, read straight from the upstream cluster.

Identical upstreams share their offsets, so any upstream that answers gives the same
committed offsets; they are tried in the config's order. Topics merged into one
destination partition (``destination_partition``) have no translation and are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from replicator.core.config import Config, RelayConfig, required
from replicator.core.groups.admin import GroupAdmin, matching
from replicator.core.groups.destination import OffsetTranslator
from replicator.core.groups.plan import GroupPartition, translate_groups
from replicator.core.groups.sync import GroupOffsetSync
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.provenance import SourcePartition

log = logging.getLogger(__name__)


def relay_target(relay: RelayConfig, source: SourcePartition) -> WriteTarget | None:
    for topic in relay.topics:
        if topic.source_topic == source.topic and topic.destination_partition is None:
            return WriteTarget(source, topic.destination, source.partition)
    return None


def upstream_committed(
    config: Config, names: set[str] | None, patterns: list[str]
) -> list[tuple[str, SourcePartition, int]]:
    """(group, source partition, committed offset) of the named groups (or of those
    matching ``patterns``) on the relayed topics, from the first upstream that answers."""
    relay = required(config, "relay")
    relayed = {t.source_topic for t in relay.topics}
    failures = []
    for upstream in relay.sources:
        admin = GroupAdmin(client_config(config.region(upstream).kafka), upstream)
        try:
            groups = sorted(names) if names is not None else matching(admin.group_ids(), patterns)
            return [
                (group, SourcePartition(relay.origin, topic, partition), offset)
                for group in groups
                for (topic, partition), offset in sorted(admin.committed(group).items())
                if topic in relayed
            ]
        except BrokerError as exc:
            failures.append(str(exc))
    raise BrokerError("no upstream answered for group offsets: " + "; ".join(failures))


def translate_upstream(
    config: Config, kafka: dict[str, Any], names: set[str] | None, patterns: list[str]
) -> list[GroupPartition]:
    relay = required(config, "relay")
    checkpoints = CheckpointStore(kafka, relay.checkpoint_topic, relay.checkpoint_partitions)
    return translate_groups(
        OffsetTranslator(kafka, checkpoints),
        upstream_committed(config, names, patterns),
        lambda source: relay_target(relay, source),
    )


def group_sync(
    config: Config, kafka: dict[str, Any], leading: Callable[[], bool]
) -> GroupOffsetSync | None:
    """The relay's sync thread (not started), when ``[relay] consumer_groups`` names any;
    ``leading``: whether this instance is the one that syncs."""
    relay = required(config, "relay")
    if not relay.consumer_groups:
        return None

    return GroupOffsetSync(
        GroupAdmin(kafka, relay.destination),
        lambda: translate_upstream(config, kafka, None, relay.consumer_groups),
        relay.group_sync_interval,
        leading=leading,
    )
