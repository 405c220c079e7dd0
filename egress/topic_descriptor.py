"""Topic descriptors: ``{prefix}/{region}/{topic}/_topic.json``.

Egress writes, per exported topic, its partition count, the topic configs a destination
should copy (so that ingress can create the destination topic alike) and, per partition,
the offset its export started at (``export_start``): the start of its first segment.
Ingress starts a partition's first replay exactly there, so a backlog whose segments reach
the destination out of order (bucket replication keeps no order) is never cut short at
whichever segment happened to arrive first.

The descriptor also names the topic id of the generation exported (see
:mod:`egress.generations`); a re-created topic's descriptor is left as it is. Where the
deployment signs, the descriptor is signed (:func:`signed_descriptor`) and one in the
bucket not signed by the deployment is not egress's own: its export starts are ignored
and found by listing.

Partition count and configs are refreshed when they change (checked every
``[egress] descriptor_interval``). A partition's export start is found once, by listing
its segments, as soon as the sink has recorded a segment of it (:mod:`egress.driver_state`,
checked every few seconds) and never changes afterwards: it is kept from the descriptor
already in the bucket, even after the first segments expire.
"""

from __future__ import annotations

import logging
from typing import Any

from egress.catalog import SourceCatalog
from egress.driver_state import DriverState
from egress.generations import TopicGenerations
from replicator.core.aws.errors import ObjectNotFoundError, StorageError
from replicator.core.config import Config, required
from replicator.core.errors import ReplicatorError
from replicator.core.kafka.errors import BrokerError
from replicator.core.segments.descriptor import (
    UNUSABLE_OBJECT,
    checked_descriptor,
    describe,
    export_starts,
    signed_descriptor,
)
from replicator.core.segments.errors import DescriptorError
from replicator.core.segments.key import topic_descriptor_s3_key
from replicator.core.segments.selection import lowest_start
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)


class DescriptorPublisher:
    def __init__(self, config: Config, catalog: SourceCatalog) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self._catalog = catalog
        self._store = SegmentStore.for_region(config, self.egress.region)
        self._state = DriverState(self.egress.state_dir)
        self._published: dict[str, dict[str, Any]] = {}
        self._counts: dict[str, int] = {}
        self._starts: dict[str, dict[int, int]] = {}
        self._loaded: set[str] = set()
        self._generations = TopicGenerations(config, catalog, self._store)

    def publish(self) -> None:
        """Write the descriptors that changed since the last call; never raises for a
        broker or bucket hiccup (the next call retries)."""
        try:
            self._counts = {}
            for topic, _partition in self._catalog.partitions():
                self._counts[topic] = self._counts.get(topic, 0) + 1
            # A re-created topic's descriptor keeps naming the generation in the bucket.
            held = self._generations.check(sorted(self._counts))
            for topic in sorted(held):
                del self._counts[topic]
            for topic in sorted(self._counts):
                if topic not in self._loaded:  # once: later ones come from the sink's stats
                    self._find_starts(topic, list(range(self._counts[topic])))
                self._write(topic, self._configs(topic))
        except ReplicatorError as exc:
            log.warning("could not refresh topic descriptors: %s", exc)

    def publish_new_starts(self) -> None:
        """Record the export start of partitions whose first segments the sink reported
        since (cheap when there are none: one local file read)."""
        _, stats = self._state.read_partitions()
        try:
            for topic, count in sorted(self._counts.items()):
                known = self._starts.get(topic, {})
                new = [
                    p
                    for p in range(count)
                    if p not in known and stats.get((topic, p)) and stats[(topic, p)].segments
                ]
                if new and self._find_starts(topic, new):
                    self._write(topic, self._published[topic]["configs"])
        except ReplicatorError as exc:
            log.warning("could not record export starts: %s", exc)

    def _find_starts(self, topic: str, partitions: list[int]) -> bool:
        """List the segments of ``partitions`` without a known start; True if any found.

        A topic's first call in a run lists every partition (segments an earlier run wrote
        whose start no descriptor names yet: this run's statistics know nothing of them),
        and the topic counts as loaded only once that has succeeded: a listing that failed
        is made again at the next call, never left out for the rest of the run."""
        starts = self._starts.setdefault(topic, {})
        if topic not in self._loaded:
            starts.update(self._recorded(topic))
            partitions = list(range(self._counts[topic]))
        found = False
        for partition in partitions:
            if partition in starts:
                continue
            segments = self._store.list_segments(self.egress.region, topic, partition)
            start = lowest_start(s.segment_key for s in segments)
            if start is not None:
                starts[partition] = start
                found = True
        self._loaded.add(topic)
        return found

    def _recorded(self, topic: str) -> dict[int, int]:
        key = topic_descriptor_s3_key(self.config.s3.prefix, self.egress.region, topic)
        try:
            data = checked_descriptor(self._store.get_json(key), key, self._store.keys)
            return export_starts(data, key) or {}
        except ObjectNotFoundError:
            return {}
        except (DescriptorError, StorageError) as exc:  # not egress's own: found by listing
            if isinstance(exc, StorageError) and exc.operation not in UNUSABLE_OBJECT:
                raise
            log.warning("ignoring the export starts recorded in the bucket: %s", exc)
            return {}

    def _write(self, topic: str, configs: dict[str, str]) -> None:
        count = self._counts[topic]
        descriptor = describe(
            topic,
            count,
            configs,
            self.egress.region,
            self._starts.get(topic),
            topic_id=self._generations.topic_id(topic),
        )
        if self._published.get(topic) == descriptor:
            return
        key = topic_descriptor_s3_key(self.config.s3.prefix, self.egress.region, topic)
        self._store.put_json(key, signed_descriptor(descriptor, key, self._store.keys))
        self._published[topic] = descriptor
        log.info(
            "topic descriptor of %s: %d partitions, configs %s, export starts %s",
            topic,
            count,
            descriptor["configs"],
            descriptor["export_start"],
        )

    def _configs(self, topic: str) -> dict[str, str]:
        try:
            return self._catalog.topic_configs(topic)
        except BrokerError as exc:
            log.warning("%s", exc)
            return {}
