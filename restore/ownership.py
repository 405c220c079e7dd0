"""Which services of a config write a destination topic. Pure.

A restore must not write a partition that ingress or the relay writes while they run:
its writer has a transactional id of its own, so neither fences the other, and every
source offset both write lands twice. Who owns a partition is decided by the config, not
by what the partition holds: a partition that retention or DeleteRecords emptied, or one
the service has not written yet, is theirs all the same, and the relay's checkpoints are
kept under its own origin and source topic, not under the restore's key.
"""

from __future__ import annotations

import re

from replicator.core.config import (
    TOPIC_PLACEHOLDER,
    Config,
    IngressConfig,
    IngressSource,
    RelayConfig,
)
from replicator.core.kafka.checkpoints import WriterKind


def source_writes(source: IngressSource, topic: str) -> bool:
    """Whether ingress ``source`` replays some source topic into ``topic``: the topic it
    names, or a topic its pattern matches whose rendered ``destination_topic`` is
    ``topic``."""
    if source.topic_pattern is None:
        return source.destination == topic
    template = source.destination_topic or TOPIC_PLACEHOLDER
    fixed = template.split(TOPIC_PLACEHOLDER)
    # The source topic's name where the template has the placeholder, the same each time.
    pieces = [re.escape(fixed[0])]
    for index, after in enumerate(fixed[1:]):
        pieces += ["(?P<topic>.+)" if index == 0 else "(?P=topic)", re.escape(after)]
    found = re.fullmatch("".join(pieces), topic)
    return found is not None and source.matches(found.group("topic"))


def ingress_writes(ingress: IngressConfig, topic: str) -> bool:
    """Whether any source of ``ingress`` (of any region) replays into ``topic``."""
    return any(source_writes(source, topic) for source in ingress.sources)


def relay_writes(relay: RelayConfig, topic: str) -> bool:
    """Whether ``relay`` writes ``topic`` (as a whole or one merged partition of it)."""
    return any(t.destination == topic for t in relay.topics)


def services_writing(config: Config, region: str, topic: str) -> list[tuple[WriterKind, str]]:
    """(service, consumer group) of each service of ``config`` that writes ``topic`` in
    ``region``."""
    found: list[tuple[WriterKind, str]] = []
    ingress, relay = config.ingress, config.relay
    if ingress and ingress.region == region and ingress_writes(ingress, topic):
        found.append(("ingress", ingress.group_id))
    if relay and relay.destination == region and relay_writes(relay, topic):
        found.append(("relay", relay.group_id))
    return found
