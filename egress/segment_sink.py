"""Level-0 segments: the writing of a planned range, and the PySpark streaming sink whose
commit makes a micro-batch's segments count.

The Spark task that reads a planned range writes the segment(s) that cover it exactly
(:func:`write_range`, called by the data source's ``read`` in the same Python worker):
one segment per range, or several when the range's record bytes reach
``max_segment_bytes`` part-way. Split points depend only on the records, so a replayed
batch writes the same keys with the same records and no two segments of a partition ever
overlap. Records never cross into Spark: the sink's task receives one row per segment
written (:mod:`egress.segment_rows`) and returns them as its commit message.

``commit`` runs on the driver once every task of a batch succeeded: it commits the egress
consumer group's offsets (here, next to the segments they follow) and updates the driver's
statistics (keyed by batch id, so a
replayed commit counts nothing twice).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaException, TopicPartition
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from egress.driver_state import DriverState, PartitionStats
from egress.planning import OffsetRange, Offsets
from egress.segment_rows import WrittenRange, WrittenSegment, written_ranges
from egress.spark_options import CONFIG_OPTION, config_from_options
from replicator.core.collector import settle_worker_heap
from replicator.core.config import Config, required
from replicator.core.faults import (
    EGRESS_AFTER_GROUP_COMMIT_BEFORE_SPARK_COMMIT,
    EGRESS_AFTER_UPLOAD_BEFORE_COMMITS,
    crash_point,
)
from replicator.core.kafka.clients import client_config
from replicator.core.logs import configure_worker_logging
from replicator.core.segments.key import SegmentKey

if TYPE_CHECKING:  # the S3 client stack is imported by the workers that write
    from replicator.core.segments.store import SegmentStore, SpooledSegment

log = logging.getLogger(__name__)

SINK_NAME = "replicator_segments"


@dataclass(frozen=True)
class LostOffsets:
    """Offsets [start, end) of the range being read were gone from the source log
    (``on_data_loss = "skip"``): the segment covering them records the loss in its
    footer."""

    start: int
    end: int


@dataclass
class SegmentsWritten(WriterCommitMessage):
    ranges: list[WrittenRange]


def split_points(sizes: np.ndarray, already: int, max_bytes: int) -> list[int]:
    """Indexes (exclusive) after which a segment closes, for records of ``sizes`` bytes
    appended to a segment already holding ``already`` bytes.

    A segment closes with the record that makes it reach ``max_bytes``; a record larger
    than ``max_bytes`` gets a segment of its own.
    """
    cuts = []
    position = 0
    total = already
    cumulative = np.cumsum(sizes, dtype=np.int64)
    base = 0
    while position < len(sizes):
        need = max_bytes - total
        index = int(np.searchsorted(cumulative, base + need, side="left"))
        if index >= len(sizes):
            break
        cuts.append(index + 1)
        position = index + 1
        base = int(cumulative[index])
        total = 0
    return cuts


class RangeWriter:
    """Writes the segments covering one planned range, in order, with no gap."""

    def __init__(
        self, store: SegmentStore, region: str, planned: OffsetRange, max_bytes: int
    ) -> None:
        self._store = store
        self._region = region
        self.written = WrittenRange(planned)
        self._max_bytes = max_bytes
        self._next_start = planned.start
        """First offset the next segment covers."""
        self._open: SpooledSegment | None = None
        self._bytes = 0
        self._loss_pending = planned.lost
        """Offsets lost at the source lie in what the next segment to close covers."""

    def mark_loss(self) -> None:
        """Offsets from the next one to write were gone from the source log: the segment
        that covers them says so in its footer."""
        self._loss_pending = True

    def _segment(self) -> SpooledSegment:
        if self._open is None:
            planned = self.written.planned
            # The segment may end before planned.last: the spool chooses its end at close.
            key = SegmentKey(
                self._region, planned.topic, planned.partition, 0, self._next_start, planned.last
            )
            self._open = self._store.spooled(key, topic_id=planned.topic_id)
            self._bytes = 0
        return self._open

    def add(self, batch: pa.RecordBatch) -> None:
        sizes = record_bytes(batch)
        position = 0
        for cut in split_points(sizes, self._bytes, self._max_bytes):
            self._segment().write(batch.slice(position, cut - position))
            self._bytes += int(sizes[position:cut].sum())
            self._close(int(batch.column(0)[cut - 1].as_py()))
            position = cut
        if position < len(sizes):
            self._segment().write(batch.slice(position))
            self._bytes += int(sizes[position:].sum())

    def _close(self, last: int) -> None:
        """Close the open segment covering up to offset ``last`` (inclusive)."""
        segment = self._segment()
        records = segment.writer.record_count
        segment.writer.source_data_loss, self._loss_pending = self._loss_pending, False
        stored, _ = segment.close(last)
        self.written.segments.append(
            WrittenSegment(stored.segment_key, records, self._bytes, stored.size)
        )
        self._open = None
        self._bytes = 0  # a batch may end exactly here: the next one starts a new count
        self._next_start = last + 1

    def finish(self) -> WrittenRange:
        """Close the last segment at the range end (it may hold no record: the offsets left
        are markers or compacted away, and the range must still be covered)."""
        if self._open is not None or self._next_start < self.written.planned.end:
            self._close(self.written.planned.last)
        return self.written

    def abort(self) -> None:
        if self._open is not None:
            self._open.abort()


def write_range(
    config: Config,
    store: SegmentStore,
    planned: OffsetRange,
    read: Iterable[pa.RecordBatch | LostOffsets],
) -> WrittenRange:
    """Write the segments covering ``planned`` from what reading it gave, in order: record
    batches of the segment schema and the losses met between them."""
    egress = required(config, "egress")
    limits = egress.thresholds(planned.topic)
    writer = RangeWriter(store, egress.region, planned, limits.max_segment_bytes)
    try:
        for item in read:
            if isinstance(item, LostOffsets):
                writer.mark_loss()
            elif item.num_rows:
                writer.add(item)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def record_bytes(batch: pa.RecordBatch) -> np.ndarray:
    """Bytes of each record as egress counts them: key + value + header keys and values."""
    size = _lengths(batch.column("key")) + _lengths(batch.column("value"))
    headers = batch.column("headers")
    if len(headers.values):
        structs = headers.flatten()
        per_header = _lengths(structs.field("key")) + _lengths(structs.field("value"))
        ends = np.cumsum(per_header)
        offsets = headers.offsets.to_numpy()
        start = offsets[:-1] - offsets[0]
        stop = offsets[1:] - offsets[0]
        padded = np.concatenate([[0], ends])
        size = size + (padded[stop] - padded[start])
    return size


def _lengths(array: pa.Array) -> np.ndarray:
    return pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def commit_group_offsets(config: Config, offsets: Offsets) -> None:
    """Commit the egress consumer group's offsets so that standard lag tools see progress.

    Called once a batch's segments are durable. A failure is logged, not raised: progress
    is safe in Spark's checkpoint and the bucket, and the next batch commits again.
    """
    if not offsets:
        return
    egress = required(config, "egress")
    consumer = Consumer(client_config(config.region(egress.region).kafka, group_id=egress.group_id))
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
            asynchronous=False,
        )
    except KafkaException as exc:
        log.warning(
            "could not commit egress offsets to group %s: %s", egress.group_id, exc.args[0].str()
        )
    finally:
        consumer.close()


class SegmentStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: dict[str, str]) -> None:
        self._options = {CONFIG_OPTION: options[CONFIG_OPTION]}

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SegmentsWritten:
        """The segments this task's ranges were written as (by the same task's read)."""
        configure_worker_logging()
        settle_worker_heap()
        region = required(config_from_options(self._options), "egress").region
        return SegmentsWritten(written_ranges(region, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task succeeded: the batch's segments are durable. Commit the group's
        offsets, then count the batch. Both are idempotent for a replayed batch."""
        settle_worker_heap()  # the worker that commits each batch
        config = config_from_options(self._options)
        ends = {
            (r.planned.topic, r.planned.partition): r.planned.end
            for m in messages
            if isinstance(m, SegmentsWritten)
            for r in m.ranges
        }
        crash_point(EGRESS_AFTER_UPLOAD_BEFORE_COMMITS)
        commit_group_offsets(config, ends)
        crash_point(EGRESS_AFTER_GROUP_COMMIT_BEFORE_SPARK_COMMIT)
        record_batch(DriverState(required(config, "egress").state_dir), messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Segments already written stay: the replay of this batch rewrites the same keys.
        log.warning("egress batch %d aborted; it will be replayed", batchId)


def record_batch(
    state: DriverState, messages: list[WriterCommitMessage | None], batch_id: int
) -> None:
    """Add a committed batch to the driver's statistics, once per batch id."""
    last, stats = state.read_partitions()
    if batch_id <= last:
        return
    segments = records = 0
    for message in messages:
        if not isinstance(message, SegmentsWritten):
            continue
        for written in message.ranges:
            planned = written.planned
            entry = stats.setdefault((planned.topic, planned.partition), PartitionStats())
            entry.offsets += planned.count
            entry.next_offset = max(entry.next_offset, planned.end)
            for segment in written.segments:
                entry.records += segment.records
                entry.bytes += segment.record_bytes
                entry.segments += 1
                segments += 1
                records += segment.records
    state.write_partitions(batch_id, stats)
    if segments:
        log.info("egress batch %d: %d segments, %d records", batch_id, segments, records)


class SegmentSink(DataSource):
    """``df.writeStream.format("replicator_segments").option(CONFIG_OPTION, ...)``"""

    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        settle_worker_heap()  # a worker that makes each batch's writer
        return SegmentStreamWriter(dict(self.options))
