"""Kafka as a PySpark streaming data source, read by librdkafka (no JVM connector).

Planning (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``) runs in one
long-lived Python process on the driver, so the :class:`egress.planner.Planner` keeps its
state there across calls. ``read`` runs in executor processes with only the pickled
config: clients are opened inside it, and it writes the segments of the ranges it reads
itself (:func:`egress.segment_sink.write_range`), handing Spark one small row per segment
(:mod:`egress.segment_rows`) rather than every record: a record's bytes go from the
consumer to Parquet in one process, never through the JVM and back.

Offsets: ``{"offsets": {topic: {partition: next_offset}}, "skipped": {...}}``. ``skipped``
lists, for the batch that ends at these offsets, partitions whose range was jumped over
because its records are gone (``on_data_loss = "skip"``): no task reads them from Kafka,
and the range is written as a segment without records, so that ingress sees the lost
offsets covered instead of waiting for them and halting the partition.

Ordering: a task writes its ranges one after the other, each range's segments in offset
order, and yields a range's rows only once all its segments are uploaded; the driver's
commit (group offsets, statistics) runs only after every task of the batch succeeded.

Reading: a range's records come as Arrow batches from
:func:`replicator.core.kafka.arrow_reads.open_reader` (the C reader ``make setup`` builds,
with no Python object per record); this module keeps the rules of a range (its end, the
end-of-partition event, losses, retries, stalls).

Imports: Spark starts a Python worker per worker module (looking the source up, planning,
the streaming runner, reads) and each unpickles this module's classes; only ``read``
writes to S3, so the S3 client stack (boto3, 0.12 s of each worker's import) is imported
where a range is exported, not here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from confluent_kafka import KafkaError
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from egress.errors import DataLossError
from egress.planning import (
    OffsetRange,
    Offsets,
    assign_tasks,
    decode_offsets,
    encode_offsets,
)
from egress.segment_rows import SPARK_SCHEMA_DDL, WrittenRange, segment_rows
from egress.segment_sink import LostOffsets, write_range
from egress.spark_options import CONFIG_OPTION, TASKS_OPTION, config_from_options
from replicator.core.collector import settle_worker_heap, tune_collector
from replicator.core.config import Config, required
from replicator.core.kafka import provenance
from replicator.core.kafka.arrow_reads import BAD_RECORD, PartitionReader, open_reader
from replicator.core.kafka.clients import BULK_READER, client_config
from replicator.core.kafka.errors import BrokerError
from replicator.core.logs import configure_worker_logging, partition_fields

if TYPE_CHECKING:
    from egress.planner import Planner

log = logging.getLogger(__name__)

SOURCE_NAME = "replicator_kafka"
READ_BATCH = 10_000
LOSS_CHECK_AFTER = 10.0
"""Seconds without progress inside a range before the log's bounds are checked."""
STALL_TIMEOUT = 120.0
"""A read that makes no progress for this long fails its task (and Spark retries it)."""


@dataclass(frozen=True)
class KafkaTask(InputPartition):
    """The ranges one Spark task reads, one after the other (see ``assign_tasks``)."""

    ranges: tuple[OffsetRange, ...]


def encode(offsets: Offsets, skipped: Offsets | None = None) -> dict[str, Any]:
    return {"offsets": encode_offsets(offsets), "skipped": encode_offsets(skipped or {})}


