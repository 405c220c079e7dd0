"""Kafka as a PySpark streaming data source, over confluent-kafka (no JVM connector).

Planning (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``) runs in one
long-lived Python process on the driver, so the :class:`Planner` keeps state there across
calls: when each offset was first seen (for ``max_segment_age``), the fixed end of an
``--stop-at-end`` run, which data-loss events were already reported. ``read`` runs in
executor processes with only the pickled config: clients are opened inside it.

Offsets: ``{"offsets": {topic: {partition: next_offset}}, "skipped": {...}}``. ``skipped``
lists, for the batch that ends at these offsets, partitions whose range was jumped over
because its records are gone (``on_data_loss = "skip"``): no task reads them.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from egress.driver_state import DriverState
from egress.errors import DataLossError
from egress.planning import (
    Limits,
    Offsets,
    PendingClock,
    PositionProblem,
    TopicPartitionKey,
    assign_tasks,
    check_position,
    decode_offsets,
    encode_offsets,
    plan_end,
)
from egress.record_arrow import SPARK_SCHEMA_DDL, messages_to_rows, range_row
from egress.spark_options import CONFIG_OPTION, TASKS_OPTION, config_from_options
from replicator.core.config import Config, EgressConfig, required
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.errors import BrokerError
from replicator.core.logs import partition_fields
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)

SOURCE_NAME = "replicator_kafka"
READ_BATCH = 10_000
STALL_TIMEOUT = 120.0
"""A read that makes no progress for this long fails its task (and Spark retries it)."""


@dataclass(frozen=True)
class KafkaRange:
    """Offsets [start, end) of one partition: one planned segment range."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class KafkaTask(InputPartition):
    """The ranges one Spark task reads, one after the other (see ``assign_tasks``)."""

    ranges: tuple[KafkaRange, ...]


def limits_for(egress: EgressConfig, topic: str) -> Limits:
    t = egress.thresholds(topic)
    return Limits(t.max_segment_messages, t.max_segment_bytes, t.max_segment_age)


def encode(offsets: Offsets, skipped: Offsets | None = None) -> dict[str, Any]:
    return {"offsets": encode_offsets(offsets), "skipped": encode_offsets(skipped or {})}


def decode(data: dict[str, Any]) -> tuple[Offsets, Offsets]:
    return decode_offsets(data.get("offsets", {})), decode_offsets(data.get("skipped", {}))


