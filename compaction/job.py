"""A compaction run: the driver lists and plans, Spark tasks merge.

Each merge is a Spark job of one task, ``parallelism`` of them at once, the next started as
soon as one ends (:mod:`compaction.scheduling`); a stop request (SIGTERM) starts no further
merge, so a run never stops inside one. Cleanups of inputs already covered by
a verified higher-level segment (left by an interrupted run) are done by the driver.
Each run ends with a report, logged, returned, and exported as Prometheus metrics (pushed
to a Pushgateway when configured).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from compaction.merge import MergeResult, run_merge, verify
from compaction.planning import Merge, PartitionPlan, plan_partition
from compaction.scheduling import run_bounded
from replicator.core.collector import settle_worker_heap
from replicator.core.config import Config, required
from replicator.core.config_json import config_from_json, config_to_json
from replicator.core.errors import ConfigError
from replicator.core.faults import COMPACTION_DURING_CLEANUP, crash_point
from replicator.core.logs import configure_worker_logging
from replicator.core.segments.errors import SegmentError
from replicator.core.spark import spark_session

log = logging.getLogger(__name__)


@dataclass
class RunReport:
    partitions: int = 0
    segments_read: int = 0
    segments_written: int = 0
    segments_deleted: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records: int = 0
    seconds: float = 0.0
    merge_seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """Merges not done because an input is unusable: each with the key and the reason."""
    stopped_early: bool = False
    listed_by_level: dict[int, int] = field(default_factory=dict)
    """Segments found at each level when the run listed them (before it merged)."""

    def summary(self) -> str:
        return (
            f"compaction: {self.partitions} partitions, {self.segments_read} segments read, "
            f"{self.segments_written} written, {self.segments_deleted} deleted, "
            f"{self.bytes_in} bytes in, {self.bytes_out} bytes out, {self.records} records, "
            f"{self.seconds:.1f}s"
            + (", stopped early" if self.stopped_early else "")
            + (f"; FAILED: {len(self.failed)} ({self.failed[0]})" if self.failed else "")
            + (
                f"; skipped: {len(self.skipped)} ({self.skipped[0]}"
                + (", ..." if len(self.skipped) > 1 else "")
                + ")"
                if self.skipped
                else ""
            )
        )


MergePayload = tuple[str, str, Merge, str | None, bool]
"""What a merge's Spark task is given: the config as JSON, the region, the merge, the
output's storage class, and whether to delete the inputs."""


def _merge_task(payload: MergePayload) -> MergeResult:
    """One merge in a Spark task. An input that is not a usable segment (corrupt, hostile,
    not matching its key), or an output the segment writer refuses (more row groups than
    readers accept; no private key to sign with in an Ed25519 deployment: a ValueError
    saying why), fails this merge only, with the key and the reason: raising would fail
    the whole run, and every later run at the same place. Nothing is written then."""
    configure_worker_logging()
    settle_worker_heap()
    config_json, region, merge, storage_class, delete = payload
    try:
        return run_merge(config_from_json(config_json), region, merge, storage_class, delete)
    except (SegmentError, ValueError) as exc:
        log.error("not merging into %s: %s", merge.output, exc)
        return MergeResult(merge.output, 0, 0, 0, 0, 0, 0.0, failed=str(exc))


