"""Translating committed source offsets against a destination cluster (I/O).

Reads only: the writer's resume point (checkpoint and provenance tail) and single records
found by :func:`replicator.core.groups.translation.first_at_or_after`. Never joins a group.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, TopicPartition

from replicator.core.groups.translation import Translation, translate
from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import TAIL_READER_GROUP, CheckpointStore, WriteTarget
from replicator.core.kafka.tail import read_range, tail_reader

WATERMARK_TIMEOUT = 30.0


class OffsetTranslator:
    """Translates source offsets into destination offsets of one destination cluster."""

    def __init__(self, kafka: dict[str, Any], checkpoints: CheckpointStore) -> None:
        self._kafka = kafka
        self._checkpoints = checkpoints

    def translate(self, target: WriteTarget, source_offsets: list[int]) -> list[Translation]:
        """Each of ``source_offsets`` (committed offsets of ``target``'s source partition)
        as a destination offset of ``target``'s partition."""
        if not target.same_partition:
            raise ValueError(f"{target}: merged source partitions have no offset translation")
        resume = self._checkpoints.resume_point(target)
        consumer = tail_reader(self._kafka, TAIL_READER_GROUP)
        try:
            tp = TopicPartition(target.destination_topic, target.destination_partition)
            low, _high = consumer.get_watermark_offsets(tp, timeout=WATERMARK_TIMEOUT)
            probe = _Prober(consumer, tp, target)
            return [
                translate(x, probe, low, resume.next_source_offset, resume.destination_offset)
                for x in source_offsets
            ]
        finally:
            consumer.close()


class _Prober:
    """``probe(d)``: the first record of the target's source at destination offset ``d``
    or later, as (destination offset, source offset)."""

    def __init__(self, consumer: Consumer, tp: TopicPartition, target: WriteTarget) -> None:
        self._consumer = consumer
        self._tp = tp
        self._source = target.source
        self._seen: dict[int, tuple[int, int] | None] = {}

    def __call__(self, destination_offset: int) -> tuple[int, int] | None:
        if destination_offset in self._seen:
            return self._seen[destination_offset]
        found = None
        for message in read_range(self._consumer, self._tp, destination_offset, None):
            source_offset = provenance.source_offset(message.headers(), self._source)
            if source_offset is not None:
                found = (message.offset(), source_offset)
                break
        self._seen[destination_offset] = found
        return found
