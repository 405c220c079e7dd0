"""The concrete sources ingress replays: the topics named in ``[[ingress.sources]]`` and
the topics of the bucket matching a ``topic_pattern`` there.

Patterns are resolved against the source regions' topic directories in ingress's bucket,
where egress's segments and descriptors arrive, so a topic that egress starts exporting
is followed end to end without a restart. A topic named by a source wins over patterns;
a matched topic whose destination is already another source's is skipped with a warning.

Anyone who can write to the bucket can make a topic directory, and each matched topic
costs a destination topic and a worker per partition: a pattern replays at most its
``max_topics``. The topics being replayed keep their place (a forged name that sorts
first does not push a real topic out), then the others by name; one past the bound is
refused with the reason, which the service reports as a source that is not replayed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from replicator.core.config import IngressConfig, IngressSource
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)


def concrete_sources(
    ingress: IngressConfig, topics_of: Callable[[str], list[str]]
) -> list[IngressSource]:
    """Every configured source for one topic; ``topics_of(region)`` lists the topics the
    bucket holds for a region (called only for regions with a pattern)."""
    return bounded_sources(ingress, topics_of)[0]


def bounded_sources(
    ingress: IngressConfig,
    topics_of: Callable[[str], list[str]],
    replaying: Collection[tuple[str, str]] = (),
) -> tuple[list[IngressSource], dict[tuple[str, str], str]]:
    """:func:`concrete_sources`, and the (region, topic)s matched past their pattern's
    ``max_topics`` with why; ``replaying``: the (region, topic)s replayed now, which keep
    their place."""
    found = [s for s in ingress.sources if s.topic_pattern is None]
    taken = {(s.region, s.topic) for s in found}
    destinations = {s.destination: f"{s.region}/{s.topic}" for s in found}
    listed: dict[str, list[str]] = {}
    admitted: dict[int, int] = {}
    past_bound: dict[tuple[str, str], str] = {}
    for source in ingress.sources:
        if source.topic_pattern is None:
            continue
        if source.region not in listed:
            listed[source.region] = sorted(
                topics_of(source.region), key=lambda t: ((source.region, t) not in replaying, t)
            )
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
            index = match[0]
            bound = ingress.sources[index].max_topics
            if admitted.get(index, 0) >= bound:
                past_bound[(source.region, topic)] = (
                    f"matches topic_pattern {ingress.sources[index].topic_pattern!r}, which "
                    f"replays {bound} topics already ([[ingress.sources]] max_topics = {bound}); "
                    "raise max_topics if the region exports more"
                )
                continue
            admitted[index] = admitted.get(index, 0) + 1
            taken.add((source.region, topic))
            destinations[concrete.destination] = f"{source.region}/{topic}"
            found.append(concrete)
    return found, past_bound


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
