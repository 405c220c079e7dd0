"""``[ingress] sync_acls``: a thread that copies the ACLs egress exported
(``_acls.json`` beside each topic's descriptor, :mod:`egress.acl_export`) onto the
replayed topics' destinations and onto the exported groups ``[ingress] consumer_groups``
names, so that an application can fail over without an administrator granting it
anything first.

Each round reads the object of every concrete source (patterns resolved) from ingress's
bucket and applies :func:`~replicator.core.kafka.acls.copied_bindings` to it again, with
the destination topic's name: whatever egress would never have written (WRITE, another
topic, a group ingress does not move) is dropped, each copy is LITERAL on the one
destination resource. Then only the copies the destination lacks are created: nothing is
ever deleted (a binding revoked in the source is the operator's to revoke here too).

Anyone who can write to the bucket can write these objects, and an ACL is a grant: one
that is unsigned or signed by no accepted key where the deployment signs, too large, or
not in the format, is refused with an ERROR naming its S3 object key, and that topic's
ACLs are skipped for the round; the other topics' go on. The ERROR is logged again only
when the refusal changes (by each process that comes to lead: one whose lead moved to
another process, and back, does not repeat it). A topic without an object (egress
without ``sync_acls``, or not yet) is skipped quietly.

Only the instance owning segment-events partition 0 syncs, as for group offsets. A failed
round is logged and the next one retries; the data path never waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AclBinding, AdminClient, ResourceType

from ingress.group_sync import synced_groups
from replicator.core.aws.errors import ObjectNotFoundError, StorageError
from replicator.core.config import Config, IngressSource, required
from replicator.core.groups.offsets_file import GroupSelection
from replicator.core.kafka.acls import (
    MAX_OBJECT_BYTES,
    S3_PATH_GRANTS,
    AclObjectError,
    TopicAcls,
    checked_acls,
    copied_bindings,
    create_missing,
    describe_binding,
)
from replicator.core.leader_rounds import LeaderRounds
from replicator.core.segments.descriptor import UNUSABLE_OBJECT
from replicator.core.segments.key import topic_acls_s3_key
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)


class AclSync(LeaderRounds):
    def __init__(
        self,
        config: Config,
        kafka: dict[str, Any],
        sources: Callable[[], list[IngressSource]],
        leading: Callable[[], bool],
    ) -> None:
        """``kafka``: the destination's client settings; ``sources``: the concrete
        sources now; ``leading``: whether this instance is the one that syncs now."""
        ingress = required(config, "ingress")
        super().__init__("acl-sync", "ACL sync", ingress.acl_sync_interval, leading)
        self._config = config
        self._ingress = ingress
        self._destination = AdminClient(kafka)
        self._store = SegmentStore.for_region(config, self._ingress.region)
        self._sources = sources
        self._refused: dict[str, str] = {}
        """Why each refused object (by S3 object key) was refused last: logged once."""
        if not self._store.keys.required:
            log.warning(
                "[ingress] sync_acls without [s3] signing keys: whoever can write to the "
                "bucket can grant any principal READ on the replayed topics"
            )

    def round(self) -> None:
        self.sync_once()

    def sync_once(self) -> list[AclBinding]:
        """Create the missing copies; the bindings created."""
        wanted: set[AclBinding] = set()
        for source in self._sources():
            wanted.update(self._exported(source))
        created = create_missing(
            self._destination, sorted(wanted, key=str), self._ingress.region, S3_PATH_GRANTS
        )
        for binding in created:
            log.info(
                "created ACL %s in %s (exported by egress)",
                describe_binding(binding),
                self._ingress.region,
            )
        return created

    def _exported(self, source: IngressSource) -> list[AclBinding]:
        """The destination copies of what ``source``'s object holds; none when it is
        absent or refused (refused: an ERROR naming its S3 object key)."""
        key = topic_acls_s3_key(self._config.s3.prefix, source.region, source.topic)
        try:
            record = checked_acls(
                self._store.get_json(key, MAX_OBJECT_BYTES), key, self._store.keys
            )
            if (record.region, record.topic) != (source.region, source.topic):
                raise AclObjectError(
                    f"{key}: names {record.region}/{record.topic}, not {source.region}/"
                    f"{source.topic}"
                )
        except ObjectNotFoundError:
            log.debug("no exported ACLs for %s/%s", source.region, source.topic)
            return []
        except (AclObjectError, StorageError) as exc:
            if isinstance(exc, StorageError) and exc.operation not in UNUSABLE_OBJECT:
                raise
            if self._refused.get(key) != str(exc):  # once per refusal, not every round
                log.error("ACLs of %s/%s not copied: %s", source.region, source.topic, exc)
            self._refused[key] = str(exc)
            return []
        self._refused.pop(key, None)
        return destination_copies(record, source, synced_groups(self._ingress))


def destination_copies(
    record: TopicAcls, source: IngressSource, selection: GroupSelection
) -> list[AclBinding]:
    """The destination bindings that copy ``record`` (the checked object of ``source``'s
    topic): on ``source``'s destination topic, and on the groups ``selection`` takes
    (none when ``[ingress] consumer_groups`` names none). Pure."""
    groups = {
        b.name
        for b in record.bindings
        if b.restype == ResourceType.GROUP and selection.wants(b.name)
    }
    return copied_bindings(record.bindings, {source.topic: source.destination}, groups)


def acl_sync(
    config: Config,
    kafka: dict[str, Any],
    sources: Callable[[], list[IngressSource]],
    leading: Callable[[], bool],
) -> AclSync | None:
    """The ingress ACL sync thread (not started), when ``[ingress] sync_acls`` is on."""
    if not required(config, "ingress").sync_acls:
        return None
    return AclSync(config, kafka, sources, leading)
