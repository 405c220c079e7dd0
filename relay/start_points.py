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
from collections.abc import Mapping

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
    store: CheckpointStore, group_id: str, counts: Mapping[str, int]
) -> dict[str, int]:
    """For each relayed topic (``counts``: its partitions now), how many partitions it had
    when the relay first started relaying it; recorded now for a topic relayed for the
    first time."""
    first: dict[str, int] = {}
    for topic, count in sorted(counts.items()):
        key = start_key(group_id, topic)
        raw = store.latest(key)
        if raw is None:
            value = {"partitions": count, "time": time.time()}
            store.put(key, json.dumps(value, separators=(",", ":")).encode())
            log.info("first start of the relay of %s: %d partitions recorded", topic, count)
            first[topic] = count
        else:
            first[topic] = recorded_partitions(raw, f"under key {key} in {store.topic}")
    return first