def decode(data: dict[str, Any]) -> tuple[Offsets, Offsets]:
    return decode_offsets(data.get("offsets", {})), decode_offsets(data.get("skipped", {}))


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Holds only the config: it is pickled to executors for :meth:`read`."""

    def __init__(self, options: dict[str, str]) -> None:
        self._options = {CONFIG_OPTION: options[CONFIG_OPTION]}
        self._tasks = int(options.get(TASKS_OPTION, "1"))
        self._planner: Planner | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_options": self._options, "_tasks": self._tasks, "_planner": None}

    def _plan(self) -> Planner:
        if self._planner is None:
            # Imported here: only the planning process needs it (and the segment
            # catalog it reads), not the Python workers that read ranges (0.6 s each).
            from egress.planner import Planner

            self._planner = Planner(config_from_options(self._options))
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        planner = self._plan()
        tps = planner.catalog.partitions()
        return encode(planner.starting_offsets(tps, planner.egress.start_from))

    def prepareForTriggerAvailableNow(self) -> None:
        planner = self._plan()
        tps = planner.catalog.partitions()
        planner.target = {tp: high for tp, (_, high) in planner.catalog.watermarks(tps).items()}
        log.info("stop-at-end: exporting up to %s", encode_offsets(planner.target))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        offsets, _ = decode(start)
        end, skipped = self._plan().plan(offsets, time.monotonic())
        return encode(end, skipped)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[KafkaTask]:
        begin, _ = decode(start)
        finish, skipped = decode(end)
        generations = self._plan().generations
        ranges = []
        for tp in sorted(finish):
            first = begin.get(tp, finish[tp])
            if finish[tp] > first:
                ranges.append(
                    OffsetRange(
                        tp[0],
                        tp[1],
                        first,
                        finish[tp],
                        lost=tp in skipped,
                        topic_id=generations.topic_id(tp[0]),
                    )
                )
        groups = assign_tasks([r.end - r.start for r in ranges], self._tasks)
        return [KafkaTask(tuple(ranges[i] for i in group)) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaTask)
        configure_worker_logging()
        settle_worker_heap()
        tune_collector()  # this Python worker builds a few objects per record
        config = config_from_options(self._options)
        for written in export_ranges(config, partition.ranges):
            yield segment_rows(written)


def export_ranges(config: Config, ranges: Iterable[OffsetRange]) -> Iterator[WrittenRange]:
    """Read each planned range and write the segments covering it, one range after the
    other; yields each range once its segments are all uploaded."""
    from replicator.core.segments.store import SegmentStore  # see the module docstring

    store = SegmentStore.for_region(config, required(config, "egress").region)
    for rng in ranges:
        yield write_range(config, store, rng, read_range(config, rng))


def read_range(config: Config, rng: OffsetRange) -> Iterator[pa.RecordBatch | LostOffsets]:
    """Every record with an offset in [start, end), in order, as batches of the segment
    schema, with the losses met (``on_data_loss = "skip"``) between them.

    Deterministic: a replay reads the same records. Offsets holding no record (compaction,
    transaction markers) are passed over; the read ends at the first offset >= end or when
    the consumer reaches the log end at or beyond ``end``. With ``skip_replicated``,
    records another replicator wrote (they carry provenance) are passed over the same way.
    """
    egress = required(config, "egress")
    if rng.lost:
        log.warning("writing the lost %s as a segment without records", rng)
        yield LostOffsets(rng.start, rng.end)
        return
    reader = open_reader(
        BULK_READER
        | client_config(
            config.region(egress.region).kafka,
            group_id=egress.group_id,
            enable_auto_commit=False,
            enable_auto_offset_store=False,
            enable_partition_eof=True,
            auto_offset_reset="error",
            isolation_level=egress.isolation_level,
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
        ),
        skip_header=provenance.HEADER if egress.skip_replicated else None,
    )
    try:
        reader.assign(rng.topic, rng.partition, rng.start)
        position = rng.start
        last_progress = time.monotonic()
        pending_loss: tuple[int, int] | None = None
        """A loss found while reading, announced after the records before it."""
        while position < rng.end:
            if pending_loss is not None:
                yield LostOffsets(*pending_loss)
                pending_loss = None
            before = position
            # Never ask for more than the range still holds: a read waits out its timeout
            # until it has that many records, which would cost every small range 1 s.
            chunk = reader.read(min(READ_BATCH, rng.end - position), 1.0, position, rng.end)
            position = chunk.position
            if chunk.error is not None:
                try:
                    position = _handle_read_error(chunk.error, chunk.error_offset, rng, position)
                except DataLossError as exc:
                    position, pending_loss = _skip_or_raise(reader, egress, rng, position, exc)
            if position > before:
                last_progress = time.monotonic()
            if chunk.records is not None:
                yield chunk.records
            elif time.monotonic() - last_progress > LOSS_CHECK_AFTER and position < rng.end:
                # Brokers that do not answer a fetch beyond the log end with
                # OFFSET_OUT_OF_RANGE (the local one does not) leave a truncated log
                # looking like a quiet one: compare with the log's bounds.
                try:
                    _check_bounds(reader, rng, position)
                except DataLossError as exc:
                    position, pending_loss = _skip_or_raise(reader, egress, rng, position, exc)
                    last_progress = time.monotonic()
                    continue
            if chunk.records is None and time.monotonic() - last_progress > STALL_TIMEOUT:
                raise BrokerError(
                    f"reading {rng.topic} partition {rng.partition}: no progress at offset "
                    f"{position} for {STALL_TIMEOUT:.0f}s (planned {rng})"
                )
        if pending_loss is not None:
            yield LostOffsets(*pending_loss)
    finally:
        reader.close()


def _check_bounds(reader: PartitionReader, rng: OffsetRange, position: int) -> None:
    """Raise :class:`DataLossError` if ``position`` is outside the partition's log.

    A log whose bounds cannot be read now (its broker restarting: "Unknown partition",
    no leader) is asked again at the next read without progress: only the stall timeout
    ends a read that never learns them."""
    try:
        log_start, log_end = reader.watermarks(rng.topic, rng.partition, 30)
    except BrokerError as exc:
        log.warning(
            "cannot compare offset %d of %s partition %d with the log's bounds now (%s); "
            "asking again",
            position,
            rng.topic,
            rng.partition,
            exc,
        )
        return
    if position < log_start or position >= log_end:
        raise DataLossError(
            rng.topic,
            rng.partition,
            position,
            rng.last,
            f"data loss: {rng.topic} partition {rng.partition} no longer holds offset "
            f"{position} (planned {rng}; the log now spans {log_start}..{log_end - 1})",
        )


def resume_after_loss(rng: OffsetRange, position: int, log_start: int, log_end: int) -> int:
    """Where reading a planned range goes on when ``position`` is gone from the log:
    the log start when retention removed the range's beginning, else the range end (the
    log was truncated below it). Pure."""
    if position < log_start:
        return min(log_start, rng.end)
    return rng.end


def _skip_or_raise(
    reader: PartitionReader, egress: Any, rng: OffsetRange, position: int, loss: DataLossError
) -> tuple[int, tuple[int, int] | None]:
    """Where reading goes on after ``loss`` at ``position`` and the lost offsets [position,
    resume) to announce, when ``on_data_loss = "skip"``; else the loss is raised. When the
    log's bounds cannot be read now, nothing is skipped: the partition is read again from
    ``position``, and the loss, if it is one, is met again."""
    if egress.on_data_loss != "skip":
        raise loss
    try:
        resume = _skip_loss(reader, egress.region, rng, position, loss)
    except BrokerError as exc:
        log.warning(
            "cannot read the log's bounds of %s partition %d now (%s); reading again from "
            "offset %d before skipping anything",
            rng.topic,
            rng.partition,
            exc,
            position,
        )
        reader.assign(rng.topic, rng.partition, position)
        return position, None
    return resume, (position, resume)


def _skip_loss(
    reader: PartitionReader, region: str, rng: OffsetRange, position: int, loss: DataLossError
) -> int:
    """``on_data_loss = "skip"``: the planned range lost records between planning and
    reading. Go on from what the log still holds (the segment covers the lost offsets
    without records), so the batch completes instead of failing on every replay."""
    log_start, log_end = reader.watermarks(rng.topic, rng.partition, 30)
    resume = resume_after_loss(rng, position, log_start, log_end)
    log.error(
        "DATA LOSS while reading %s: offsets %d..%d are gone (%s); on_data_loss=skip: "
        "they are covered without records",
        rng,
        position,
        resume - 1,
        loss,
        extra=partition_fields(region, rng.topic, rng.partition, start=position, end=resume - 1),
    )
    if resume < rng.end:
        reader.assign(rng.topic, rng.partition, resume)
    return resume


def _handle_read_error(error: Any, error_offset: int, rng: OffsetRange, position: int) -> int:
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        # The offset of an end-of-partition event is the log end: offsets below it that
        # came without a record hold none (markers, compacted away).
        return max(position, error_offset)
    if code == BAD_RECORD:
        raise BrokerError(
            f"reading {rng.topic} partition {rng.partition}: the record at offset "
            f"{error_offset} cannot be archived: {error.str()} (planned {rng})"
        )
    if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
        raise DataLossError(
            rng.topic,
            rng.partition,
            position,
            rng.last,
            f"data loss: {rng.topic} partition {rng.partition} no longer holds offset "
            f"{position} (planned {rng}): {error.str()}",
        )
    if error.retriable() or code == KafkaError._TRANSPORT:
        log.warning(
            "retrying read of %s partition %d at offset %d: %s",
            rng.topic,
            rng.partition,
            position,
            error.str(),
            extra={"topic": rng.topic, "partition": rng.partition, "offset": position},
        )
        return position
    raise BrokerError.from_kafka(f"reading {rng.topic} partition {rng.partition}", error)


class KafkaSource(DataSource):
    """``spark.readStream.format("replicator_kafka").option(CONFIG_OPTION, ...)``"""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SPARK_SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        settle_worker_heap()  # a worker that plans each batch's read
        return KafkaStreamReader(dict(self.options))
