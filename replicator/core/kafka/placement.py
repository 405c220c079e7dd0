"""Which instance works on which source partition. Pure.

Services that many instances run (ingress, relay) share work through a Kafka consumer
group on a topic of ``slots`` partitions: each instance owns the source partitions whose
slot is among the partitions the group assigns it. A slot is a stable function of the
source partition, so every instance agrees without talking to the others, and
consecutive partitions of one topic land on consecutive slots, spreading a topic evenly.
"""

from __future__ import annotations

import zlib

from replicator.core.kafka.provenance import SourcePartition


def slot_of(source: SourcePartition, slots: int) -> int:
    """The slot (a partition of the coordination topic) that owns ``source``."""
    topic_hash = zlib.crc32(f"{source.origin}/{source.topic}".encode())
    return (topic_hash + source.partition) % slots
