"""Writing one destination partition: a transactional producer, the resume point, and the
record-producing loop.

Exactly once across crashes rests on two things together:

1. **Fencing and atomic checkpoints.** Each destination partition has its own
   ``transactional.id``. Opening it (``init_transactions``) fences any earlier owner still
   alive and aborts its open transaction; records and their checkpoint are produced in one
   transaction, so on Kafka they become visible together or not at all.
2. **Provenance.** Every record carries ``replicator.source`` (see
   :mod:`ingress.provenance`). After fencing, the new owner reads the destination tail
   (read_committed) and resumes after the last source offset it finds there, or after the
   checkpoint if that is further (a segment may end in offsets without records). What is in
   the destination is the truth: brokers that show aborted records to read_committed
   readers (the local test broker does) see them counted as delivered and never get them
   twice; Kafka hides them and they are produced again.

Order: produce the records, flush (their destination offsets are then known), produce the
checkpoint, commit the transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ingress import provenance
from ingress.checkpoints import Checkpoint, checkpoint_key, checkpoint_partition
from replicator.errors import BrokerError, ReplicatorError
from replicator.faults import crash_point

log = logging.getLogger(__name__)

TAIL_CHUNK = 500
PRODUCE_SLICE_ROWS = 10_000
PRODUCER_BUFFER_KIB = 8 * 1024
PRODUCER_BUFFER_RECORDS = 20_000
"""Unsent records buffered per destination partition; produce() waits when it is full."""
TIMESTAMP_NONE = 0


class RecordTooLargeError(ReplicatorError):
    """The destination refused a record for its size; names where it came from."""


class OwnershipLost(ReplicatorError):
    """Another instance fenced this producer: it owns the partition now."""


@dataclass(frozen=True)
class ResumePoint:
    next_source_offset: int | None
    """None: nothing of this source was ever produced here."""
    destination_offset: int
    checkpoint: Checkpoint | None = None


@dataclass(frozen=True)
class Target:
    region: str
    topic: str
    partition: int
    destination_topic: str

    def transactional_id(self, group: str) -> str:
        return f"{group}.{self.destination_topic}.{self.partition}"


def _consumer(base: dict[str, Any]) -> Consumer:
    return Consumer(
        {
            **base,
            "group.id": "replicator-ingress-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            # Scans end at end-of-partition, which a broker reports only after a fetch
            # came back empty; don't let it hold that fetch for the default 500 ms.
            "fetch.wait.max.ms": 10,
        }
    )


def read_range(
    consumer: Consumer, tp: TopicPartition, start: int, end: int | None
) -> Iterator[Any]:
    """Messages of ``tp`` with offsets in [start, end), in order; ``end`` None reads to the
    end of the partition (brokers may report a high watermark short of the real end)."""
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    deadline = time.monotonic() + 60
    while True:
        message = consumer.poll(1.0)
        if message is None:
            if time.monotonic() > deadline:
                raise BrokerError(f"timed out reading {tp.topic} partition {tp.partition}")
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return
            raise BrokerError(f"reading {tp.topic} partition {tp.partition}: {error.str()}")
        offset = message.offset()
        if end is not None and offset is not None and offset >= end:
            return
        yield message


def scan_back(
    consumer: Consumer, tp: TopicPartition, low: int, high: int, match: Any
) -> tuple[int, Any] | None:
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


def resume_point(
    base: dict[str, Any], target: Target, checkpoint_topic: str, checkpoint_partitions: int
) -> ResumePoint:
    """Where to resume: the furthest of the latest checkpoint and the last provenance
    header in the destination partition's tail. Call only after fencing."""
    consumer = _consumer(base)
    try:
        key = checkpoint_key(
            target.destination_topic, target.partition, target.region, target.topic
        )
        ctp = TopicPartition(checkpoint_topic, checkpoint_partition(key, checkpoint_partitions))
        low, high = consumer.get_watermark_offsets(ctp, timeout=30)
        found = scan_back(
            consumer,
            ctp,
            low,
            high,
            lambda m: (
                Checkpoint.from_json(m.value()) if m.key() == key.encode() and m.value() else None
            ),
        )
        checkpoint: Checkpoint | None = found[1] if found else None

        dtp = TopicPartition(target.destination_topic, target.partition)
        low, high = consumer.get_watermark_offsets(dtp, timeout=30)
        floor = max(low, checkpoint.destination_offset) if checkpoint else low
        tail = scan_back(
            consumer,
            dtp,
            floor,
            high,
            lambda m: provenance.source_offset(
                m.headers(), target.region, target.topic, target.partition
            ),
        )
    finally:
        consumer.close()
    candidates = []
    if checkpoint is not None:
        candidates.append((checkpoint.next_source_offset, checkpoint.destination_offset))
    if tail is not None:
        candidates.append((tail[1] + 1, tail[0]))
    if not candidates:
        return ResumePoint(None, -1, checkpoint)
    next_offset, destination_offset = max(candidates)
    return ResumePoint(next_offset, destination_offset, checkpoint)


