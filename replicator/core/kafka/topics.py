"""Destination topics: created like their source, or checked against it.

A destination gets the source's partition count and the configs that describe its data
(retention, compaction, message size, timestamps); configs that describe the source
cluster's hardware or placement are not copied. A destination that exists with fewer
partitions than needed is refused before anything is produced.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka.admin import AdminClient

from replicator.core.kafka.clients import ensure_topic
from replicator.core.kafka.errors import DestinationTopicError

log = logging.getLogger(__name__)

COPIED_CONFIGS = (
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "max.message.bytes",
    "message.timestamp.type",
    "compression.type",
)


def copied_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """The configs a destination inherits from its source (the allow-list above)."""
    return {k: str(configs[k]) for k in COPIED_CONFIGS if k in configs}


def prepare_destination(
    admin: AdminClient, topic: str, partitions: int, configs: Mapping[str, object], source: str
) -> None:
    """Create ``topic`` with ``partitions`` and the copied ``configs`` when missing; raise
    :class:`DestinationTopicError` when it exists with fewer partitions. ``source`` names
    where the records come from, for the messages."""
    metadata = admin.list_topics(timeout=30)
    existing = metadata.topics.get(topic)
    if existing is not None and existing.error is None:
        if len(existing.partitions) < partitions:
            raise DestinationTopicError(
                f"destination topic {topic} has {len(existing.partitions)} partitions but "
                f"{source} needs {partitions}; add partitions to the destination "
                "(nothing was produced)"
            )
        return
    kept = copied_configs(configs)
    if ensure_topic(admin, topic, partitions, kept):
        log.info(
            "created destination topic %s for %s: %d partitions, configs %s",
            topic,
            source,
            partitions,
            kept,
        )
