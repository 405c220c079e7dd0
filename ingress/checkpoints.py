"""Ingress checkpoints on a log-compacted topic. Encoding is pure; see the worker for I/O.

Key: ``{destination topic}/{partition}/{source region}/{source topic}``; value: JSON with
the next source offset to replay, the destination offset of the last record produced and
the time. Written in the same transaction as the records it covers, so an operator can read
progress with any Kafka client. Each key goes to a fixed partition of the checkpoint topic
(a stable hash), so a worker finds its latest checkpoint by reading one partition from
the end.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Checkpoint:
    destination_topic: str
    partition: int
    source_region: str
    source_topic: str
    next_source_offset: int
    destination_offset: int
    """Offset of the last record produced for it in the destination partition (-1: none)."""
    time: float
    halted: str = ""
    """Why the partition halted (corrupt or lost segment, record too large); empty if not."""

    @property
    def key(self) -> str:
        return checkpoint_key(
            self.destination_topic, self.partition, self.source_region, self.source_topic
        )

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Checkpoint:
        return cls(**json.loads(raw))


def checkpoint_key(destination_topic: str, partition: int, region: str, topic: str) -> str:
    return f"{destination_topic}/{partition}/{region}/{topic}"


def checkpoint_partition(key: str, partitions: int) -> int:
    return zlib.crc32(key.encode()) % partitions