class PartitionProducer:
    """The transactional producer of one destination partition."""

    def __init__(
        self,
        base: dict[str, Any],
        group: str,
        target: Target,
        checkpoint_topic: str,
        checkpoint_partitions: int,
    ) -> None:
        self.target = target
        self._checkpoint_topic = checkpoint_topic
        self._checkpoint_partitions = checkpoint_partitions
        self._failure: BaseException | None = None
        self._last_destination_offset = -1
        self._producer = Producer(
            {
                **base,
                "transactional.id": target.transactional_id(group),
                "linger.ms": 5,
                "batch.size": 1_000_000,
                # librdkafka buffers up to 1 GiB per producer by default, plus a few hundred
                # bytes of bookkeeping per queued record that the byte limit does not
                # count; ingress has one producer per destination partition it owns.
                "queue.buffering.max.messages": PRODUCER_BUFFER_RECORDS,
                "queue.buffering.max.kbytes": PRODUCER_BUFFER_KIB,
                "compression.type": "none",
                "transaction.timeout.ms": 60_000,
            }
        )
        self._producer.init_transactions(60)  # fences the previous owner
        self._in_transaction = False

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            if self._failure is None:
                self._failure = self._delivery_error(error, message)
            return
        self._last_destination_offset = max(self._last_destination_offset, message.offset())

    def _delivery_error(self, error: Any, message: Any) -> BaseException:
        t = self.target
        offset = provenance.source_offset(message.headers(), t.region, t.topic, t.partition)
        if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            return RecordTooLargeError(
                f"record at source offset {offset} of {t.region}/{t.topic} partition "
                f"{t.partition} is larger than {t.destination_topic} accepts ({error.str()})"
            )
        return BrokerError(
            f"producing to {t.destination_topic} partition {t.partition}: {error.str()}"
        )

    def begin(self) -> None:
        if not self._in_transaction:
            self._call(self._producer.begin_transaction)
            self._in_transaction = True

    def produce(self, table: pa.Table) -> None:
        """Produce every record of ``table`` (segment schema) in order.

        Rows become Python objects a slice at a time: a whole row group (8 MiB or more of
        Arrow data) as Python lists costs several times its size, in every worker."""
        for start in range(0, len(table), PRODUCE_SLICE_ROWS):
            self._produce_slice(table.slice(start, PRODUCE_SLICE_ROWS))

    def _produce_slice(self, table: pa.Table) -> None:
        t = self.target
        produce = self._producer.produce
        topic, partition = t.destination_topic, t.partition
        offsets = table.column("offset")
        # Timestamp 0 lets the client stamp records that had none (TIMESTAMP_NONE).
        stamps = pc.if_else(
            pc.equal(table.column("timestamp_type"), TIMESTAMP_NONE),
            0,
            table.column("timestamp").cast(pa.int64()),
        ).to_pylist()
        rows = zip(
            offsets.to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            stamps,
            provenance.with_provenance(
                table.column("headers"), offsets, t.region, t.topic, t.partition
            ),
            strict=True,
        )
        # One delivery callback per slice, on its last record: it gives the destination
        # offset for the checkpoint. A failed delivery of any record fails the commit.
        last = len(table) - 1
        for i, (offset, key, value, stamp, headers) in enumerate(rows):
            callback = self._delivered if i == last else None
            while True:
                try:
                    produce(
                        topic,
                        value,
                        key,
                        partition,
                        on_delivery=callback,
                        timestamp=stamp,
                        headers=headers,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.05)
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                        raise RecordTooLargeError(
                            f"record at source offset {offset} of {t.region}/{t.topic} "
                            f"partition {t.partition} is larger than {topic} accepts"
                        ) from None
                    raise
        if self._failure is not None:
            raise self._failure
        self._producer.poll(0)

    def record_halt(self, next_source_offset: int, reason: str) -> None:
        """Leave the reason a partition halted in its checkpoint, for operators and
        ``replicator status`` (nothing else is produced)."""
        self.begin()
        self._checkpoint(next_source_offset, reason)
        self._call(lambda: self._producer.commit_transaction(60))
        self._in_transaction = False

    def _checkpoint(self, next_source_offset: int, halted: str = "") -> None:
        t = self.target
        checkpoint = Checkpoint(
            t.destination_topic,
            t.partition,
            t.region,
            t.topic,
            next_source_offset,
            self._last_destination_offset,
            time.time(),
            halted,
        )
        self._producer.produce(
            self._checkpoint_topic,
            key=checkpoint.key.encode(),
            value=checkpoint.to_json(),
            partition=checkpoint_partition(checkpoint.key, self._checkpoint_partitions),
        )

    def commit(self, next_source_offset: int) -> int:
        """Flush, write the checkpoint, commit. Returns the last destination offset."""
        self._call(lambda: self._producer.flush(60))
        if self._failure is not None:
            raise self._failure
        crash_point("ingress-after-produce-before-checkpoint")
        self._checkpoint(next_source_offset)
        self._call(lambda: self._producer.commit_transaction(60))
        self._in_transaction = False
        return self._last_destination_offset

    def abort(self) -> None:
        if self._in_transaction:
            try:
                self._producer.abort_transaction(30)
            except KafkaException as exc:
                log.warning(
                    "abort of %s partition %d failed: %s",
                    self.target.destination_topic,
                    self.target.partition,
                    exc.args[0].str(),
                )
            self._in_transaction = False

    def close(self) -> None:
        self.abort()
        self._producer.flush(5)

    def _call(self, action: Any) -> Any:
        try:
            return action()
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() in (
                KafkaError._FENCED,
                KafkaError.PRODUCER_FENCED,
                KafkaError.INVALID_PRODUCER_EPOCH,
            ):
                raise OwnershipLost(
                    f"{self.target.destination_topic} partition {self.target.partition} is "
                    "now written by another instance"
                ) from None
            raise BrokerError(
                f"transaction on {self.target.destination_topic} partition "
                f"{self.target.partition}: {error.str()}"
            ) from None
