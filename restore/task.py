"""One partition's restore, as run in a Spark task.

Order of work: open the exactly-once writer (fencing any earlier restore of the partition
still alive, e.g. the task of a killed run) and take its resume point; from there read the
planned segments row group by row group (each verified before its records are used; the
next one is read while the current one is produced), produce the records at or after the
next offset and before the cut, and commit — flush, checkpoint, commit — at least every
``COMMIT_INTERVAL`` and at each segment's end. What a
task could not finish (a corrupt segment, the gap where the archive stops) is committed up
to the last verified record and reported; it never raises for bad input.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from replicator.core.collector import settle_worker_heap, tune_collector
from replicator.core.config_json import config_from_json
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.errors import RecordRefusedError
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.writer import PartitionWriter
from replicator.core.logs import configure_worker_logging
from replicator.core.read_ahead import ReadAhead
from replicator.core.segments.errors import CorruptSegmentError, SegmentMismatchError
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import SegmentStore, StoredSegment
from restore.planning import PartitionPlan, PlannedSegment, segments_from

log = logging.getLogger(__name__)

COMMIT_INTERVAL = 2.0
READ_SLOTS = 2
"""Row groups a task holds at once: the one produced and the next, read meanwhile
(:mod:`replicator.core.read_ahead`)."""
WRITER_GROUP = "replicator-restore"
"""Prefix of the restore writers' transactional ids."""


@dataclass(frozen=True)
class RestoreTask:
    """Everything a task needs; pickled to the executor."""

    config_json: str
    into_region: str
    from_region: str
    into_topic: str
    plan: PartitionPlan
    until_ms: int | None
    checkpoint_topic: str
    checkpoint_partitions: int


@dataclass
class PartitionResult:
    topic: str
    partition: int
    status: str = "complete"
    """complete | cut (stopped at --until) | gap (the archive stops) | halted | failed"""
    message: str = ""
    records: int = 0
    bytes: int = 0
    """Key and value bytes restored."""
    first_offset: int | None = None
    last_offset: int | None = None
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    next_offset: int = 0
    """Next source offset: where a later run with ``--append`` continues."""
    seconds: float = 0.0
    resumed_at: int | None = None
    """Where an earlier run had left the partition (None: nothing was restored before)."""

    @property
    def ok(self) -> bool:
        return self.status in ("complete", "cut")


def target_of(task: RestoreTask) -> WriteTarget:
    plan = task.plan
    source = SourcePartition(task.from_region, plan.topic, plan.partition)
    return WriteTarget(source, task.into_topic, plan.partition)


def run_task(task: RestoreTask) -> PartitionResult:
    """The Spark entry point: never raises (a failure is the result's status)."""
    configure_worker_logging()
    settle_worker_heap()
    tune_collector()  # this Python worker builds the lists the writer produces
    started = time.monotonic()
    result = PartitionResult(task.plan.topic, task.plan.partition)
    try:
        _restore(task, result)
    except Exception as exc:  # reported to the driver with its partition
        result.status, result.message = "failed", f"{type(exc).__name__}: {exc}"
        log.exception("restore of %s partition %d failed", task.plan.topic, task.plan.partition)
    result.seconds = time.monotonic() - started
    return result


def _restore(task: RestoreTask, result: PartitionResult) -> None:
    config = config_from_json(task.config_json)
    kafka = client_config(config.region(task.into_region).kafka)
    checkpoints = CheckpointStore(kafka, task.checkpoint_topic, task.checkpoint_partitions)
    writer = PartitionWriter(kafka, WRITER_GROUP, target_of(task), checkpoints, kind="restore")
    try:
        resume = writer.open()
        result.resumed_at = resume.next_source_offset
        next_offset = max(task.plan.start, resume.next_source_offset or task.plan.start)
        result.next_offset = next_offset
        store = SegmentStore.for_region(config, task.into_region)
        for planned in segments_from(task.plan, next_offset):
            if not _restore_segment(store, writer, task, planned, result):
                return
        if task.plan.gap is not None and result.next_offset <= task.plan.gap[0]:
            first, last = task.plan.gap
            result.status = "gap"
            result.message = (
                f"offsets {first}..{last} are missing from the archive: restored up to "
                f"{first - 1}, nothing after the gap"
            )
            log.error("%s partition %d: %s", task.plan.topic, task.plan.partition, result.message)
    finally:
        writer.close()


def _restore_segment(
    store: SegmentStore,
    writer: PartitionWriter,
    task: RestoreTask,
    planned: PlannedSegment,
    result: PartitionResult,
) -> bool:
    """Restore one segment from ``result.next_offset``; False when the partition stops
    (cut reached, or a segment that cannot be read)."""
    plan = task.plan
    key = SegmentKey(
        task.from_region, plan.topic, plan.partition, planned.level, planned.start, planned.end
    )
    stored = StoredSegment(key, planned.s3_key, planned.size, None, planned.etag)
    produced_until: int | None = None
    last_commit = time.monotonic()
    slots = threading.BoundedSemaphore(READ_SLOTS)
    try:
        with ReadAhead(store.open(stored).iter_tables(), slots) as tables:
            while True:
                with tables.next() as read:
                    if read is None:
                        break
                    table = _from(read, result.next_offset)
                    if table is None:
                        continue
                    cut_at = _cut_index(table, task.until_ms)
                    kept = table if cut_at is None else table.slice(0, cut_at)
                    if kept.num_rows:
                        writer.write(kept)
                        _count(result, kept)
                    if cut_at is not None:
                        result.next_offset = table.column("offset")[cut_at].as_py()
                        writer.commit(result.next_offset)
                        result.status = "cut"
                        return False
                    result.next_offset = produced_until = table.column("offset")[-1].as_py() + 1
                if time.monotonic() - last_commit >= COMMIT_INTERVAL:
                    writer.commit(result.next_offset)
                    produced_until, last_commit = None, time.monotonic()
    except (CorruptSegmentError, SegmentMismatchError, RecordRefusedError) as exc:
        if produced_until is not None:
            writer.commit(produced_until)
        result.status, result.message = "halted", str(exc)
        log.error("%s partition %d halted: %s", plan.topic, plan.partition, exc)
        return False
    result.next_offset = planned.end + 1
    writer.commit(result.next_offset)
    return True


def _from(table: pa.Table, next_offset: int) -> pa.Table | None:
    """The rows at or after ``next_offset`` (None: none)."""
    offsets = table.column("offset")
    if len(table) == 0 or offsets[-1].as_py() < next_offset:
        return None
    if offsets[0].as_py() < next_offset:
        table = table.filter(pc.greater_equal(offsets, next_offset))
    return table


def _cut_index(table: pa.Table, until_ms: int | None) -> int | None:
    """Index of the first row whose timestamp is later than ``until_ms`` (None: none)."""
    if until_ms is None:
        return None
    later = pc.greater(table.column("timestamp").cast(pa.int64()), until_ms)
    index = pc.index(later, True).as_py()
    return None if index < 0 else int(index)


def _count(result: PartitionResult, table: pa.Table) -> None:
    offsets, stamps = table.column("offset"), table.column("timestamp").cast(pa.int64())
    result.records += table.num_rows
    result.bytes += sum(
        pc.sum(pc.binary_length(table.column(c))).as_py() or 0 for c in ("key", "value")
    )
    if result.first_offset is None:
        result.first_offset, result.first_timestamp = offsets[0].as_py(), stamps[0].as_py()
    result.last_offset, result.last_timestamp = offsets[-1].as_py(), stamps[-1].as_py()


def as_dict(result: PartitionResult) -> dict[str, Any]:
    return {**asdict(result), "ok": result.ok}