class Planner:
    """Driver-side planning state and Kafka/S3 look-ups. Lives in Spark's planner process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self.kafka = config.region(self.egress.region).kafka
        self.admin = AdminClient(client_config(self.kafka))
        self.isolation = (
            IsolationLevel.READ_COMMITTED
            if self.egress.isolation_level == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        self.state = DriverState(self.egress.state_dir)
        self.clocks: dict[TopicPartitionKey, PendingClock] = {}
        self.target: Offsets | None = None
        self.reported: set[tuple[TopicPartitionKey, int]] = set()
        self._pattern = re.compile(self.egress.topic_pattern) if self.egress.topic_pattern else None

    # -- look-ups -------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartitionKey]:
        """Every exported partition: the configured topics (which must exist) and the
        topics matching ``topic_pattern``."""
        try:
            metadata = self.admin.list_topics(timeout=30)
        except KafkaException as exc:
            raise BrokerError.from_kafka(
                f"cannot reach Kafka of region {self.egress.region} at "
                f"{self.kafka.bootstrap_servers}",
                exc.args[0],
            ) from None
        found = {name: t for name, t in metadata.topics.items() if t.error is None}
        missing = sorted(set(self.egress.topics) - set(found))
        if missing:
            raise BrokerError(
                f"topics {', '.join(missing)} do not exist in region {self.egress.region} "
                f"({self.kafka.bootstrap_servers})"
            )
        names = set(self.egress.topics)
        if self._pattern is not None:
            names |= {n for n in found if not n.startswith("__") and self._pattern.fullmatch(n)}
        return sorted((n, p) for n in names for p in found[n].partitions)

    def watermarks(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(log start, log end) per partition; the end is the last stable offset when
        reading committed records."""
        if not tps:
            return {}
        requests = {}
        for topic, partition in tps:
            requests[TopicPartition(topic, partition, 0)] = OffsetSpec.earliest()
        lows = self._list_offsets(requests)
        requests = {TopicPartition(t, p, 0): OffsetSpec.latest() for t, p in tps}
        highs = self._list_offsets(requests)
        return {tp: (lows[tp], highs[tp]) for tp in tps}

    def _list_offsets(self, requests: dict[TopicPartition, Any]) -> dict[TopicPartitionKey, int]:
        futures = self.admin.list_offsets(
            requests, isolation_level=self.isolation, request_timeout=30
        )
        result = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                raise BrokerError.from_kafka(
                    f"cannot read offsets of {tp.topic} partition {tp.partition} in region "
                    f"{self.egress.region}",
                    exc.args[0],
                ) from None
        return result

    def committed(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """The egress consumer group's committed offsets (absent where none)."""
        consumer = Consumer(client_config(self.kafka, group_id=self.egress.group_id))
        try:
            found = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
        finally:
            consumer.close()
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}

    def exported(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Per partition, the offset after the highest segment in the bucket (any level)."""
        store = SegmentStore.for_region(self.config, self.egress.region)
        result = {}
        for topic, partition in tps:
            end = store.exported_end(self.egress.region, topic, partition)
            if end is not None:
                result[(topic, partition)] = end
        return result

    def starting_offsets(
        self, tps: list[TopicPartitionKey], start_from: str
    ) -> dict[TopicPartitionKey, int]:
        """Where partitions unknown to Spark's checkpoint start.

        The furthest of the group's committed offset and the end of the segments already in
        the bucket: after a lost checkpoint nothing is exported twice (no overlapping
        segments) and nothing is skipped. Otherwise the log start or end (``start_from``).
        """
        committed = self.committed(tps)
        exported = self.exported(tps)
        marks = self.watermarks(tps)
        result = {}
        for tp in tps:
            known = [o for o in (committed.get(tp), exported.get(tp)) if o is not None]
            if known:
                result[tp] = max(known)
            else:
                low, high = marks[tp]
                result[tp] = low if start_from == "earliest" else high
            log.info(
                "egress of %s partition %d starts at offset %d (committed %s, exported up to %s)",
                tp[0],
                tp[1],
                result[tp],
                committed.get(tp),
                exported.get(tp),
                extra=partition_fields(self.egress.region, tp[0], tp[1], offset=result[tp]),
            )
        return result

    # -- planning -------------------------------------------------------------------------

    def plan(self, start: Offsets, now: float) -> tuple[Offsets, Offsets]:
        """The end offsets of the next batch, and the ranges it skips over."""
        tps = self.partitions()
        new = [tp for tp in tps if tp not in start]
        end: Offsets = dict(start)
        if new:
            # A partition or topic that appeared while running holds only new data.
            end.update(self.starting_offsets(new, "earliest"))
        known = [tp for tp in tps if tp in start]
        marks = self.watermarks(known)
        _, stats = self.state.read_partitions()
        skipped: Offsets = {}
        for tp in known:
            next_offset = start[tp]
            low, high = marks[tp]
            problem = check_position(tp[0], tp[1], next_offset, low, high)
            if problem is not None:
                self._report(problem)
                if problem.resume_at != next_offset:
                    skipped[tp] = next_offset
                    end[tp] = problem.resume_at
                continue
            if self.target is not None:
                high = min(high, self.target.get(tp, next_offset))
            clock = self.clocks.setdefault(tp, PendingClock())
            clock.observe(now, high)
            seen = clock.first_seen(next_offset)
            partition_stats = stats.get(tp)
            end[tp] = plan_end(
                next_offset,
                high,
                limits_for(self.egress, tp[0]),
                waited=None if seen is None else now - seen,
                bytes_per_offset=partition_stats.bytes_per_offset if partition_stats else None,
                drain=self.target is not None,
                lookahead=self.egress.trigger_interval,
            )
            clock.forget_before(end[tp])
        return end, skipped

    def _report(self, problem: PositionProblem) -> None:
        key = ((problem.topic, problem.partition), problem.next_offset)
        if key in self.reported:
            return
        self.reported.add(key)
        action = "stop" if self.egress.on_data_loss == "fail" else "skip"
        log.error(
            "DATA LOSS in region %s: %s (on_data_loss=%s)",
            self.egress.region,
            problem.describe(),
            self.egress.on_data_loss,
            extra=partition_fields(
                self.egress.region,
                problem.topic,
                problem.partition,
                start=problem.lost_first,
                end=problem.lost_last,
            ),
        )
        self.state.record_data_loss(
            {
                "topic": problem.topic,
                "partition": problem.partition,
                "first": problem.lost_first,
                "last": problem.lost_last,
                "reason": problem.reason,
                "action": action,
            }
        )
        if action == "stop":
            raise DataLossError(
                problem.topic,
                problem.partition,
                problem.lost_first,
                problem.lost_last,
                f'data loss: {problem.describe()}; set [egress] on_data_loss = "skip" to '
                "continue without them",
            )


def commit_offsets(config: Config, offsets: Offsets) -> None:
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
            self._planner = Planner(config_from_options(self._options))
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        planner = self._plan()
        tps = planner.partitions()
        return encode(planner.starting_offsets(tps, planner.egress.start_from))

    def prepareForTriggerAvailableNow(self) -> None:
        planner = self._plan()
        tps = planner.partitions()
        planner.target = {tp: high for tp, (_, high) in planner.watermarks(tps).items()}
        log.info("stop-at-end: exporting up to %s", encode_offsets(planner.target))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        offsets, _ = decode(start)
        end, skipped = self._plan().plan(offsets, time.monotonic())
        return encode(end, skipped)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[KafkaTask]:
        begin, _ = decode(start)
        finish, skipped = decode(end)
        ranges = []
        for tp in sorted(finish):
            if tp in skipped:
                continue
            first = begin.get(tp, finish[tp])
            if finish[tp] > first:
                ranges.append(KafkaRange(tp[0], tp[1], first, finish[tp]))
        groups = assign_tasks([r.end - r.start for r in ranges], self._tasks)
        return [KafkaTask(tuple(ranges[i] for i in group)) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaTask)
        config = config_from_options(self._options)
        for rng in partition.ranges:
            yield from read_range(config, rng)


def read_range(config: Config, rng: KafkaRange) -> Iterator[pa.RecordBatch]:
    """The range row, then every record with an offset in [start, end), in order.

    Deterministic: a replay reads the same records. Offsets holding no record (compaction,
    transaction markers) are passed over; the read ends at the first offset >= end or when
    the consumer reaches the log end at or beyond ``end``.
    """
    egress = required(config, "egress")
    yield range_row(rng.topic, rng.partition, rng.start, rng.end - 1)
    consumer = Consumer(
        client_config(
            config.region(egress.region).kafka,
            group_id=egress.group_id,
            enable_auto_commit=False,
            enable_auto_offset_store=False,
            enable_partition_eof=True,
            auto_offset_reset="error",
            isolation_level=egress.isolation_level,
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
        )
    )
    try:
        consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            records = []
            # Never ask for more than the range still holds: consume() waits out its
            # timeout until it has num_messages, which would cost every small range 1 s.
            wanted = min(READ_BATCH, rng.end - position)
            for message in consumer.consume(num_messages=wanted, timeout=1.0):
                error = message.error()
                if error is not None:
                    position = _handle_read_error(error, message, rng, position)
                    continue
                offset = message.offset()
                if offset is None:  # only error events lack an offset
                    continue
                if offset >= rng.end:
                    position = rng.end
                    break
                records.append(message)
                position = offset + 1
            if records:
                last_progress = time.monotonic()
                yield messages_to_rows(records)
            elif time.monotonic() - last_progress > STALL_TIMEOUT:
                raise BrokerError(
                    f"reading {rng.topic} partition {rng.partition}: no progress at offset "
                    f"{position} for {STALL_TIMEOUT:.0f}s (range {rng.start}..{rng.end - 1})"
                )
    finally:
        consumer.close()


def _handle_read_error(error: Any, message: Any, rng: KafkaRange, position: int) -> int:
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        # The offset of an end-of-partition event is the log end: offsets below it that
        # came without a record hold none (markers, compacted away).
        return max(position, message.offset())
    if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
        raise DataLossError(
            rng.topic,
            rng.partition,
            position,
            rng.end - 1,
            f"data loss: {rng.topic} partition {rng.partition} no longer holds offset "
            f"{position} (planned range {rng.start}..{rng.end - 1}): {error.str()}",
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
        return KafkaStreamReader(dict(self.options))
