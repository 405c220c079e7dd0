"""Reading the end of a partition backwards, without joining a consumer group.

Used to find a writer's resume point: the newest checkpoint of a key, and the newest
record that carries a given provenance. Scans stop at end-of-partition, which a broker
reports only after a fetch came back empty, so readers ask brokers not to hold fetches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, TopicPartition

from replicator.core.kafka.errors import BrokerError

TAIL_CHUNK = 500
READ_TIMEOUT = 60.0
Match = TypeVar("Match")


def tail_reader(kafka: dict[str, Any], group_id: str) -> Consumer:
    """A read_committed consumer for tail scans (``group_id`` is never joined)."""
    return Consumer(
        {
            **kafka,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            # Don't let the broker hold the empty fetch that reveals the end for 500 ms.
            "fetch.wait.max.ms": 10,
        }
    )


def read_range(
    consumer: Consumer, tp: TopicPartition, start: int, end: int | None
) -> Iterator[Any]:
    """Messages of ``tp`` with offsets in the half-open range [start, end), in order;
    ``end`` None reads to the end of the partition (brokers may report a high watermark
    short of the real end)."""
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    where = f"{tp.topic} partition {tp.partition}"
    deadline = time.monotonic() + READ_TIMEOUT
    while True:
        message = consumer.poll(1.0)
        if message is None:
            if time.monotonic() > deadline:
                raise BrokerError(f"timed out reading {where}")
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return
            raise BrokerError.from_kafka(f"reading {where}", error)
        offset = message.offset()
        if end is not None and offset is not None and offset >= end:
            return
        yield message


def scan_back(
    consumer: Consumer,
    tp: TopicPartition,
    low: int,
    high: int,
    match: Callable[[Any], Match | None],
) -> tuple[int, Match] | None:
    """The last message at or after ``low`` for which ``match(message)`` is not None,
    reading backwards in chunks from the end: (its offset, match result). The newest chunk
    is read to the end of the partition, past ``high`` if the broker under-reports it."""
    end: int | None = None
    top = high
    while top > low:
        start = max(low, top - TAIL_CHUNK)
        found = None
        for message in read_range(consumer, tp, start, end):
            result = match(message)
            if result is not None:
                found = (message.offset(), result)
        if found is not None:
            return found
        top = end = start
    return None
