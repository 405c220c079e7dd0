"""The relay of one source partition: reads it from the chosen upstream and writes it into
its destination partition, in offset order, exactly once.

Order of work: open the writer (fencing the partition's previous owner) and take its
resume point; read a batch from the current upstream at the next source offset; filter
it; write the kept records; and at least every ``checkpoint_interval``, and whenever the
upstream has nothing more, commit (flush, checkpoint, commit) up to the next source
offset. Dropped records and offsets without records (transaction markers, compaction)
move the next offset on like relayed ones.

Where a partition nothing was relayed from starts is recorded the moment it is chosen (a
commit of no records), so a restart before the first record resumes there instead of
choosing a new "latest" and skipping what came meanwhile. "latest" is the upstream's last
stable offset (a read_committed reader's end), so a transaction open at the start is
relayed once it commits. A destination whose checkpoint describes an earlier topic of the
same name (deleted and created again) is refilled from the upstream's log start.

Before reading from another upstream (failover), the record relayed last must be on the
new upstream at the same offset; if not, the partition halts. It is the newest record of
this source in the destination; when the destination holds none any more (retention,
DeleteRecords), the upstreams that hold the record before the next offset must agree on it
instead. An upstream is chosen only if its log reaches the next source offset (not the last
relayed record's: records after it may have been filtered out or aborted); while none
does, the partition waits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from relay.errors import (
    SourceDataLossError,
    UnrelayableRecordError,
    UpstreamMismatchError,
    UpstreamUnreadableError,
)
from relay.failover import (
    TIMESTAMP_NONE,
    Choice,
    RecordRef,
    UpstreamState,
    backoff,
    choose_upstream,
    last_record,
    record_ref,
    same_record,
)
from relay.metrics import RelayMetrics
from replicator.core.config import Config, RelayTopic, required
from replicator.core.filters import FilterChain
from replicator.core.filters.errors import FilterError
from replicator.core.kafka import provenance
from replicator.core.kafka.arrow_reads import BAD_RECORD, PartitionReader, ReadChunk, open_reader
from replicator.core.kafka.checkpoints import ResumePoint, WriteTarget
from replicator.core.kafka.clients import BULK_READER, client_config
from replicator.core.kafka.errors import (
    AuthorizationError,
    BrokerError,
    CheckpointError,
    OwnershipLostError,
    RecordRefusedError,
    RecordTooLargeError,
)
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.tail import (
    read_range,
    scan_back,
    tail_reader,
    watermark_reader,
    watermarks,
)
from replicator.core.kafka.writer import RecordWriter
from replicator.core.logs import ContextLog, partition_fields
from replicator.core.workers import report_failure

log = logging.getLogger(__name__)

READ_BATCH = 5_000
NO_END = 2**63 - 1
POLL_SECONDS = 0.05
READ_MIN_BYTES = 64 * 1024
"""What a fetch waits for (up to 50 ms). Measured at 2,000 records/s over 8 partitions:
with the default (1 byte) every small batch the source gets is a fetch of its own, and
the source broker spent 0.56 cores serving them against 0.44 with this."""
READ_QUEUE: dict[str, Any] = {
    "queued.min.messages": 4 * READ_BATCH,
    "queued.max.messages.kbytes": 16 * 1024,
}
"""How much a partition's reader fetches ahead of the relay: four reads' worth of records,
and at most 16 MiB of them.