class CompactionJob:
    def __init__(
        self,
        config: Config,
        *,
        topics: list[str] | None = None,
        partitions: list[int] | None = None,
        from_level: int | None = None,
        to_level: int | None = None,
        master: str | None = None,
        spark: Any = None,
    ) -> None:
        self.config = config
        self.compaction = required(config, "compaction")
        self.region = self.compaction.region
        self.topics = topics or sorted(self.compaction.topics)
        unknown = [t for t in self.topics if t not in self.compaction.topics]
        if unknown:
            raise ConfigError(
                "config", [(f'compaction.topics."{t}"', "topic is not configured") for t in unknown]
            )
        self.partitions = partitions
        self.from_level = from_level
        self.to_level = to_level
        self.master = master
        self._spark = spark
        self.listed_by_level: dict[int, int] = {}
        self.stop = threading.Event()

    def _store(self) -> Any:
        from replicator.core.segments.store import SegmentStore

        return SegmentStore.for_region(self.config, self.region)

    def plan(self) -> dict[tuple[str, str, int], PartitionPlan]:
        """Per (source region, topic, partition) in this region's bucket: a destination
        bucket holds the segments of its source regions."""
        store = self._store()
        now = time.time()
        plans = {}
        self.listed_by_level = {}
        for source_region in store.list_regions():
            for topic in self.topics:
                rules = self.compaction.topics[topic]
                partitions = self.partitions
                if partitions is None:
                    partitions = store.list_partitions(source_region, topic)
                for partition in partitions:
                    segments = store.list_segments(source_region, topic, partition)
                    for segment in segments:
                        level = segment.segment_key.level
                        self.listed_by_level[level] = self.listed_by_level.get(level, 0) + 1
                    if segments:
                        plans[(source_region, topic, partition)] = plan_partition(
                            segments,
                            rules,
                            now,
                            from_level=self.from_level,
                            to_level=self.to_level,
                        )
        return plans

    def describe(self, plans: dict[tuple[str, str, int], PartitionPlan]) -> list[str]:
        """What a run would do, for ``--plan``."""
        lines = []
        for (_region, topic, partition), plan in sorted(plans.items()):
            for merge in plan.merges:
                lines.append(
                    f"{topic} partition {partition}: merge {len(merge.inputs)} segments "
                    f"({merge.input_bytes} bytes) into "
                    f"{merge.output.to_s3_key(self.config.s3.prefix)}"
                    + (", then delete them" if self.compaction.topics[topic].delete else "")
                )
            for cleanup in plan.cleanups:
                lines.append(
                    f"{topic} partition {partition}: delete {len(cleanup.covered)} segments "
                    f"covered by {', '.join(c.s3_key for c in cleanup.coverings)}"
                )
            lines.extend(f"{topic} partition {partition}: skip {s}" for s in plan.skipped)
        return lines or ["nothing to do"]

    def run_once(self) -> RunReport:
        started = time.monotonic()
        report = RunReport()
        plans = self.plan()
        report.partitions = len(plans)
        report.listed_by_level = dict(self.listed_by_level)
        merges: list[tuple[str, Merge]] = []
        store = self._store()
        for (_region, topic, partition), plan in sorted(plans.items()):
            report.skipped += [f"{topic}/{partition}: {s}" for s in plan.skipped]
            merges += [(topic, m) for m in plan.merges]
            if self.compaction.topics[topic].delete:
                verified: set[str] = set()
                for cleanup in plan.cleanups:
                    for covering in cleanup.coverings:
                        if covering.s3_key not in verified:
                            verify(store, covering, store.footer(covering).record_count)
                            verified.add(covering.s3_key)
                    crash_point(COMPACTION_DURING_CLEANUP)
                    report.segments_deleted += store.delete_segments(
                        sorted({s.segment_key for s in cleanup.covered})
                    )
        if merges:
            report = self._merge(merges, report)
        report.seconds = time.monotonic() - started
        log.info(report.summary())
        return report

    def _merge(self, merges: list[tuple[str, Merge]], report: RunReport) -> RunReport:
        spark = self._spark or spark_session(
            self.master or f"local[{self.compaction.parallelism}]",
            f"replicator-compaction-{self.region}",
            {},
            self.config.spark,
            bounded=True,
        )
        config_json = config_to_json(self.config)
        payloads = [
            (
                config_json,
                self.region,
                merge,
                self.compaction.storage_class.get(merge.output.level),
                self.compaction.topics[topic].delete,
            )
            for topic, merge in merges
        ]

        def merge_in_spark(payload: MergePayload) -> MergeResult:
            results: list[MergeResult] = (
                spark.sparkContext.parallelize([payload], 1).map(_merge_task).collect()
            )
            return results[0]

        done = 0
        try:
            slots = self.compaction.parallelism
            for _payload, result in run_bounded(payloads, merge_in_spark, slots, self.stop):
                done += 1
                self._count(result, report)
            report.stopped_early = done < len(payloads)
        finally:
            if self._spark is None:
                spark.stop()
        return report

    @staticmethod
    def _count(result: MergeResult, report: RunReport) -> None:
        if result.failed:
            report.failed.append(result.failed)
            return
        report.segments_read += result.inputs
        report.segments_written += 1
        report.segments_deleted += result.deleted
        report.bytes_in += result.bytes_in
        report.bytes_out += result.bytes_out
        report.records += result.records
        report.merge_seconds += result.seconds


def export(report: RunReport, config: Config) -> CollectorRegistry:
    """The run's figures as metrics; pushed when ``pushgateway_url`` is set."""
    compaction = required(config, "compaction")
    registry = CollectorRegistry()
    figures = {
        "segments_read": report.segments_read,
        "segments_written": report.segments_written,
        "segments_deleted": report.segments_deleted,
        "bytes_in": report.bytes_in,
        "bytes_out": report.bytes_out,
        "records": report.records,
        "partitions": report.partitions,
        "merges_failed": len(report.failed),
        "duration_seconds": report.seconds,
        "last_run_timestamp_seconds": time.time(),
    }
    for name, value in figures.items():
        gauge = Gauge(
            f"replicator_compaction_{name}",
            f"Last compaction run: {name}",
            ["region"],
            registry=registry,
        )
        gauge.labels(compaction.region).set(value)
    levels = Gauge(
        "replicator_compaction_listed_segments",
        "Segments found at each level by the last run, before it merged",
        ["region", "level"],
        registry=registry,
    )
    for level, count in sorted(report.listed_by_level.items()):
        levels.labels(compaction.region, str(level)).set(count)
    if compaction.pushgateway_url:
        try:
            push_to_gateway(
                compaction.pushgateway_url,
                job="replicator-compaction",
                registry=registry,
                grouping_key={"region": compaction.region},
            )
        except OSError as exc:
            log.warning(
                "could not push compaction metrics to %s: %s", compaction.pushgateway_url, exc
            )
    return registry
