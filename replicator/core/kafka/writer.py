"""The exactly-once writer of one destination partition: the one way replicated records
are produced (ingress uses it; the direct relay and restore are to use it, never a copy).

Exactly once across crashes rests on two things together:

1. **Fencing and atomic checkpoints.** Each destination partition has its own
   ``transactional.id``. Opening the writer (``init_transactions``) fences any earlier
   owner still alive and aborts its open transaction; records and their checkpoint are
   produced in one transaction, so on Kafka they become visible together or not at all.
2. **Provenance.** Every record carries ``replicator.source`` (see
   :mod:`replicator.core.kafka.provenance`). After fencing, :meth:`PartitionWriter.open`
   returns the resume point (:meth:`CheckpointStore.resume_point`): the caller continues
   exactly after the last source offset the destination holds.

A writer of a group member is also given the process's
:class:`~replicator.core.freezes.FreezeWatch`: it refuses to begin or commit a
transaction once the process was frozen since the writer opened (the group may have
given the partition away meanwhile), so a thawed "zombie" stops by itself even on a broker
that does not fence.

Order per transaction: produce the records, flush (their destination offsets are then
known), produce the checkpoint, commit. Time a broker throttled the writer (a client quota:
see :mod:`replicator.core.kafka.throttling`) is reported by the producer's poll and flush,
so what a checkpoint records as its transaction's throttling is all of it but the
commit's own request (a checkpoint committed without records repeats the figure of the
last transaction that held some). A caller writes records in source-offset order and
commits with the next source offset it will write.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from itertools import chain, repeat
from operator import length_hint
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from replicator.core.faults import (
    WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT,
    WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT,
    crash_point,
)
from replicator.core.freezes import FreezeWatch
from replicator.core.kafka import arrow_produce, provenance
from replicator.core.kafka.checkpoints import (
    Checkpoint,
    CheckpointStore,
    ResumePoint,
    WriterKind,
    WriteTarget,
)
from replicator.core.kafka.clients import AUTHORIZATION_FAILED, authorization_error
from replicator.core.kafka.errors import (
    BrokerError,
    DestinationRecreatedError,
    OwnershipLostError,
    RecordRefusedError,
    RecordTooLargeError,
)
from replicator.core.kafka.tail import SETTLE_WAIT
from replicator.core.kafka.throttling import THROTTLED, throttle_seconds
from replicator.core.kafka.topics import MAX_DESTINATION_MESSAGE_BYTES, PROVENANCE_ROOM

log = logging.getLogger(__name__)

PRODUCE_SLICE_ROWS = 10_000
PRODUCER_BUFFER_KIB = 8 * 1024
PRODUCER_BUFFER_RECORDS = 10_000
"""Unsent records buffered per destination partition; produce() waits when it is full.

