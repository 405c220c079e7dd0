"""Reading the end of a partition backwards, without joining a consumer group.

Used to find a writer's resume point: the newest checkpoint of a key, and the newest
record that carries a given provenance. Scans stop at end-of-partition, which a broker
reports only after a fetch came back empty, so readers ask brokers not to hold fetches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, TopicPartition

from replicator.core.kafka.errors import BrokerError

log = logging.getLogger(__name__)

TAIL_CHUNK = 500
READ_TIMEOUT = 60.0
SETTLE_WAIT = 10.0
"""How long a resume waits for the transactions open in a destination partition to end."""
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


def watermark_reader(kafka: dict[str, Any], group_id: str) -> Consumer:
    """A read_uncommitted consumer for the log end (``group_id`` is never joined)."""
    return Consumer({**kafka, "group.id": group_id, "isolation.level": "read_uncommitted"})


def settled_end(
    committed: Consumer, uncommitted: Consumer, tp: TopicPartition, wait: float = SETTLE_WAIT
) -> tuple[int, int]:
    """(low, end) of ``tp`` once no transaction is open in it: the committed end (last
    stable offset) has reached the log end. A writer that just fenced its predecessor
    calls this before reading the tail: a broker may end the predecessor's transaction
    after answering the fencing call, and records still in an open transaction are
    invisible to read_committed readers. After ``wait`` seconds (another writer's
    transaction may stay open) the log end, with a warning when ``wait`` was not 0."""
    deadline = time.monotonic() + wait
    while True:
        low, log_end = uncommitted.get_watermark_offsets(tp, timeout=30)
        _, committed_end = committed.get_watermark_offsets(tp, timeout=30)
        if committed_end >= log_end:
            return low, log_end
        if time.monotonic() >= deadline:
            if wait > 0:
                log.warning(
                    "%s partition %d: a transaction stays open (committed end %d, log end "
                    "%d); resuming from what is committed",
                    tp.topic,
                    tp.partition,
                    committed_end,
                    log_end,
                )
            return low, log_end
        time.sleep(0.1)


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
