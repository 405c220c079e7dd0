"""Which partitions of a relayed topic existed when the relay first started relaying it.

Why: ``start_from = "latest"`` names where a relay starts, not where a partition added to
the source later does: records of a new partition are all produced after the relay
started, so skipping them would lose data. A process knows which partitions it saw at
its own start, but not which existed at the relay's first start: after a restart (or on
another instance) a partition added in between looked like an old one and started at
"latest" too. So the first start records each topic's partition count beside the
checkpoints, and every later start reads it: partitions at or beyond the recorded count
start at their beginning, whichever process sees them first.

The record's key: ``relay-start/{group_id}/{topic}`` in the relay's checkpoint topic (no
checkpoint key has this form: theirs start with a topic name, which holds no "/"). Two
instances starting at once may both write it; they write the same count unless the topic
grew in between, and the later record stands.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping

from relay.errors import RelayIdentityError
from relay.identity import recorded_fields
from replicator.core.kafka.checkpoints import CheckpointStore

log = logging.getLogger(__name__)


def start_key(group_id: str, topic: str) -> str:
    return f"relay-start/{group_id}/{topic}"


def recorded_partitions(raw: bytes, where: str) -> int:
    """The partition count of a start record; RelayIdentityError naming ``where`` if it
    cannot be read. Pure."""
    count = recorded_fields(raw, where, {"partitions": (int, True)})["partitions"]
    if count < 0:
        raise RelayIdentityError(f"the relay record {where} names a negative partition count")
    return int(count)


def first_partition_counts(
    store: CheckpointStore,
    group_id: str,
    counts: Mapping[str, int],
    relayed_before: Callable[[str, int], int] | None = None,
) -> dict[str, int]:
    """For each relayed topic (``counts``: its partitions now), how many partitions it had
    when the relay first started relaying it; recorded now for a topic without a record.

    ``relayed_before(topic, count)``, given when this relay ran before (its identity was
    recorded earlier): one more than the highest partition below ``count`` that already
    holds a checkpoint or provenance, 0 if none does. A topic a version without start
    records relayed is then recorded with that many, not with today's count: partitions
    added while no relay ran start at their beginning, as they would have with a record.
    Without any (a topic new to this relay), today's count is its first."""
    first: dict[str, int] = {}
    for topic, count in sorted(counts.items()):
        key = start_key(group_id, topic)
        raw = store.latest(key)
        if raw is not None:
            first[topic] = recorded_partitions(raw, f"under key {key} in {store.topic}")
            continue
        relayed = relayed_before(topic, count) if relayed_before is not None else 0
        recorded = relayed or count
        value = {"partitions": recorded, "time": time.time()}
        store.put(key, json.dumps(value, separators=(",", ":")).encode())
        log.info(
            "relay of %s: its first %d partitions recorded as there from its start", topic, recorded
        )
        first[topic] = recorded
    return first
