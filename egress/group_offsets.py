"""Exporting consumer-group offsets beside the segments.

Every ``[egress] group_offsets_interval`` the driver reads the committed offsets of the
groups named by ``[egress] consumer_groups`` (regular expressions over whole group ids) on
the exported topics, and writes one object per (topic, group) where they changed, keeping
each change in the group's history (layout in :mod:`replicator.core.groups.offsets_file`).
Bucket replication carries them to the destination region, where ingress and
``replicator failover`` translate them, and restore finds them as they were at a cut.

Each object is signed where the deployment signs segments (``[s3]`` signing keys), for its
own S3 key: readers refuse one that is not (see :mod:`replicator.core.groups.offsets_file`).

A group's offsets are read after the segments they refer to may still be in flight: a
group can be ahead of what is exported. Translation handles that (the group is reported
behind); exporting offsets never waits for data.
"""

from __future__ import annotations

import logging
import time

from egress.catalog import SourceCatalog
from replicator.core.config import Config, required
from replicator.core.errors import ReplicatorError
from replicator.core.groups.admin import GroupAdmin, matching
from replicator.core.groups.offsets_file import (
    GroupOffsets,
    group_history_s3_key,
    group_offsets_s3_key,
    signed_json,
)
from replicator.core.kafka.clients import client_config
from replicator.core.segments.store import SegmentStore
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)


class GroupOffsetsExporter:
    def __init__(self, config: Config, catalog: SourceCatalog) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self._catalog = catalog
        self._admin = GroupAdmin(
            client_config(config.region(self.egress.region).kafka), self.egress.region
        )
        self._store = SegmentStore.for_region(config, self.egress.region)
        self._written: dict[str, dict[int, int]] = {}
        """Offsets last written per S3 object key."""

    @property
    def enabled(self) -> bool:
        return bool(self.egress.consumer_groups)

    def export(self) -> int:
        """Write the groups' offsets that changed; the number of objects written. Never
        raises for a broker or bucket hiccup (the next call retries)."""
        if not self.enabled:
            return 0
        try:
            return self._export()
        except ReplicatorError as exc:
            log.warning("could not export consumer group offsets: %s", exc)
            return 0

    def _export(self) -> int:
        topics = {topic for topic, _ in self._catalog.partitions()}
        written = 0
        for group in matching(self._admin.group_ids(), self.egress.consumer_groups):
            now = time.time()
            per_topic: dict[str, dict[int, int]] = {}
            for (topic, partition), offset in self._admin.committed(group).items():
                if topic in topics:
                    per_topic.setdefault(topic, {})[partition] = offset
            for topic, offsets in sorted(per_topic.items()):
                key = group_offsets_s3_key(self.config.s3.prefix, self.egress.region, topic, group)
                if self._written.get(key) == offsets:
                    continue
                record = GroupOffsets(self.egress.region, topic, group, offsets, now)
                history = group_history_s3_key(
                    self.config.s3.prefix, self.egress.region, topic, group, int(now * 1000)
                )
                keys = self._store.keys
                self._store.put_json(history, signed_json(record, history, keys))
                self._store.put_json(key, signed_json(record, key, keys))
                self._written[key] = offsets
                written += 1
                log.debug("offsets of group %s on %s: %s", escape(group), topic, offsets)
        if written:
            log.info("exported %d consumer group offsets objects", written)
        return written
