"""Reading the end of a partition backwards, without joining a consumer group.

Used to find a writer's resume point: the newest checkpoint of a key, and the newest
record that carries a given provenance. Scans stop at end-of-partition, which a broker
reports only after a fetch came back empty, so readers ask brokers not to hold fetches.

A broker's failures come out as :class:`BrokerError` keeping the client's code, naming the
partition and what was asked: a broker paused or restarting makes a watermark look-up
time out (``_TIMED_OUT``, ``_ALL_BROKERS_DOWN``, ``_UNKNOWN_PARTITION``), and a writer
opening again then fails as for any passing broker trouble, not with an unknown error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from replicator.core.kafka.clients import retry_while_moving
from replicator.core.kafka.errors import (
    BrokerError,
    PartitionLookupError,
    TransactionStillOpenError,
)

log = logging.getLogger(__name__)

TAIL_CHUNK = 500
READ_TIMEOUT = 60.0
SETTLE_WAIT = 70.0
"""How long a resume waits at most for the transactions open in a destination or
checkpoint partition to end: longer than the writers' default transaction timeout (60 s),
after which the broker aborts a transaction whose writer went silent."""
WATERMARK_TIMEOUT = 30.0
"""How long one watermark look-up waits for the partition's leader to answer."""
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


def watermarks(
    consumer: Consumer,
    tp: TopicPartition,
    what: str,
    timeout: float = WATERMARK_TIMEOUT,
    retry: frozenset[int] = frozenset(),
) -> tuple[int, int]:
    """``consumer``'s (low, high) watermarks of ``tp``, asked of its leader (the high one
    is the log end or the last stable offset by the consumer's isolation level), asked
    again while the client fails with one of ``retry`` (see :func:`retry_while_moving`).
    Raises :class:`BrokerError` with the client's code, naming ``what`` was asked."""
    try:
        return retry_while_moving(
            lambda: consumer.get_watermark_offsets(tp, timeout=timeout), retry
        )
    except KafkaException as exc:
        raise PartitionLookupError.from_kafka(
            f"asking {what} of {tp.topic} partition {tp.partition}", exc.args[0]
        ) from None


def settled_end(
    committed: Consumer,
    uncommitted: Consumer,
    tp: TopicPartition,
    wait: float = SETTLE_WAIT,
    timeout: float = WATERMARK_TIMEOUT,
) -> tuple[int, int]:
    """(low, end) of ``tp`` once every transaction open in it when this was called has
    ended: its committed end (last stable offset) has reached the log end seen at the
    call. Why: a read_committed reader never gets past the last stable offset, so a
    record committed after another writer's transaction began stays invisible while that
    transaction is open (a fenced predecessor's, which a broker may end only after the
    fencing call returned; a sibling's writing the same merged destination partition or
    the same checkpoint partition). Reading uncommitted instead would count records of
    transactions that abort. Records written after the call do not matter, so a sibling
    that keeps committing does not hold the wait. ``wait`` 0: the ends now (readers:
    status, failover). Raises :class:`TransactionStillOpenError` after ``wait`` seconds
    (a writer frozen mid-transaction holds it until the broker aborts it at the
    transaction timeout): a resume read now could miss records and write them again.
    ``timeout``: of each look-up; a broker that does not answer within it is a
    :class:`BrokerError` (see :func:`watermarks`)."""
    low, log_end = watermarks(uncommitted, tp, "the log end", timeout)
    if wait <= 0:
        return low, log_end
    deadline = time.monotonic() + wait
    while True:
        _, committed_end = watermarks(committed, tp, "the committed end", timeout)
        if committed_end >= log_end:
            low, end = watermarks(uncommitted, tp, "the log end", timeout)
            return low, end
        if time.monotonic() >= deadline:
            raise TransactionStillOpenError(
                f"{tp.topic} partition {tp.partition}: a transaction has stayed open for "
                f"{wait:.0f} s (committed end {committed_end}, log end {log_end} when the "
                "resume point was asked for); not resuming until it ends"
            )
        time.sleep(0.1)


def read_range(
    consumer: Consumer,
    tp: TopicPartition,
    start: int,
    end: int | None,
    stopping: threading.Event | None = None,
) -> Generator[Any, None, None]:
    """Messages of ``tp`` with offsets in the half-open range [start, end), in order;
    ``end`` None reads to the end of the partition (brokers may report a high watermark
    short of the real end). The partition is given back when the read ends or is
    abandoned: a tail reader left assigned fetches it every 10 ms (see
    :func:`tail_reader`) while its owner goes on to wait for something else.

    A read that gets nothing fails with :class:`BrokerError` after :data:`READ_TIMEOUT`,
    or within a second of ``stopping`` being set: a service asked to stop while a broker
    it reads from is down must not wait the timeout out first."""
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    try:
        where = f"{tp.topic} partition {tp.partition}"
        yield from _assigned_range(consumer, where, end, stopping)
    finally:
        consumer.unassign()


def first_committed(
    consumer: Consumer,
    tp: TopicPartition,
    low: int,
    stopping: threading.Event | None = None,
) -> int | None:
    """The offset of the first record of ``tp`` at or after ``low`` that ``consumer``
    (read_committed: :func:`tail_reader`) delivers, or None when it delivers none up to
    the end. Why not compare the watermarks: a partition whose records all belong to
    aborted transactions (a writer killed mid-transaction, once the broker aborted it)
    has a last stable offset past them and their abort marker, yet holds no record any
    reader sees. Reads through aborted records, so it costs their size; callers ask only
    when the watermarks say the partition is not empty. ``stopping``: as for
    :func:`read_range`."""
    messages = read_range(consumer, tp, low, None, stopping)
    try:
        first = next(messages, None)
    finally:
        messages.close()
    return None if first is None else int(first.offset())


def _assigned_range(
    consumer: Consumer, where: str, end: int | None, stopping: threading.Event | None
) -> Iterator[Any]:
    deadline = time.monotonic() + READ_TIMEOUT
    while True:
        message = consumer.poll(1.0)
        if message is None:
            if stopping is not None and stopping.is_set():
                raise BrokerError(f"stopping: gave up reading {where}")
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
    *,
    below_high: bool = False,
    stopping: threading.Event | None = None,
) -> tuple[int, Match] | None:
    """The last message at or after ``low`` for which ``match(message)`` is not None,
    reading backwards in chunks from the end: (its offset, match result). The newest chunk
    is read to the end of the partition, past ``high`` if the broker under-reports it;
    with ``below_high``, only below ``high`` (a scan from a known offset down).
    ``stopping``: as for :func:`read_range`."""
    end: int | None = high if below_high else None
    top = high
    while top > low:
        start = max(low, top - TAIL_CHUNK)
        found = None
        for message in read_range(consumer, tp, start, end, stopping):
            result = match(message)
            if result is not None:
                found = (message.offset(), result)
        if found is not None:
            return found
        top = end = start
    return None
