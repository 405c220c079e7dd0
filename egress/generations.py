"""Topic generations: a topic deleted and created again under the same name is another
topic whose offsets start over. Exporting it as if it were the old one would append its
records after the old ones' (and never export its offsets below the exported position),
silently, whatever ``on_data_loss`` says.

The topic descriptor records the broker's topic id of the generation whose segments are
in the bucket. Egress compares it with the topic's id now, at start and every
``descriptor_interval``: another id is a new generation. That topic's export stops with an
ERROR that says how to continue (docs/operations/egress.md); the other topics go on. Brokers that
report no topic id leave this check out. Where the deployment signs, a descriptor not
signed by it is not egress's own and its topic id is ignored, like an unusable one's.

The id is also what each segment's signed footer names (:meth:`topic_id`, passed with each
planned range to the segment sink), so that readers can refuse a segment of another
generation put back in the bucket (``SegmentStore.open``).
"""

from __future__ import annotations

import logging
import time

from egress.catalog import SourceCatalog
from replicator.core.aws.errors import ObjectNotFoundError, StorageError
from replicator.core.config import Config, required
from replicator.core.errors import ReplicatorError
from replicator.core.segments.descriptor import (
    UNUSABLE_OBJECT,
    checked_descriptor,
    recorded_topic_id,
    recreated,
)
from replicator.core.segments.errors import DescriptorError
from replicator.core.segments.key import topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)


class TopicGenerations:
    def __init__(self, config: Config, catalog: SourceCatalog, store: SegmentStore) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self._catalog = catalog
        self._store = store
        self.current: dict[str, str | None] = {}
        """The topic id of each topic now, as of the last check."""
        self.recreated: set[str] = set()
        """Topics that are another generation than their exported segments."""
        self._recorded: dict[str, str | None] = {}
        self._checked_at = float("-inf")

    def check(self, topics: list[str], *, force: bool = False) -> set[str]:
        """The re-created topics among ``topics`` (looked up at most every
        ``descriptor_interval`` unless ``force``)."""
        now = time.monotonic()
        unseen = [t for t in topics if t not in self.current]
        if not force and not unseen and now - self._checked_at < self.egress.descriptor_interval:
            return self.recreated & set(topics)
        try:
            self.current.update(self._catalog.topic_ids(topics))
            for topic in topics:
                if self._recorded.get(topic) is None:
                    # Nothing recorded yet (a topic exported for the first time): the
                    # generation seen first is the one this run exports.
                    self._recorded[topic] = self._read_recorded(topic) or self.current.get(topic)
        except ReplicatorError as exc:
            log.warning("could not check topic generations: %s", exc)
            return self.recreated & set(topics)
        self._checked_at = now
        for topic in topics:
            if topic not in self.recreated and recreated(
                self._recorded.get(topic), self.current.get(topic)
            ):
                self.recreated.add(topic)
                self._report(topic)
        return self.recreated & set(topics)

    def topic_id(self, topic: str) -> str | None:
        """The id to record for ``topic``'s exported generation: the id now, else the
        one recorded (a failed look-up never erases it)."""
        return self.current.get(topic) or self._recorded.get(topic)

    def _read_recorded(self, topic: str) -> str | None:
        key = topic_descriptor_s3_key(self.config.s3.prefix, self.egress.region, topic)
        try:
            return recorded_topic_id(
                checked_descriptor(self._store.get_json(key), key, self._store.keys)
            )
        except ObjectNotFoundError:
            return None
        except (DescriptorError, StorageError) as exc:
            if isinstance(exc, StorageError) and exc.operation not in UNUSABLE_OBJECT:
                raise
            # Not egress's own writing: this topic's generation is the one seen now (its
            # descriptor is written again), and the other topics are still checked.
            log.warning("ignoring the topic id recorded in the bucket: %s", exc)
            return None

    def _report(self, topic: str) -> None:
        log.error(
            "topic %s was deleted and created again: the bucket holds segments of topic id "
            "%s, the topic now has id %s and its offsets started over. Its export is "
            "stopped (the other topics go on); to export the new topic, move its old "
            "segments out of %s/%s/%s/ and clear the egress checkpoint (see "
            "docs/operations/egress.md, 'A topic deleted and created again')",
            topic,
            self._recorded.get(topic),
            self.current.get(topic),
            self.config.s3.prefix,
            self.egress.region,
            topic,
        )
