"""Topic descriptors: ``{prefix}/{region}/{topic}/_topic.json``.

Egress writes, per exported topic, its partition count and the topic configs a destination
should copy, so that ingress can create the destination topic alike. Refreshed when they
change (checked every ``[egress] descriptor_interval``).
"""

from __future__ import annotations

import logging
from typing import Any

from egress.catalog import SourceCatalog
from replicator.core.config import Config, required
from replicator.core.errors import ReplicatorError
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.topics import copied_configs
from replicator.core.segments.key import topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)

DESCRIPTOR_VERSION = 1


def describe(topic: str, partitions: int, configs: dict[str, str], region: str) -> dict[str, Any]:
    return {
        "format_version": DESCRIPTOR_VERSION,
        "region": region,
        "topic": topic,
        "partitions": partitions,
        "configs": copied_configs(configs),
    }


class DescriptorPublisher:
    def __init__(self, config: Config, catalog: SourceCatalog) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self._catalog = catalog
        self._store = SegmentStore.for_region(config, self.egress.region)
        self._published: dict[str, dict[str, Any]] = {}

    def publish(self) -> None:
        """Write the descriptors that changed since the last call; never raises for a
        broker or bucket hiccup (the next call retries)."""
        try:
            counts: dict[str, int] = {}
            for topic, _partition in self._catalog.partitions():
                counts[topic] = counts.get(topic, 0) + 1
            for topic, count in sorted(counts.items()):
                descriptor = describe(topic, count, self._configs(topic), self.egress.region)
                if self._published.get(topic) == descriptor:
                    continue
                key = topic_descriptor_s3_key(self.config.s3.prefix, self.egress.region, topic)
                self._store.put_json(key, descriptor)
                self._published[topic] = descriptor
                log.info(
                    "topic descriptor of %s: %d partitions, configs %s",
                    topic,
                    count,
                    descriptor["configs"],
                )
        except ReplicatorError as exc:
            log.warning("could not refresh topic descriptors: %s", exc)

    def _configs(self, topic: str) -> dict[str, str]:
        try:
            return self._catalog.topic_configs(topic)
        except BrokerError as exc:
            log.warning("%s", exc)
            return {}
