"""``[egress] sync_acls``: exporting the read side of the exported topics' ACLs beside
their descriptors, for ``[ingress] sync_acls`` to copy into the destination.

The destination cannot reach the source cluster, so the ACLs travel like everything else:
every ``[egress] acl_export_interval`` the driver reads the source's topic and group
bindings (DescribeAcls, DESCRIBE on the cluster), keeps the copies
:func:`~replicator.core.kafka.acls.copied_bindings` makes of them (READ and DESCRIBE only,
LITERAL, under the source topic's name) for each exported topic and for the groups whose
offsets are exported on it (``[egress] consumer_groups``, those with committed offsets on
that topic), and writes ``{prefix}/{region}/{topic}/_acls.json`` where that changed. Each
object is signed for its own S3 key where the deployment signs, like group offsets.

A topic whose ACLs are all revoked gets an object with no bindings (ingress deletes
nothing, so that changes nothing in the destination, but the object says what the source
holds). A failed round is logged and the next one retries; the data path never waits for
it.
"""

from __future__ import annotations

import logging

from confluent_kafka.admin import AdminClient

from egress.catalog import SourceCatalog
from replicator.core.config import Config, required
from replicator.core.errors import ReplicatorError
from replicator.core.groups.admin import GroupAdmin, matching
from replicator.core.kafka.acls import (
    S3_PATH_GRANTS,
    TopicAcls,
    copied_bindings,
    describe_bindings,
    signed_acls_json,
)
from replicator.core.kafka.clients import client_config
from replicator.core.segments.key import topic_acls_s3_key
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)


class AclExporter:
    def __init__(self, config: Config, catalog: SourceCatalog) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self._catalog = catalog
        kafka = client_config(config.region(self.egress.region).kafka)
        self._admin = AdminClient(kafka)
        self._groups = GroupAdmin(kafka, self.egress.region)
        self._store = SegmentStore.for_region(config, self.egress.region)
        self._written: dict[str, TopicAcls] = {}
        """What was last written, per S3 object key."""

    @property
    def enabled(self) -> bool:
        return self.egress.sync_acls

    def export(self) -> int:
        """Write the topics' ACL objects that changed; the number written. Never raises
        for a broker or bucket hiccup (the next call retries)."""
        if not self.enabled:
            return 0
        try:
            return self._export()
        except ReplicatorError as exc:
            log.warning("could not export ACLs: %s", exc)
            return 0

    def _export(self) -> int:
        topics = sorted({topic for topic, _ in self._catalog.partitions()})
        source = describe_bindings(self._admin, self.egress.region, S3_PATH_GRANTS)
        groups = self._exported_groups(set(topics))
        written = 0
        for topic in topics:
            bindings = copied_bindings(source, {topic: topic}, groups.get(topic, ()))
            written += self._write(TopicAcls(self.egress.region, topic, tuple(bindings)))
        if written:
            log.info("exported the ACLs of %d topics", written)
        return written

    def _exported_groups(self, topics: set[str]) -> dict[str, set[str]]:
        """Per exported topic, the ``consumer_groups`` with committed offsets on it (those
        whose offsets egress exports)."""
        per_topic: dict[str, set[str]] = {}
        if not self.egress.consumer_groups:
            return per_topic
        for group in matching(self._groups.group_ids(), self.egress.consumer_groups):
            for topic, _partition in self._groups.committed(group):
                if topic in topics:
                    per_topic.setdefault(topic, set()).add(group)
        return per_topic

    def _write(self, record: TopicAcls) -> int:
        key = topic_acls_s3_key(self.config.s3.prefix, record.region, record.topic)
        if self._written.get(key) == record:
            return 0
        self._store.put_json(key, signed_acls_json(record, key, self._store.keys))
        self._written[key] = record
        log.debug("ACLs of %s: %d bindings", record.topic, len(record.bindings))
        return 1