Each queued record costs librdkafka about 550 bytes of the benchmark's shape (its value and
a few hundred bytes of bookkeeping), and a process holds a writer per busy partition.
10,000 still leaves two or more full batches (``batch.size``) queued behind the one being
sent. Measured on the ingress benchmark with one replay process (8 partitions, 4,000,000
records, alternated): peak RSS 464-501 MiB with 10,000 (twelve runs) against 493-544 MiB
with 20,000 (ten runs); the replay's time moved within the runs' spread (21-35 s against
23-29 s)."""
TIMESTAMP_NONE = 0
FENCING_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
REFUSED_RECORD_CODES = frozenset(
    {KafkaError.INVALID_RECORD, KafkaError.INVALID_TIMESTAMP, KafkaError._INVALID_DIFFERENT_RECORD}
)
"""What a broker answers about one record's content (Kafka rejects a record without a key
for a compacted topic with INVALID_RECORD, one stamped outside the topic's accepted range
with INVALID_TIMESTAMP): the same record is refused every time. The writer asks for one
delivery report per slice of records (a report per record would cost a Python call
each), so it usually hears of a refusal as _INVALID_DIFFERENT_RECORD on the slice's last
record: the refused one is at or before it, after the last committed record."""
SIZE_REFUSAL_CODES = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})
"""A broker's answer to a batch too large for the topic's max.message.bytes."""
Result = TypeVar("Result")


class RecordWriter(Protocol):
    """What a replication loop needs of its writer; :class:`PartitionWriter` is the real
    one, :class:`replicator.core.kafka.testing.MemoryWriter` one for tests without
    services."""

    def open(self) -> ResumePoint:
        """Fence earlier writers of the target; where to resume."""
        ...

    def write(self, table: pa.Table) -> None:
        """Records of the segment schema, in source-offset order (``offset`` column)."""
        ...

    def commit(self, next_source_offset: int) -> int:
        """Make everything written visible with its checkpoint; the last destination
        offset."""
        ...

    def abort(self) -> None: ...

    def record_halt(self, next_source_offset: int, reason: str) -> None: ...

    def close(self) -> None: ...


class PartitionWriter:
    """The transactional producer of one destination partition (see the module docstring
    for the order of work and why it is exactly once)."""

    def __init__(
        self,
        kafka: dict[str, Any],
        group: str,
        target: WriteTarget,
        checkpoints: CheckpointStore,
        *,
        kind: WriterKind,
        transaction_timeout: float = 60.0,
        freezes: FreezeWatch | None = None,
    ) -> None:
        self.target = target
        self._transaction_timeout = transaction_timeout
        self.kind = kind
        """Which service writes: recorded in every checkpoint (restore refuses to write
        beside another kind)."""
        self._freezes = freezes
        self._opened_at = time.monotonic()
        self._checkpoints = checkpoints
        self._failure: BaseException | None = None
        self._purged = False
        """librdkafka purged records of the open transaction from its queue: the
        transaction failed, and its own error says why (:meth:`_failed_transaction`)."""
        self._last_destination_offset = -1
        self._destination_topic_id = ""
        """Kafka's id of the destination topic when the writer opened: in every
        checkpoint (a checkpoint describes one topic, not a name)."""
        self._offset_at_begin = -1
        """The last destination offset when the open transaction began."""
        self._delivered_records = False
        """Whether a record of the open transaction was delivered."""
        self._in_transaction = False
        self._largest = (-1, -1)
        """(bytes of key and value, source offset) of the largest record written in the
        open transaction: the one a size refusal reported without its offset names."""
        self._fatal: Any = None
        """The producer's fatal error, once it has one (every later call then fails)."""
        self._throttled = 0.0
        """Seconds the brokers throttled this writer since the open transaction began."""
        self._throttled_with_records = 0.0
        """Those of the last transaction that held records: what checkpoints record (a
        transaction committing only a checkpoint, as ingress's at a segment's end, says
        nothing of the rate the records are written at)."""
        self._closed = False
        # The very callback objects the producer holds: arrow_produce checks for them.
        error_cb, throttle_cb = self._client_error, self._client_throttled
        self._producer = Producer(
            {
                # The destination topic decides what is too large (its max.message.bytes
                # leaves room for uncompressed records, see topics.py), not the client's
                # 1 MB default; a raw kafka.config setting still wins.
                "message.max.bytes": MAX_DESTINATION_MESSAGE_BYTES + PROVENANCE_ROOM,
                # librdkafka buffers up to 1 GiB of values per producer by default; a
                # process may own one writer per destination partition. A record whose
                # value is larger than this never enters the queue (see _refuse_if_never_fits):
                # a cluster carrying such records raises it in its raw kafka config.
                "queue.buffering.max.kbytes": PRODUCER_BUFFER_KIB,
                **kafka,
                "transactional.id": target.transactional_id(group),
                "linger.ms": 5,
                "batch.size": 1_000_000,
                # A few hundred bytes of bookkeeping per queued record, which the byte
                # limit does not count.
                "queue.buffering.max.messages": PRODUCER_BUFFER_RECORDS,
                "compression.type": "none",
                "transaction.timeout.ms": int(transaction_timeout * 1000),
                "error_cb": error_cb,
                "throttle_cb": throttle_cb,
            }
        )
        self._queue_bytes = 1024 * int(kafka.get("queue.buffering.max.kbytes", PRODUCER_BUFFER_KIB))
        """The most bytes of values librdkafka queues for this writer."""
        self._columns = arrow_produce.attach(self._producer, error_cb, throttle_cb)
        """Produces a slice's records from its columns in C (None: through Python)."""

    def open(self) -> ResumePoint:
        """Fence the previous owner (aborting its open transaction), then find where to
        resume."""
        self._opened_at = time.monotonic()
        self._call(lambda: self._producer.init_transactions(60))
        # A transaction of another writer (a sibling of a merged partition, a writer
        # frozen mid-transaction) ends at the latest at its timeout, the same as ours.
        settle = max(SETTLE_WAIT, self._transaction_timeout + 10)
        resume = self._checkpoints.resume_point(self.target, settle=settle, kind=self.kind)
        # A first commit without records (all filtered, aborted or compacted away) keeps
        # claiming the last record written before, not "none" (-1): the checkpoint with
        # the furthest source offset is the resume point that translation trusts.
        self._last_destination_offset = resume.destination_offset
        self._destination_topic_id = resume.destination_topic_id
        return resume

    # -- records --------------------------------------------------------------------------

    def write(self, table: pa.Table) -> None:
        """Produce every record of ``table`` (segment schema) in order, in the open
        transaction (begun here if none is).

        Rows become Python objects a slice at a time: a whole row group (8 MiB or more of
        Arrow data) as Python lists costs several times its size, in every writer."""
        self._begin()
        for start in range(0, len(table), PRODUCE_SLICE_ROWS):
            self._produce_slice(table.slice(start, PRODUCE_SLICE_ROWS))

    def _begin(self) -> None:
        if not self._in_transaction:
            self._refuse_if_frozen("begin a transaction")
            self._call(self._producer.begin_transaction)
            self._in_transaction = True
            self._purged = False
            self._offset_at_begin = self._last_destination_offset
            self._delivered_records = False
            self._largest = (-1, -1)
            self._throttled = 0.0

    def _produce_slice(self, table: pa.Table) -> None:
        if self._columns is not None and len(table) > 1:
            # All but the last record in C; the last carries the slice's delivery report.
            self._produce_in_c(table.slice(0, len(table) - 1))
            table = table.slice(len(table) - 1)
        if len(table) == 1:
            self._produce_columns(*self._one_record(table))
            return
        self._note_largest(table)
        offsets = table.column("offset")
        # Timestamp 0 lets the client stamp records that had none (TIMESTAMP_NONE).
        stamps = pc.if_else(
            pc.equal(table.column("timestamp_type"), TIMESTAMP_NONE),
            0,
            table.column("timestamp").cast(pa.int64()),
        ).to_pylist()
        self._produce_columns(
            offsets.to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            stamps,
            provenance.with_provenance(table.column("headers"), offsets, self.target.source),
        )

    def _one_record(
        self, table: pa.Table
    ) -> tuple[list[int], list[Any], list[Any], list[int], list[Any]]:
        """The one record of ``table`` as :meth:`_produce_columns` takes it, read from its
        scalars: the relay writes a slice per read, often of a few records when it is
        caught up, and a compute kernel per column cost each such slice more than its
        records (measured at 2,000 records/s: the relay's Python threads spent 14 s
        against 6 s before the columnar path)."""
        offset = table.column("offset")[0].as_py()
        record_key = table.column("key")[0].as_py()
        value = table.column("value")[0].as_py()
        stamp = 0
        if table.column("timestamp_type")[0].as_py() != TIMESTAMP_NONE:
            stamp = table.column("timestamp")[0].value
        headers = [(h["key"], h["value"]) for h in table.column("headers")[0].as_py()]
        headers.append((provenance.HEADER, provenance.encode(self.target.source, offset)))
        self._note_size(len(record_key or b"") + len(value or b""), offset)
        return [offset], [record_key], [value], [stamp], [headers]

    def _produce_in_c(self, table: pa.Table) -> None:
        """Produce every record of ``table`` through :attr:`_columns`: the records
        :meth:`_produce_columns` would produce from it, in order, without delivery
        reports. A record that finds librdkafka's queue full is offered again once
        deliveries were served, as :meth:`_produce_again` does."""
        assert self._columns is not None
        t = self.target
        prefix = t.source.header_prefix.encode()
        start = 0
        while True:
            start, code, largest = self._columns.produce(
                t.destination_topic, t.destination_partition, table, prefix, start
            )
            if largest >= 0:
                largest_offset = table.column("offset")[largest].as_py()
                self._note_size(_record_bytes(table, largest), largest_offset)
            if code == 0:
                return
            offset = table.column("offset")[start].as_py()
            if code != KafkaError._QUEUE_FULL:
                raise self._produce_failure(offset, KafkaError(code)) from None
            value = table.column("value")[start]
            self._refuse_if_never_fits(offset, len(value.as_buffer()) if value.is_valid else 0)
            self._producer.poll(0.05)

    def _produce_columns(
        self,
        offsets: list[int],
        record_keys: list[Any],
        values: list[Any],
        stamps: list[int],
        headers: list[Any],
    ) -> None:
        """Produce, in order, the records whose source offsets, record keys, values,
        timestamps and headers (provenance appended) are the same positions of these
        equally long lists, to the destination partition.

        ``map`` calls ``produce`` with positional arguments (topic, value, key, partition,
        on_delivery, its unused alias ``callback``, timestamp, headers), so no Python code
        runs per record: a Python loop unpacking each row and calling ``produce`` cost a
        tenth of a restore task's samples on top of ``produce`` itself (docs/performance.md,
        "Restore and ingress: where the time went"). A record that finds librdkafka's
        queue full, or that ``produce`` refuses, stops ``map`` there: which record it was
        is where the columns' iterators stopped."""
        count = len(offsets)
        t = self.target
        # One delivery callback per slice, on its last record: it gives the destination
        # offset for the checkpoint. A failed delivery of any record fails the commit.
        last_report = partial(self._delivered, offsets[-1]) if count else None
        values_left = iter(values)
        columns = (
            repeat(t.destination_topic),
            values_left,
            iter(record_keys),
            repeat(t.destination_partition),
            chain(repeat(None, count - 1), (last_report,)),
            repeat(None),
            iter(stamps),
            iter(headers),
        )
        while True:
            try:
                deque(map(self._producer.produce, *columns), maxlen=0)
                break
            except BufferError:  # librdkafka's queue is full
                i = count - length_hint(values_left) - 1
                report = last_report if i == count - 1 else None
                row = (t.destination_topic, values[i], record_keys[i], t.destination_partition)
                self._produce_again(offsets[i], (*row, report, None, stamps[i], headers[i]))
            except KafkaException as exc:
                i = count - length_hint(values_left) - 1
                raise self._produce_failure(offsets[i], exc.args[0]) from None
        self._after_slice()

    def _produce_again(self, offset: int, row: tuple[Any, ...]) -> None:
        """``produce(*row)`` of the record at source ``offset`` that found librdkafka's
        queue full: serve deliveries until it takes it."""
        self._refuse_if_never_fits(offset, 0 if row[1] is None else len(row[1]))
        while True:
            self._producer.poll(0.05)
            try:
                self._producer.produce(*row)
                return
            except BufferError:
                continue
            except KafkaException as exc:
                raise self._produce_failure(offset, exc.args[0]) from None

    def _refuse_if_never_fits(self, source_offset: int, value_bytes: int) -> None:
        """A record librdkafka found its queue full for, whose value alone is larger than
        the queue holds, would be offered again forever: it is refused, named, so that
        its partition halts (the operator raises ``queue.buffering.max.kbytes``)."""
        if value_bytes > self._queue_bytes:
            raise RecordTooLargeError(
                f"record at source offset {source_offset} of {self.target.source} has a "
                f"{value_bytes}-byte value, more than the writer's producer buffers "
                f"({self._queue_bytes} bytes: queue.buffering.max.kbytes in the "
                "destination cluster's kafka config; raise it above the value's size)",
                code=KafkaError.MSG_SIZE_TOO_LARGE,
            )

    def _after_slice(self) -> None:
        self._raise_if_failed()
        self._producer.poll(0)

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._purged:
            raise self._failed_transaction()

    def _failed_transaction(self) -> BaseException:
        """Why the open transaction failed, once librdkafka purged its records or refused
        a record for the transaction's state: the broker's answer to the transaction
        (adding a partition to it without a WRITE ACL, say), which ``commit_transaction``
        raises at once; a purged record's own report says only "Purged in queue"."""
        try:
            self._producer.commit_transaction(10)
        except KafkaException as exc:
            return self._failure_of(exc.args[0], "transaction on")
        return BrokerError(
            f"records for {self.target} were purged from the producer's queue",
            code=KafkaError._PURGE_QUEUE,
        )

    def _note_largest(self, table: pa.Table) -> None:
        sizes = pc.add(
            pc.fill_null(pc.binary_length(table.column("key")), 0),
            pc.fill_null(pc.binary_length(table.column("value")), 0),
        )
        index = pc.index(sizes, pc.max(sizes)).as_py()
        size = sizes[index].as_py() if index >= 0 else None
        if size is not None:
            self._note_size(size, table.column("offset")[index].as_py())

    def _note_size(self, size: int, source_offset: int) -> None:
        """A record of ``size`` bytes of key and value was written in the open
        transaction: the largest is the one a size refusal names."""
        if size > self._largest[0]:
            self._largest = (size, source_offset)

    def _produce_failure(self, source_offset: int | None, error: Any) -> BaseException:
        """A record refused, by ``produce`` or in its delivery report, as our error."""
        if error.code() == KafkaError._STATE and self._in_transaction:
            return self._failed_transaction()  # refused for the transaction's failure
        if error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            return self._too_large(source_offset, error)
        if error.code() in REFUSED_RECORD_CODES:
            which = (
                "a record at or before"
                if error.code() == KafkaError._INVALID_DIFFERENT_RECORD
                else "the record at"
            )
            return RecordRefusedError(
                f"{self.target.destination_topic} refused {which} source offset "
                f"{source_offset} of {self.target.source}: {error.str()}",
                code=error.code(),
            )
        return self._failure_of(error, "producing to")

    def _delivered(self, source_offset: int, error: Any, message: Any) -> None:
        """The delivery report of a slice's last record (at ``source_offset``)."""
        if error is not None:
            if error.code() == KafkaError._PURGE_QUEUE:
                self._purged = True  # a consequence: the cause is asked for outside callbacks
            elif self._failure is None:
                self._failure = self._delivery_error(error, message, source_offset)
            return
        offset = message.offset()
        if offset <= self._last_destination_offset and self._failure is None:
            self._failure = self._went_back(offset)
        self._last_destination_offset = max(self._last_destination_offset, offset)
        self._delivered_records = True

    def _went_back(self, offset: int) -> DestinationRecreatedError:
        """A partition's log only grows: a record delivered at or before one this writer
        wrote (or resumed after) means the partition was truncated (an unclean leader
        election) or its topic created again. Committing on would continue from memory in
        a log that lost what it held."""
        return DestinationRecreatedError(
            f"{self.target}: a record was delivered at destination offset {offset}, at or "
            f"before offset {self._last_destination_offset} this writer had written or "
            "resumed after (the partition truncated, or the topic deleted and created "
            "again); the open transaction is aborted, and a writer opened again resumes by "
            "what the partition holds"
        )

    def _delivery_error(self, error: Any, message: Any, source_offset: int) -> BaseException:
        if error.code() in SIZE_REFUSAL_CODES:
            return self._too_large_in_transaction(error)
        named = None
        if message is not None and error.code() in REFUSED_RECORD_CODES:
            named = provenance.source_offset(message.headers(), self.target.source)
        return self._produce_failure(source_offset if named is None else named, error)

    def _too_large_in_transaction(self, error: Any) -> RecordTooLargeError:
        """A size refusal the broker gave a whole batch (its report reaches the writer on
        a slice's last record, or only as the commit's failure): it names the largest
        record of the open transaction, the one that cannot fit."""
        size, offset = self._largest
        return RecordTooLargeError(
            f"record at source offset {offset} of {self.target.source} ({size} bytes of key "
            f"and value, the largest of its transaction) is larger than "
            f"{self.target.destination_topic} accepts ({error.str()})",
            code=error.code(),
        )

    def _too_large(self, source_offset: int | None, error: Any) -> RecordTooLargeError:
        return RecordTooLargeError(
            f"record at source offset {source_offset} of {self.target.source} is larger "
            f"than {self.target.destination_topic} accepts ({error.str()})",
            code=error.code(),
        )

    # -- transactions ---------------------------------------------------------------------

    def commit(self, next_source_offset: int) -> int:
        """Flush, write the checkpoint, commit. Returns the last destination offset."""
        self._begin()
        self._call(lambda: self._producer.flush(60))
        self._raise_if_failed()
        holds_records = self._delivered_records
        if holds_records:  # the crash points claim records in the transaction
            self._throttled_with_records = self._throttled
            self._refuse_if_recreated()
            crash_point(WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT, where=str(self.target))
        self._checkpoint(next_source_offset)
        if holds_records:
            crash_point(
                WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT,
                before=lambda: self._producer.flush(30),
                where=str(self.target),
            )
        self._commit_transaction()
        return self._last_destination_offset

    def record_halt(self, next_source_offset: int, reason: str) -> None:
        """Leave the reason a partition halted in its checkpoint, for operators and
        ``replicator status`` (nothing else is produced). The halt stands whether or not
        the note is written: a producer whose transaction the broker failed (an ACL
        revoked: the abort is answered INVALID_TXN_STATE) cannot write it, which is
        logged."""
        try:
            self._begin()
            self._checkpoint(next_source_offset, reason)
            self._commit_transaction()
        except BrokerError as unrecorded:
            log.warning("the halt of %s is not in its checkpoint: %s", self.target, unrecorded)

    def _commit_transaction(self) -> None:
        self._refuse_if_frozen("commit")
        self._call(lambda: self._producer.commit_transaction(60))
        self._in_transaction = False

    def _refuse_if_recreated(self) -> None:
        """Records go into a topic, not a name: committed into a destination deleted and
        created again since this writer opened, they would continue from a position held
        in memory, and everything before it would never reach the new topic (the tail
        would then show this source's provenance, and no resume would refill it). So a
        transaction holding records commits only into the topic the writer opened on."""
        now = self._checkpoints.topic_id(self.target.destination_topic)
        opened_on = self._destination_topic_id
        if not opened_on:  # not known at the open: the first id seen stands for it
            self._destination_topic_id = now
            return
        if now == opened_on:
            return
        self.abort()
        raise DestinationRecreatedError(
            f"{self.target}: the topic was deleted"
            + (f" and created again (topic id {opened_on}, now {now})" if now else "")
            + " since its writer opened; the open transaction is aborted, and a writer "
            "opened again resumes by what the topic holds"
        )

    def _refuse_if_frozen(self, action: str) -> None:
        """A zombie's defence (see the module docstring): nothing more from a writer
        whose process was frozen since it opened; its open transaction is aborted."""
        if self._freezes is None:
            return
        freeze = self._freezes.frozen_since(self._opened_at)
        if freeze is None:
            return
        log.warning(
            "%s: refusing to %s: this process was frozen for %.1f s since the writer "
            "opened, and the partition may have another owner now",
            self.target,
            action,
            freeze.seconds,
        )
        self.abort()
        raise OwnershipLostError(
            f"{self.target}: this process was frozen for {freeze.seconds:.1f} s since its "
            f"writer opened (the group may have given the partition away)"
        )

    def _checkpoint(self, next_source_offset: int, halted: str = "") -> None:
        t = self.target
        checkpoint = Checkpoint(
            t.destination_topic,
            t.destination_partition,
            t.source.origin,
            t.source.topic,
            next_source_offset,
            self._last_destination_offset,
            time.time(),
            halted,
            None if t.same_partition else t.source.partition,
            self.kind,
            self._destination_topic_id,
            round(self._throttled_with_records, 3),
        )
        self._checkpoints.produce(self._producer, t, checkpoint)

    def abort(self) -> None:
        """Abort the open transaction. Its records never become visible, so the last
        destination offset goes back to what it was when the transaction began: a
        checkpoint written after (a halt's) must not claim an aborted record."""
        if self._in_transaction:
            try:
                self._producer.abort_transaction(30)
            except KafkaException as exc:
                log.warning("abort of %s failed: %s", self.target, exc.args[0].str())
            self._in_transaction = False
            # Reports of the aborted records still queued are served now, so that none
            # moves the offset on after it was put back (a producer in a fatal state
            # refuses even that: it can write nothing more anyway).
            with contextlib.suppress(KafkaException):
                self._producer.poll(0)
            self._last_destination_offset = self._offset_at_begin

    def close(self) -> None:
        """Abort what is open and let the client go. Never raises: a writer is closed on
        the way out of a failure (fenced, broker gone) that is already being reported, and
        a producer in a fatal state refuses even its flush. Nothing may be called on a
        closed writer.

        The client is destroyed here, not left to Python: its error callback makes writer
        and producer a reference cycle, which only the cyclic collector frees, and the
        services run it rarely (:mod:`replicator.core.collector`). Ingress owning 256
        partitions a process held the producers of ~250 closed writers (over 1,000
        librdkafka threads) and peaked over 512 MiB."""
        if self._closed:
            return
        self._closed = True
        self.abort()
        try:
            self._producer.flush(5)
        except KafkaException as exc:
            log.warning("closing the writer of %s: %s", self.target, exc.args[0].str())
        try:
            # What a flush left undelivered belongs to an aborted (or never committed)
            # transaction: nothing of it is to be sent.
            self._producer.purge()
        except KafkaException as exc:
            log.warning("releasing the client of %s: %s", self.target, exc.args[0].str())
        # The last reference (the C producer holds one too): the client is destroyed now.
        # (Producer.close() would abort a fenced producer's transaction again, warn, and
        # wait for undelivered records.)
        self._columns = None
        del self._producer

    def _call(self, action: Callable[[], Result]) -> Result:
        try:
            return action()
        except KafkaException as exc:
            raise self._failure_of(exc.args[0], "transaction on") from None

    def _client_error(self, error: Any) -> None:
        """librdkafka's error callback: keeps the fatal error that later calls report only
        as ``_FATAL`` ("Local: Fatal error"), without saying it was fencing."""
        if error.fatal() and self._fatal is None:
            self._fatal = error

    def _client_throttled(self, event: Any) -> None:
        """librdkafka's throttle callback: a broker held this writer back (a quota)."""
        seconds = throttle_seconds(event)
        self._throttled += seconds
        THROTTLED.add(self.kind, seconds)

    def _failure_of(self, error: Any, doing: str) -> BrokerError:
        """A client error as ours: fencing is lost ownership, whatever call reported it
        (a producer fenced mid-transaction hears of it from ``produce`` too, and once it
        is fenced every call fails with ``_FATAL``, the fencing known from the error
        callback)."""
        if error.code() == KafkaError._FATAL:
            if self._fatal is None:
                self._producer.poll(0)  # serves the error callback
            error = self._fatal or error
        if error.code() in FENCING_CODES:
            self._fatal = self._fatal or error
            return OwnershipLostError(
                f"{self.target} is now written by another instance", code=error.code()
            )
        if error.code() in AUTHORIZATION_FAILED:
            return authorization_error(
                "Write",
                f"topic {self.target.destination_topic!r} (or the checkpoint topic "
                f"{self._checkpoints.topic!r}) in a transaction",
                error,
            )
        if error.code() in SIZE_REFUSAL_CODES and self._largest[1] >= 0:
            # A record of the transaction without a delivery report of its own was
            # refused (only a slice's last record has one): the commit fails with it.
            return self._too_large_in_transaction(error)
        if error.code() in REFUSED_RECORD_CODES:
            return RecordRefusedError(
                f"{self.target.destination_topic} refused a record of {self.target.source} "
                f"written since the last commit: {error.str()}",
                code=error.code(),
            )
        return BrokerError.from_kafka(f"{doing} {self.target}", error)


def _record_bytes(table: pa.Table, index: int) -> int:
    """Bytes of key and value of record ``index`` of ``table`` (a null counts none)."""
    total = 0
    for column in ("key", "value"):
        data = table.column(column)[index]
        if data.is_valid:
            total += len(data.as_buffer())
    return total
