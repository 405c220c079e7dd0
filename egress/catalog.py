"""What egress looks up about its source: partitions, log ends, the consumer group's
committed offsets, topic configs, and how far the bucket already holds each partition.

Look-ups only: nothing here decides where a batch ends (that is :mod:`egress.planner`,
on :mod:`egress.planning`'s pure functions). The driver's planner, the metrics and the
topic descriptors each read through one :class:`SourceCatalog`.

Offsets here are *next* offsets: a log end, a committed offset and an exported end are all
the half-open end of what they describe.
"""

from __future__ import annotations

import re
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec

from egress.planning import TopicPartitionKey
from replicator.core.config import Config, required
from replicator.core.kafka.clients import LEADER_NOT_READY, client_config, retry_while_moving
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.shared_admin import SharedAdmin
from replicator.core.segments.store import SegmentStore


class SourceCatalog:
    """Look-ups in the egress region's Kafka cluster and bucket."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self.kafka = config.region(self.egress.region).kafka
        self.admin = SharedAdmin(client_config(self.kafka))
        """Renewed after a refusal: see :mod:`replicator.core.kafka.shared_admin`."""
        self.isolation = (
            IsolationLevel.READ_COMMITTED
            if self.egress.isolation_level == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        self._pattern = re.compile(self.egress.topic_pattern) if self.egress.topic_pattern else None

    def partitions(self) -> list[TopicPartitionKey]:
        """Every exported partition: the configured topics (which must exist) and the
        topics matching ``topic_pattern``."""
        try:
            metadata = self.admin.call(lambda admin: admin.list_topics(timeout=30))
        except KafkaException as exc:
            raise BrokerError.from_kafka(
                f"cannot reach Kafka of region {self.egress.region} at "
                f"{self.kafka.bootstrap_servers}",
                exc.args[0],
            ) from None
        found = {name: t for name, t in metadata.topics.items() if t.error is None}
        missing = sorted(set(self.egress.topics) - set(found))
        if missing:
            raise BrokerError(
                f"topics {', '.join(missing)} do not exist in region {self.egress.region} "
                f"({self.kafka.bootstrap_servers})"
            )
        names = set(self.egress.topics)
        if self._pattern is not None:
            names |= {n for n in found if not n.startswith("__") and self._pattern.fullmatch(n)}
        return sorted((n, p) for n in names for p in found[n].partitions)

    def topic_ids(self, topics: list[str]) -> dict[str, str | None]:
        """The broker's id of each topic (it changes when a topic is deleted and created
        again); None where the broker reports none."""
        if not topics:
            return {}
        try:
            found = self.admin.call(
                lambda admin: {
                    name: future.result(timeout=30)
                    for name, future in admin.describe_topics(
                        TopicCollection(sorted(topics))
                    ).items()
                }
            )
        except KafkaException as exc:
            raise BrokerError.from_kafka("describing topics", exc.args[0]) from None
        return {name: _topic_id(d) for name, d in found.items()}

    def watermarks(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(log start, log end) per partition; the end is the last stable offset when
        reading committed records."""
        if not tps:
            return {}
        lows = self._list_offsets({TopicPartition(t, p, 0): OffsetSpec.earliest() for t, p in tps})
        highs = self._list_offsets({TopicPartition(t, p, 0): OffsetSpec.latest() for t, p in tps})
        return {tp: (lows[tp], highs[tp]) for tp in tps}

    def _list_offsets(self, requests: dict[TopicPartition, Any]) -> dict[TopicPartitionKey, int]:
        """The offsets asked for, asked again while a leader is on the move (a broker
        restarting answers with an older leader epoch than the controller's for a moment):
        a planning trigger that failed on it would stop the whole query."""
        asking: list[TopicPartition] = []

        def ask(admin: AdminClient) -> dict[TopicPartitionKey, int]:
            futures = admin.list_offsets(
                requests, isolation_level=self.isolation, request_timeout=30
            )
            result = {}
            for tp, future in futures.items():
                asking[:] = [tp]
                result[(tp.topic, tp.partition)] = future.result().offset
            return result

        try:
            return retry_while_moving(lambda: self.admin.call(ask), LEADER_NOT_READY)
        except KafkaException as exc:
            tp = asking[0]
            raise BrokerError.from_kafka(
                f"cannot read offsets of {tp.topic} partition {tp.partition} in region "
                f"{self.egress.region}",
                exc.args[0],
            ) from None

    def committed(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The egress consumer group's committed offsets (absent where none)."""
        consumer = Consumer(client_config(self.kafka, group_id=self.egress.group_id))
        try:
            wanted = [TopicPartition(t, p) for t, p in tps]
            found = retry_while_moving(lambda: consumer.committed(wanted, timeout=30))
        finally:
            consumer.close()
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}

    def exported(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Per partition, the offset after the last one any segment in the bucket covers
        (absent where there is no segment)."""
        store = SegmentStore.for_region(self.config, self.egress.region)
        result = {}
        for topic, partition in tps:
            end = store.exported_end(self.egress.region, topic, partition)
            if end is not None:
                result[(topic, partition)] = end
        return result

    def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's configs as the broker reports them (raises :class:`BrokerError`)."""
        resource = ConfigResource("topic", topic)
        try:
            entries = self.admin.call(
                lambda admin: admin.describe_configs([resource])[resource].result(timeout=30)
            )
        except KafkaException as exc:
            raise BrokerError.from_kafka(
                f"cannot describe configs of topic {topic}", exc.args[0]
            ) from None
        return {name: entry.value for name, entry in entries.items() if entry.value is not None}


def _topic_id(description: Any) -> str | None:
    topic_id = getattr(description, "topic_id", None)
    text = str(topic_id) if topic_id is not None else ""
    return text if text and text.strip("A=") else None  # all zeros: no id
