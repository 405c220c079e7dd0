"""``[relay] sync_acls``: a thread that keeps the read side of the upstream's ACLs copied
onto the relayed topics' destinations and onto the consumer groups the relay moves (see
:mod:`replicator.core.kafka.acls` for which bindings copy and why).

Each round reads the bindings of the first upstream that answers (identical upstreams
share their ACLs as they share their offsets), then creates in the destination only the
copies it lacks: a binding already there is left alone and nothing is ever deleted (an
operator's revocation in the destination stands until the upstream grants it again, and
a binding removed upstream is the operator's to remove in the destination too). Only the
instance owning slot 0 syncs, as for group offsets. A failed round is logged and the next
one retries; the data path never waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AclBinding, AdminClient

from relay.groups import upstream_committed
from replicator.core.config import Config, required
from replicator.core.kafka.acls import (
    copied_bindings,
    create_missing,
    describe_binding,
    describe_bindings,
)
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.errors import BrokerError
from replicator.core.leader_rounds import LeaderRounds

log = logging.getLogger(__name__)


class AclSync(LeaderRounds):
    def __init__(self, config: Config, kafka: dict[str, Any], leading: Callable[[], bool]) -> None:
        """``kafka``: the destination's client settings; ``leading``: whether this
        instance is the one that syncs now."""
        relay = required(config, "relay")
        super().__init__("acl-sync", "ACL sync", relay.acl_sync_interval, leading)
        self._config = config
        self._relay = relay
        self._destination = AdminClient(kafka)

    def round(self) -> None:
        self.sync_once()

    def sync_once(self) -> list[AclBinding]:
        """Create the missing copies; the bindings created."""
        upstream, source = self._upstream_bindings()
        topics = {t.source_topic: t.destination for t in self._relay.topics}
        wanted = copied_bindings(source, topics, self._moved_groups())
        created = create_missing(self._destination, wanted, self._relay.destination)
        for binding in created:
            log.info(
                "created ACL %s in %s (copied from %s)",
                describe_binding(binding),
                self._relay.destination,
                upstream,
            )
        return created

    def _upstream_bindings(self) -> tuple[str, list[AclBinding]]:
        failures = []
        for upstream in self._relay.sources:
            admin = AdminClient(client_config(self._config.region(upstream).kafka))
            try:
                return upstream, describe_bindings(admin, upstream)
            except BrokerError as exc:
                failures.append(str(exc))
        raise BrokerError("no upstream answered for ACLs: " + "; ".join(failures))

    def _moved_groups(self) -> set[str]:
        """The upstream groups ``consumer_groups`` matches that hold offsets of relayed
        topics: those whose offsets the relay moves."""
        if not self._relay.consumer_groups:
            return set()
        committed = upstream_committed(self._config, None, self._relay.consumer_groups)
        return {group for group, _source, _offset in committed}


def acl_sync(config: Config, kafka: dict[str, Any], leading: Callable[[], bool]) -> AclSync | None:
    """The relay's ACL sync thread (not started), when ``[relay] sync_acls`` is on."""
    return AclSync(config, kafka, leading) if required(config, "relay").sync_acls else None
