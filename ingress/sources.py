"""The concrete sources ingress replays: the topics named in ``[[ingress.sources]]`` and
the topics of the bucket matching a ``topic_pattern`` there.

Patterns are resolved against the source regions' topic directories in ingress's bucket,
where egress's segments and descriptors arrive, so a topic that egress starts exporting
is followed end to end without a restart. A topic named by a source wins over patterns;
a matched topic whose destination is already another source's is skipped with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from replicator.core.config import IngressConfig, IngressSource
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)


def concrete_sources(
    ingress: IngressConfig, topics_of: Callable[[str], list[str]]
) -> list[IngressSource]:
    """Every configured source for one topic; ``topics_of(region)`` lists the topics the
    bucket holds for a region (called only for regions with a pattern)."""
    found = [s for s in ingress.sources if s.topic_pattern is None]
    taken = {(s.region, s.topic) for s in found}
    destinations = {s.destination: f"{s.region}/{s.topic}" for s in found}
    listed: dict[str, list[str]] = {}
    for source in ingress.sources:
        if source.topic_pattern is None:
            continue
        if source.region not in listed:
            listed[source.region] = topics_of(source.region)
        for topic in listed[source.region]:
            if (source.region, topic) in taken or not source.matches(topic):
                continue
            match = ingress.match(source.region, topic)
            if match is None or match[1].topic_pattern is not None:
                log.warning(
                    "%s/%s matches topic_pattern %r but %r is no valid destination topic",
                    source.region,
                    escape(topic),
                    source.topic_pattern,
                    source.destination_topic,
                )
                continue
            concrete = match[1]
            if concrete.destination in destinations:
                log.warning(
                    "%s/%s matches topic_pattern %r but its destination %s is already the "
                    "destination of %s; skipped",
                    source.region,
                    escape(topic),
                    source.topic_pattern,
                    concrete.destination,
                    destinations[concrete.destination],
                )
                continue
            taken.add((source.region, topic))
            destinations[concrete.destination] = f"{source.region}/{topic}"
            found.append(concrete)
    return found


class ConfiguredSources:
    """``(region, topic) in sources``: whether ingress replays that topic (named or
    matched by a pattern)."""

    def __init__(self, ingress: IngressConfig) -> None:
        self._ingress = ingress

    def __contains__(self, item: object) -> bool:
        if not (isinstance(item, tuple) and len(item) == 2):
            return False
        region, topic = item
        return self._ingress.match(str(region), str(topic)) is not None