Why: every partition has a reader of its own, and librdkafka's defaults let each one queue
100,000 records or 64 MiB before it stops fetching. Each queued record also costs
librdkafka an op of its own beyond its bytes, so at the ``bench`` shape (216 bytes a
record) the default queues held most of the process: one relay of 8 partitions peaked at
about 670 MiB of RSS over 3,000,000 records, and at about 320 MiB with these bounds. Four
reads ahead still hide a fetch's round trip behind the writes (``fetch.queue.backoff.ms``
is 10 ms, :data:`~replicator.core.kafka.clients.BULK_READER`). A cluster's raw ``config``
table overrides these."""


def reader_settings(kafka: dict[str, Any], group_id: str) -> dict[str, Any]:
    """The settings of a partition's reader of an upstream whose client settings are
    ``kafka``: :data:`BULK_READER` and :data:`READ_QUEUE` under the cluster's own (its raw
    ``config`` table overrides them), and over both what the relay's reading relies on
    (read_committed, a group id never joined, no reset past a gap). Pure."""
    return {
        **BULK_READER,
        **READ_QUEUE,
        **kafka,
        "group.id": f"{group_id}-reader",  # never joined or committed
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "auto.offset.reset": "error",
        # The broker answers a fetch once it has READ_MIN_BYTES or after 50 ms (not the
        # 500 ms default): a partition written a few records at a time is fetched 20
        # times a second, not once per record batch.
        "fetch.wait.max.ms": 50,
        "fetch.min.bytes": READ_MIN_BYTES,
    }


HALTING_ERRORS = (
    AuthorizationError,
    UpstreamMismatchError,
    SourceDataLossError,
    UnrelayableRecordError,
    FilterError,
    RecordRefusedError,
    CheckpointError,
)


def produce_error_kind(error: BrokerError) -> str:
    """The ``error`` label of a failed write (a fixed set: see ``ERROR_KINDS``)."""
    if error.code in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT):
        return "timeout"
    if error.code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) or error.retriable:
        return "transport"
    return "other"


@dataclass
class RelayStatus:
    state: str = "starting"
    """starting | relaying | caught-up | waiting | done | halted | failed | stopped"""
    upstream: str | None = None
    next_offset: int | None = None
    reason: str = ""


class RelayWorker(threading.Thread):
    def __init__(
        self,
        config: Config,
        topic: RelayTopic,
        partition: int,
        metrics: RelayMetrics,
        states: Callable[[], dict[str, UpstreamState]],
        *,
        open_writer: Callable[[WriteTarget], RecordWriter],
        filters: FilterChain,
        stop_at: int | None = None,
        start_from: str | None = None,
    ) -> None:
        super().__init__(name=f"relay-{topic.source_topic}-{partition}", daemon=True)
        self.config = config
        self.relay = required(config, "relay")
        self.topic = topic
        self.partition = partition
        self.metrics = metrics
        self._states = states
        self._open_writer = open_writer
        self._filters = filters
        self.stop_at = stop_at
        self._start_from = start_from or self.relay.start_from
        """Where a partition nothing was relayed from starts: ``relay.start_from``, or
        "earliest" for a partition added to the source while the relay ran."""
        """With ``--stop-at-end``: the end offset to relay up to (half-open)."""
        self.status = RelayStatus()
        self.failure: BaseException | None = None
        self._stopping = threading.Event()
        self._labels = (topic.source_topic, str(partition))
        self._tp = (topic.source_topic, partition)
        self.target = WriteTarget(
            SourcePartition(self.relay.origin, topic.source_topic, partition),
            topic.destination,
            partition if topic.destination_partition is None else topic.destination_partition,
        )
        self._last: RecordRef | None = None
        self._last_from = "an upstream before this worker started"
        """Where ``_last`` was read: an upstream, or the destination after a restart."""
        self._fetch_problem = ""
        self._waiting = ""
        """Why no upstream is read from now (when none is)."""
        self._committed: int | None = None
        """The next source offset of the last commit (None: nothing relayed yet)."""
        self._next: int | None = None
        """The next source offset to relay (None: not chosen yet)."""
        self._refill = False
        """The destination was written before, into an earlier topic of its name: it is
        refilled from the log start."""
        self._reader: PartitionReader | None = None
        """The reader of the current upstream (the C range reader: Arrow batches)."""
        self._unrelayable: UnrelayableRecordError | None = None
        """A record the last read stopped before, which halts the partition."""
        self.log = ContextLog(
            log, partition_fields(self.relay.origin, topic.source_topic, partition)
        )

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        try:
            self._run()
        except OwnershipLostError as exc:
            # As in ingress: fail, and the supervisor re-opens the writer if the
            # partition is still owned when the restart is due.
            self.status.state, self.status.reason = "failed", f"fenced: {exc}"
            self.failure = exc
            self.metrics.produce_errors.labels("fenced").inc()
            self.log.warning("%s fenced; re-opening its writer unless it moved: %s", self.name, exc)
        except HALTING_ERRORS as exc:
            self.status.state, self.status.reason = "halted", str(exc)
            self.metrics.halted.labels(*self._labels).set(1)
            if isinstance(exc, RecordTooLargeError):
                self.metrics.produce_errors.labels("too_large").inc()
            self.log.error("partition halted: %s", exc)
        except BaseException as exc:  # reported; the service restarts the worker
            if isinstance(exc, BrokerError):
                self.metrics.produce_errors.labels(produce_error_kind(exc)).inc()
            self.status.state, self.status.reason = "failed", str(exc)
            self.failure = exc
            report_failure(self.log, self.name, exc, traceback=not isinstance(exc, BrokerError))
        finally:
            self._close_reader()

    # -- the relay loop -------------------------------------------------------------------

    def _run(self) -> None:
        writer = self._open_writer(self.target)
        try:
            resume = writer.open()
            self._last = self._last_relayed(resume)
            self._committed = self._next = resume.next_source_offset
            self._refill = resume.next_source_offset is None and resume.discarded is not None
            try:
                self._relay(writer, resume)
            except HALTING_ERRORS as exc:
                # The open transaction's records are aborted: the halt records the next
                # offset of the last commit, so a restart relays them again.
                writer.abort()
                if self._committed is not None:
                    writer.record_halt(self._committed, str(exc))
                raise
        finally:
            writer.close()

    def _relay(self, writer: RecordWriter, resume: ResumePoint) -> None:
        next_offset = resume.next_source_offset
        opened: float | None = None  # when the open transaction's first record was written
        attempt = 0
        while not self._stopping.is_set():
            upstream = self._choose()
            if upstream is None:
                self.status.state = "waiting"
                delay = backoff(attempt)
                attempt += 1
                self.log.warning("%s; retrying in %.1fs", self._waiting, delay)
                self._stopping.wait(delay)
                continue
            attempt = 0
            if next_offset is None:
                next_offset = self._start(writer, upstream)
            self.status.next_offset = next_offset
            if self.stop_at is not None and next_offset >= self.stop_at:
                if self._committed != next_offset or opened is not None:
                    self._commit(writer, next_offset)
                self.status.state = "done"
                return
            try:
                records, end_seen = self._read(upstream, next_offset)
            except UpstreamUnreadableError as exc:  # it lacks the next offset: choose again
                self._leave(upstream, str(exc))
                continue
            if records is not None:
                next_offset = self._next = self._write(writer, records)
                opened = opened or time.monotonic()
            if end_seen is not None:
                next_offset = self._next = max(next_offset, end_seen)
            if self._unrelayable is not None:  # the records before it are kept
                self._commit(writer, next_offset)
                opened = None
                raise self._unrelayable
            # Caught up: the read reached the log end (the consumer's end-of-partition
            # event) or nothing came within POLL_SECONDS. Commit then, so records wait
            # for the next ones only while more are coming; while a backlog is read,
            # every checkpoint_interval. (A read does not wait to fill READ_BATCH, so
            # a short one does not say the upstream is drained.)
            caught_up = end_seen is not None or records is None
            due = opened is not None and time.monotonic() - opened >= self.relay.checkpoint_interval
            if due or (caught_up and (opened is not None or self._committed != next_offset)):
                self._commit(writer, next_offset)
                opened = None
            self.status.state = "caught-up" if caught_up else "relaying"
            self._report_lag(upstream, next_offset)
        if next_offset is not None and (opened is not None or self._committed != next_offset):
            self._commit(writer, next_offset)  # a stop request: keep what was written

    def _start(self, writer: RecordWriter, upstream: str) -> int:
        """Where a partition nothing was relayed from starts, committed at once (see the
        module docstring)."""
        start_from = "earliest" if self._refill else self._start_from
        next_offset = self._start_offset(upstream, start_from)
        if self._refill:
            self.log.warning(
                "the destination was written before, into an earlier topic of its name: "
                "refilling it from offset %d, the upstream's log start",
                next_offset,
            )
        else:
            self.log.info("nothing relayed yet: starting at offset %d", next_offset)
        self._commit(writer, next_offset)
        self._next = next_offset
        return next_offset

    def _leave(self, upstream: str, why: str) -> None:
        """Stop reading ``upstream`` for now; the next choice may pick it again once it
        holds the next offset."""
        self._close_reader()
        self.status.upstream = None
        self._waiting = why
        self.log.warning("%s; choosing an upstream again", why)
        self._stopping.wait(POLL_SECONDS * 10)

    def _commit(self, writer: RecordWriter, next_offset: int) -> None:
        writer.commit(next_offset)
        self._committed = self.status.next_offset = next_offset

    def _write(self, writer: RecordWriter, records: pa.RecordBatch) -> int:
        """Write ``records`` (what the filters keep of them); the next source offset."""
        table = pa.Table.from_batches([records])
        kept = self._filters.apply(table, self.topic.source_topic, self.partition)
        if kept.num_rows:
            writer.write(kept)
            self.metrics.records.labels(*self._labels).inc(kept.num_rows)
            self.metrics.bytes.labels(*self._labels).inc(key_and_value_bytes(kept))
        if kept.num_rows < table.num_rows:
            self.metrics.filtered.labels(*self._labels).inc(table.num_rows - kept.num_rows)
        self._last = last_record(records)
        if self._last.timestamp is not None:
            lag = max(0.0, time.time() - self._last.timestamp / 1000)
            self.metrics.lag_seconds.labels(*self._labels).set(lag)
        return self._last.offset + 1

    # -- upstreams ------------------------------------------------------------------------

    def _choose(self) -> str | None:
        current = self.status.upstream
        if self.relay.mode == "single":
            first = self.relay.sources[0]
            healthy = self._states().get(first)
            up = healthy is None or healthy.healthy
            choice = Choice(first if up else None, None, "" if up else "the upstream is down")
        else:
            choice = choose_upstream(
                current,
                self.relay.sources,
                self._states(),
                self._tp,
                self.relay.lag_threshold,
                self._next,
            )
        self._waiting = choice.waiting
        if choice.upstream != current:
            try:
                self._switch(current, choice.upstream, choice.reason)
            except UpstreamUnreadableError as exc:  # not a mismatch: asked again later
                self._close_reader()
                self.status.upstream = None
                self._waiting = str(exc)
                return None
        return choice.upstream

    def _switch(self, current: str | None, new: str | None, reason: str | None) -> None:
        self._close_reader()
        if new is None:
            self.status.upstream = None
            return
        if current is not None and reason is not None:
            self.metrics.switches.labels(self.topic.source_topic, reason).inc()
            if reason == "lag":
                self.metrics.lag_exceeded.labels(self.topic.source_topic).inc()
            self.log.warning("switching from upstream %s to %s (%s)", current, new, reason)
        if self._last is not None:
            # Whatever upstream the last record came from (after a restart: unknown), the
            # one read from now must hold it at the same offset.
            self._verify(current or self._last_from, new)
        elif self._next and self.relay.mode != "single":
            self._verify_agreement(new, self._next - 1)
        self._last_from = new
        self.metrics.current_source.labels(self.topic.source_topic, new).set(1)
        if current is not None:
            self.metrics.current_source.labels(self.topic.source_topic, current).set(0)
        self.status.upstream = new

    def _verify(self, previous: str, new: str) -> None:
        """The record relayed last must be at the same offset on ``new``."""
        assert self._last is not None
        ref = self._last
        found = self._record_at(new, ref.offset)
        if found is None and self._gone_at_the_source(new, ref.offset):
            return
        if found is None or not same_record(ref, found):
            what = "does not hold it" if found is None else "holds a different record"
            raise UpstreamMismatchError(
                f"upstreams differ: {self.topic.source_topic} partition {self.partition} "
                f"offset {ref.offset} as relayed from {previous}: {new} {what}; nothing more "
                "is relayed from this partition"
            )
        self.log.info("upstream %s holds offset %d as relayed: identical", new, ref.offset)

    def _verify_agreement(self, new: str, next_offset: int) -> None:
        """Without the last relayed record to compare (the destination holds none of this
        source any more): the newest record ``new`` holds before ``next_offset`` (offsets
        without records, such as transaction markers, are passed over) must be the same,
        by offset, key and value, on every other healthy upstream that holds it. With no
        other upstream to ask, the switch is unverified, and a WARNING says so: waiting
        for one would stop the failover when it is needed most."""
        mine = self._newest_record(new, next_offset)
        if mine is None:
            return
        states = self._states()
        others = [n for n in self.relay.sources if n != new and n in states and states[n].healthy]
        agreeing = []
        for other in others:
            theirs = self._record_at(other, mine.offset)
            if theirs is None:
                continue
            if not same_record(mine, theirs):  # mine has no timestamp: not compared
                raise UpstreamMismatchError(
                    f"upstreams differ: {self.topic.source_topic} partition {self.partition} "
                    f"offset {mine.offset} on {new} and on {other} (the destination no longer "
                    "holds a relayed record to compare with); nothing more is relayed from "
                    "this partition"
                )
            agreeing.append(other)
        if not agreeing:
            self.log.warning(
                "the destination no longer holds a relayed record to compare %s with, and no "
                "other healthy upstream holds offset %d: reading from it unverified",
                new,
                mine.offset,
            )
            return
        self.log.info(
            "no relayed record left in the destination to compare with; %s agrees with %s "
            "at offset %d",
            new,
            ", ".join(agreeing),
            mine.offset,
        )

    def _newest_record(self, upstream: str, next_offset: int) -> RecordRef | None:
        """The newest record ``upstream`` holds below ``next_offset`` (timestamp left out:
        two clusters may stamp their own), None if it holds none."""
        consumer = tail_reader(self._kafka(upstream), f"{self.relay.group_id}-verify")
        try:
            tp = TopicPartition(self.topic.source_topic, self.partition)
            low, _ = watermarks(consumer, tp, f"upstream {upstream} for its log start")
            found = scan_back(
                consumer,
                tp,
                low,
                next_offset,
                lambda m: record_ref(m.offset(), m.key(), m.value(), TIMESTAMP_NONE, 0),
                below_high=True,
                stopping=self._stopping,
            )
        except BrokerError as exc:
            raise UpstreamUnreadableError(
                f"cannot read {self.topic.source_topic} partition {self.partition} on "
                f"{upstream} to compare it: {exc}"
            ) from None
        finally:
            consumer.close()
        return found[1] if found else None

    def _gone_at_the_source(self, upstream: str, last_relayed: int) -> bool:
        """Whether ``upstream`` deleted the last relayed record (retention, DeleteRecords)
        rather than holding another one: then it cannot be compared. Nothing is lost if
        its log starts at or before the next offset (True: relay on); raises
        SourceDataLossError naming the offsets gone if it starts further on. False if the
        record should be there."""
        consumer = tail_reader(self._kafka(upstream), f"{self.relay.group_id}-verify")
        try:
            low, _ = consumer.get_watermark_offsets(
                TopicPartition(self.topic.source_topic, self.partition), timeout=10
            )
        except KafkaException as exc:
            raise UpstreamUnreadableError(
                f"cannot read the log start of {self.topic.source_topic} partition "
                f"{self.partition} on {upstream}: {exc.args[0].str()}"
            ) from None
        finally:
            consumer.close()
        if low <= last_relayed:
            return False
        next_offset = max(last_relayed + 1, self._next or 0)
        if low > next_offset:
            self.metrics.fetch_errors.labels(upstream, "data_loss").inc()
            raise SourceDataLossError(
                f"source data loss: {upstream} no longer holds {self.topic.source_topic} "
                f"partition {self.partition} offsets {next_offset}..{low - 1} (its log "
                f"now starts at {low}); relaying on would skip records"
            )
        self.log.warning(
            "%s no longer holds offset %d, the last one relayed (its log now starts at %d): "
            "nothing to compare it with, and nothing lost; relaying on",
            upstream,
            last_relayed,
            low,
        )
        return True

    def _record_at(self, upstream: str, offset: int) -> RecordRef | None:
        consumer = tail_reader(self._kafka(upstream), f"{self.relay.group_id}-verify")
        try:
            tp = TopicPartition(self.topic.source_topic, self.partition)
            for message in read_range(consumer, tp, offset, offset + 1, self._stopping):
                stamp_type, stamp = message.timestamp()
                return record_ref(
                    message.offset(), message.key(), message.value(), stamp_type, stamp
                )
        except BrokerError as exc:
            raise UpstreamUnreadableError(
                f"cannot read offset {offset} of {self.topic.source_topic} partition "
                f"{self.partition} on {upstream} to compare it: {exc}"
            ) from None
        finally:
            consumer.close()
        return None

    def _last_relayed(self, resume: ResumePoint) -> RecordRef | None:
        """The newest record in the destination that came from this source partition
        (None: there is none), found by its provenance, at or below the destination offset
        the resume point names: that record may be gone (retention, compaction) while
        older ones are there."""
        if resume.next_source_offset is None:
            return None
        consumer = tail_reader(self._kafka(self.relay.destination), f"{self.relay.group_id}-tail")
        ends = watermark_reader(self._kafka(self.relay.destination), f"{self.relay.group_id}-tail")
        try:
            tp = TopicPartition(self.target.destination_topic, self.target.destination_partition)
            low, high = watermarks(ends, tp, "the log end")
            # The record the resume point names first; older ones only if it is gone.
            top = min(high, resume.destination_offset + 1)
            found = scan_back(
                consumer, tp, low, top, self._relayed_ref, below_high=True, stopping=self._stopping
            )
        finally:
            consumer.close()
            ends.close()
        return found[1] if found else None

    def _relayed_ref(self, message: Any) -> RecordRef | None:
        offset = provenance.source_offset(message.headers(), self.target.source)
        if offset is None:
            return None
        # The copy's timestamp need not be the source's (a LogAppendTime destination
        # stamps its own; a source stamp of 0 is replaced by the producer's clock):
        # compared by offset, key and value only.
        return record_ref(offset, message.key(), message.value(), TIMESTAMP_NONE, 0)

    # -- reading --------------------------------------------------------------------------

    def _kafka(self, region: str) -> dict[str, Any]:
        return client_config(self.config.region(region).kafka)

    def _reader_settings(self, upstream: str) -> dict[str, Any]:
        return reader_settings(self._kafka(upstream), self.relay.group_id)

    def _reader_for(self, upstream: str, offset: int) -> PartitionReader:
        """The reader of ``upstream``, at ``offset`` when it is new: records come as Arrow
        batches of the segment schema, no Python object per record (the C range reader
        where it is built), and a read hands over what was fetched without waiting for a
        full batch (``eager``)."""
        if self._reader is None:
            self._reader = open_reader(self._reader_settings(upstream), eager=True)
            self._reader.assign(self.topic.source_topic, self.partition, offset)
        return self._reader

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _lookup_consumer(self, upstream: str) -> Any:
        """A consumer of ``upstream`` to ask for a partition's bounds, read_committed (its
        log end is the last stable offset)."""
        return Consumer(self._reader_settings(upstream))

    def _start_offset(self, upstream: str, start_from: str) -> int:
        """The log start, or the last stable offset (the read_committed reader's end: a
        transaction open now is relayed once it commits)."""
        consumer = self._lookup_consumer(upstream)
        tp = TopicPartition(self.topic.source_topic, self.partition)
        what = f"upstream {upstream} for the log start and end"
        try:
            low, high = watermarks(consumer, tp, what, timeout=10)
        finally:
            consumer.close()
        return low if start_from == "earliest" else high

    def _read(self, upstream: str, next_offset: int) -> tuple[pa.RecordBatch | None, int | None]:
        """Records from ``next_offset`` on (up to ``stop_at``), and the log end if the read
        reached it."""
        reader = self._reader_for(upstream, next_offset)
        wanted = READ_BATCH
        if self.stop_at is not None:
            wanted = max(1, min(wanted, self.stop_at - next_offset))
        end = NO_END if self.stop_at is None else self.stop_at
        chunk = reader.read(wanted, POLL_SECONDS, next_offset, end)
        records = from_offset(chunk.records, next_offset)
        end_seen = self.stop_at if chunk.done else None
        if chunk.error is not None:
            end_seen = self._read_error(upstream, reader, chunk, next_offset)
        return records, end_seen

    def _read_error(
        self, upstream: str, reader: PartitionReader, chunk: ReadChunk, next_offset: int
    ) -> int | None:
        """What the error a read stopped before means: the log end (None if it is not one),
        a halt, a loss, or a warning once per kind of trouble."""
        assert chunk.error is not None
        code = chunk.error.code()
        if code == KafkaError._PARTITION_EOF:
            if self.stop_at is not None:
                return min(chunk.error_offset, self.stop_at)
            return chunk.error_offset
        if code == BAD_RECORD:  # raised once the records read before it are committed
            self._unrelayable = UnrelayableRecordError(
                f"{self.topic.source_topic} partition {self.partition} offset "
                f"{chunk.error_offset} on {upstream} cannot be relayed: "
                f"{chunk.error.str()}; nothing more is relayed from this partition"
            )
            return None
        if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            self._refuse_if_behind(upstream, reader, next_offset)
            self.metrics.fetch_errors.labels(upstream, "data_loss").inc()
            raise SourceDataLossError(
                f"source data loss: {upstream} no longer holds {self.topic.source_topic} "
                f"partition {self.partition} "
                f"{self._lost_range(reader, next_offset)} ({chunk.error.str()}); relaying "
                "on would skip records"
            )
        kind = "timeout" if code == KafkaError._TIMED_OUT else "transport"
        self.metrics.fetch_errors.labels(upstream, kind).inc()
        if chunk.error.str() != self._fetch_problem:  # once per kind of trouble
            self.log.warning("reading from %s: %s", upstream, chunk.error.str())
        self._fetch_problem = chunk.error.str()
        return None

    def _refuse_if_behind(self, upstream: str, reader: PartitionReader, next_offset: int) -> None:
        """An offset out of range because ``upstream``'s log ends before ``next_offset``
        (it lags: another took over, or a restart chose it on an older end) is no loss:
        UpstreamUnreadableError, and the partition chooses again."""
        try:
            low, high = reader.watermarks(self.topic.source_topic, self.partition, 10)
        except BrokerError as exc:  # not known to be a loss: asked again
            raise UpstreamUnreadableError(
                f"{upstream} answered offset {next_offset} of {self.topic.source_topic} "
                f"partition {self.partition} out of range, and its log start and end could "
                f"not be read ({exc})"
            ) from None
        if low <= next_offset and high < next_offset:
            raise UpstreamUnreadableError(
                f"{upstream} does not hold {self.topic.source_topic} partition "
                f"{self.partition} offset {next_offset} yet (its log ends at {high})"
            )

    def _lost_range(self, reader: PartitionReader, next_offset: int) -> str:
        """The offsets gone before they were relayed (inclusive), as far as the upstream's
        log start says: ``offsets 100..149 (its log now starts at 150)``."""
        try:
            low, _ = reader.watermarks(self.topic.source_topic, self.partition, 10)
        except BrokerError:
            return f"offset {next_offset} (its log start could not be read)"
        if low > next_offset:
            return f"offsets {next_offset}..{low - 1} (its log now starts at {low})"
        return f"offset {next_offset}"

    def _report_lag(self, upstream: str, next_offset: int) -> None:
        state = self._states().get(upstream)
        end = state.log_ends.get(self._tp) if state else None
        if end is not None:
            self.metrics.lag_records.labels(*self._labels).set(max(0, end - next_offset))


def from_offset(records: pa.RecordBatch | None, next_offset: int) -> pa.RecordBatch | None:
    """The records at ``next_offset`` or after (None if none is): a reader assigned at an
    earlier offset hands out what lies before it too. Pure."""
    if records is None or records.column("offset")[0].as_py() >= next_offset:
        return records
    kept = records.filter(pc.greater_equal(records.column("offset"), next_offset))
    return kept if kept.num_rows else None


def key_and_value_bytes(records: pa.Table) -> int:
    """The bytes of the records' keys and values (the ``bytes`` metric), from their offsets
    buffers: a compute kernel per column cost a small read more than its records. Pure."""
    total = 0
    for name in ("key", "value"):
        for chunk in records.column(name).chunks:
            if len(chunk):  # the int32 offsets of the chunk's slice; a null spans nothing
                offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)
                total += int(offsets[chunk.offset + len(chunk)] - offsets[chunk.offset])
    return total
