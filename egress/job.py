"""The egress job: one Spark Structured Streaming query from a region's Kafka to level-0
segments in that region's bucket.

Runs until SIGINT/SIGTERM (then lets the running micro-batch finish and stops), or with
``stop_at_end`` exports everything up to the log ends seen at start and returns
(Trigger.AvailableNow). The driver process also serves Prometheus metrics and keeps the
topic descriptors (``_topic.json``) up to date.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException

from egress.acl_export import AclExporter
from egress.catalog import SourceCatalog
from egress.checkpoint_files import checkpoint_file_settings
from egress.driver_state import DriverState, RunDirectory
from egress.errors import EgressFailedError
from egress.group_offsets import GroupOffsetsExporter
from egress.kafka_source import KafkaSource
from egress.metrics import EgressMetrics
from egress.segment_sink import SegmentSink
from egress.spark_options import CONFIG_OPTION, TASKS_OPTION, config_to_option
from egress.topic_descriptor import DescriptorPublisher
from replicator.core.config import Config, required
from replicator.core.errors import error_names
from replicator.core.health import CheckResult, Health, Heartbeat
from replicator.core.signals import stop_on_signals
from replicator.core.spark import spark_session
from replicator.core.spark_environment import explain_executor_failure

log = logging.getLogger(__name__)

GRACEFUL_STOP_TIMEOUT = 120.0
EXPORT_START_CHECK_INTERVAL = 2.0

BATCH_PHASES = (
    ("planning", "latestOffset"),
    ("offset log", "walCommit"),
    ("ranges", "getBatch"),
    ("query plan", "queryPlanning"),
    ("writing", "addBatch"),
    ("commit", "commitOffsets"),
)
"""A micro-batch's phases as Spark's progress names them (``durationMs``), in order: the
planner's ``latestOffset``, Spark's write-ahead offset log, the ranges handed to the tasks,
the query's planning, the tasks reading and writing segments with the sink's commit, then
Spark's commit log. What ``triggerExecution`` holds beyond their sum is Spark's own."""

_ERROR_LINE = re.compile(
    r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+(?:\n  \S.*)*)$", re.MULTILINE
)
"""An error line of a Python traceback, with the indented lines right after it (an error
listing several problems, one a line, as a ConfigError does)."""


def batch_phases(durations_ms: dict[str, int]) -> str:
    """``planning 0.01s, offset log 0.02s, ...``: a batch's phases in order, in seconds,
    then ``other`` for the trigger's time outside them (never below zero)."""
    phases = [(name, durations_ms.get(key, 0) / 1000.0) for name, key in BATCH_PHASES]
    other = durations_ms.get("triggerExecution", 0) / 1000.0 - sum(s for _, s in phases)
    phases.append(("other", max(0.0, other)))
    return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in phases)


def root_cause(text: str) -> str:
    """The replicator's own error message inside a Spark failure, what to do about
    executors that cannot start its Python, else the failure's first line."""
    explained = explain_executor_failure(text)
    if explained is not None:
        return explained
    our_errors = error_names()  # every area's errors: egress imports them all
    ours = [m.group(2) for m in _ERROR_LINE.finditer(text) if m.group(1) in our_errors]
    if ours:
        return ours[-1].strip()
    matches = _ERROR_LINE.findall(text)
    if matches:
        return f"{matches[-1][0]}: {matches[-1][1].strip()}"
    return text.strip().splitlines()[0] if text.strip() else "unknown error"


@dataclass(frozen=True)
class EgressRun:
    batches: int
    segments: int
    """Segments written (Spark's input rows: one per segment, see
    :mod:`egress.segment_rows`)."""
    records: int
    """Records exported, as the driver's statistics of the run count them."""
    batch_seconds: float
    """Time spent inside micro-batches (excludes Spark start-up and idle triggers)."""
    state_dir: Path
    """The run's own statistics directory (:mod:`egress.driver_state`), kept until the
    next run starts."""


def resolved(config: Config) -> Config:
    """The config with the egress directories made absolute: Spark's planner and writer
    processes do not share the driver's working directory."""
    egress = required(config, "egress")
    updated = egress.model_copy(
        update={
            "checkpoint_location": _absolute(egress.checkpoint_location),
            "state_dir": str(Path(egress.state_dir).resolve()),
        }
    )
    return config.model_copy(update={"egress": updated})


def with_run_state(config: Config, directory: Path) -> Config:
    """The config one run's processes are given: its ``state_dir`` the run's own
    directory (see :mod:`egress.driver_state`)."""
    egress = required(config, "egress").model_copy(update={"state_dir": str(directory)})
    return config.model_copy(update={"egress": egress})


def _absolute(location: str) -> str:
    return location if "://" in location else str(Path(location).resolve())


class EgressJob:
    def __init__(
        self,
        config: Config,
        *,
        stop_at_end: bool,
        master: str | None = None,
        spark: Any = None,
        handle_signals: bool = True,
    ) -> None:
        """``spark``: an existing session to run in (left running afterwards);
        ``handle_signals``: install SIGTERM/SIGINT handlers (main thread only)."""
        self.config = resolved(config)
        self._spark = spark
        self._handle_signals = handle_signals
        self.egress = required(self.config, "egress")
        self.stop_at_end = stop_at_end
        self.master = master
        self._stop = threading.Event()
        self._seen_batches: set[int] = set()
        self._batch_seconds = 0.0
        self._query: Any = None
        self._loop_beat = Heartbeat("driver-loop", self.egress.stall_timeout)
        self._last_progress: str | None = None
        self._trigger_beat: Heartbeat | None = None
        self.probes = self._health_checks()

    def request_stop(self) -> None:
        """Finish the running batch, then stop (thread-safe)."""
        self._stop.set()

    def _health_checks(self) -> Health:
        """Live: the driver's loop turns (it waits on the query half a second at a time)
        and the query has not ended. Ready: a first trigger has finished, and no trigger
        has been running for longer than ``stall_timeout``."""
        probes = Health()
        probes.add_liveness(self._loop_beat.check)
        probes.add_liveness(self._query_check)
        probes.add_readiness(self._trigger_check)
        return probes

    def _query_check(self) -> CheckResult:
        if self._query is None:
            return CheckResult("query", True, "starting")
        if not self._query.isActive:
            return CheckResult("query", False, "the streaming query has ended")
        return CheckResult("query", True, "running")

    def _trigger_check(self) -> CheckResult:
        if self._trigger_beat is None:
            return CheckResult("triggers", False, "no trigger finished yet")
        result = self._trigger_beat.check()
        return CheckResult("triggers", result.ok, result.detail)

    def _watch_triggers(self, query: Any) -> None:
        """Beat the trigger heartbeat whenever no trigger is running or a new one has
        finished: it goes stale only while one trigger runs for longer than the stall
        timeout (an idle query runs no trigger, and a busy one finishes them in turn)."""
        progress = query.lastProgress
        stamp = None if progress is None else str(progress.timestamp)
        if stamp is None:
            return
        if self._trigger_beat is None:
            self._trigger_beat = Heartbeat("triggers", self.egress.stall_timeout)
        if stamp != self._last_progress or not query.status.get("isTriggerActive"):
            self._last_progress = stamp
            self._trigger_beat.beat()

    def run(self) -> EgressRun:
        run_state = RunDirectory.start(self.egress.state_dir)
        try:
            return self._run(with_run_state(self.config, run_state.directory))
        finally:
            run_state.release()

    def _run(self, config: Config) -> EgressRun:
        """One run with ``config`` (its own state directory)."""
        catalog = SourceCatalog(config)
        catalog.partitions()  # fails early on an unreachable broker or a missing topic
        metrics = EgressMetrics(config, catalog)
        if self.egress.metrics_port is not None:
            metrics.serve(self.egress.metrics_port, self.egress.metrics_host, self.probes)
        descriptors = DescriptorPublisher(config, catalog)
        descriptors.publish()
        groups = GroupOffsetsExporter(config, catalog)
        acls = AclExporter(config, catalog)

        spark = self._spark or spark_session(
            self.master,
            f"replicator-egress-{self.egress.region}",
            checkpoint_file_settings(self.egress.checkpoint_location),
            config.spark,
            bounded=self.stop_at_end,
        )
        spark.dataSource.register(KafkaSource)
        spark.dataSource.register(SegmentSink)
        option = config_to_option(config)
        frame = (
            spark.readStream.format(KafkaSource.name())
            .option(CONFIG_OPTION, option)
            .option(TASKS_OPTION, str(spark.sparkContext.defaultParallelism))
            .load()
        )
        writer = (
            frame.writeStream.format(SegmentSink.name())
            .option(CONFIG_OPTION, option)
            .option("checkpointLocation", self.egress.checkpoint_location)
            .queryName(f"egress-{self.egress.region}")
        )
        if self.stop_at_end:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(
                processingTime=f"{int(self.egress.trigger_interval * 1000)} milliseconds"
            )
        with stop_on_signals(
            self._stop,
            then="finishing the current batch, then stopping",
            install=self._handle_signals,
        ):
            query = self._query = writer.start()
            log.info(
                "egress from region %s started (%s)",
                self.egress.region,
                "until the current end" if self.stop_at_end else "streaming",
            )
            try:
                segments = self._supervise(query, metrics, descriptors, groups, acls)
            finally:
                metrics.close()
                if self._spark is None:
                    spark.stop()
        state_dir = Path(required(config, "egress").state_dir)
        _, stats = DriverState(state_dir).read_partitions()
        records = sum(s.records for s in stats.values())
        log.info(
            "egress stopped after %d batches, %d segments, %d records",
            len(self._seen_batches),
            segments,
            records,
        )
        return EgressRun(len(self._seen_batches), segments, records, self._batch_seconds, state_dir)

    def _supervise(
        self,
        query: Any,
        metrics: EgressMetrics,
        descriptors: DescriptorPublisher,
        groups: GroupOffsetsExporter,
        acls: AclExporter,
    ) -> int:
        """Watch the running query until it ends or a stop is requested; the segments
        written.
        Raises :class:`EgressFailedError` with the root cause if the query failed.

        Group offsets are exported once more after the query ended, so that a
        ``stop_at_end`` run leaves the offsets of the time its data was exported."""
        segments = 0
        next_housekeeping = next_group_export = next_start_check = next_acl_export = 0.0
        failure: BaseException | None = None
        while query.isActive:
            self._loop_beat.beat()
            if self._stop.is_set():
                self._stop_gracefully(query)
                break
            try:
                query.awaitTermination(0.5)
            except StreamingQueryException as exc:
                failure = exc
                break
            segments += self._observe(query, metrics)
            self._watch_triggers(query)
            if time.monotonic() >= next_housekeeping:
                next_housekeeping = time.monotonic() + self.egress.descriptor_interval
                descriptors.publish()
            if time.monotonic() >= next_start_check:
                next_start_check = time.monotonic() + EXPORT_START_CHECK_INTERVAL
                descriptors.publish_new_starts()
            if groups.enabled and time.monotonic() >= next_group_export:
                next_group_export = time.monotonic() + self.egress.group_offsets_interval
                groups.export()
            if acls.enabled and time.monotonic() >= next_acl_export:
                next_acl_export = time.monotonic() + self.egress.acl_export_interval
                acls.export()
        failure = failure or query.exception()
        segments += self._observe(query, metrics)
        metrics.refresh()
        if failure is not None:
            cause = root_cause(str(getattr(failure, "desc", None) or failure))
            log.error("egress from region %s failed: %s", self.egress.region, cause)
            raise EgressFailedError(f"egress stopped: {cause}")
        descriptors.publish_new_starts()
        groups.export()
        acls.export()
        return segments

    def _observe(self, query: Any, metrics: EgressMetrics) -> int:
        """Record the durations of batches completed since the last call; the segments
        they wrote."""
        segments = 0
        for progress in query.recentProgress:
            batch_id = progress.batchId
            if batch_id in self._seen_batches:
                continue
            self._seen_batches.add(batch_id)
            segments += int(progress.numInputRows)
            durations = progress.durationMs
            duration = durations.get("triggerExecution", 0) / 1000.0
            self._batch_seconds += duration
            log.info(
                "batch %d: %d segments in %.2fs (%s)",
                batch_id,
                progress.numInputRows,
                duration,
                batch_phases(durations),
                extra={"batch": batch_id},
            )
            metrics.batch_completed(duration)
        return segments

    def _stop_gracefully(self, query: Any) -> None:
        deadline = time.monotonic() + GRACEFUL_STOP_TIMEOUT
        while (
            query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        query.stop()


def run_egress(
    config: Config, *, stop_at_end: bool = False, master: str | None = None
) -> EgressRun:
    return EgressJob(config, stop_at_end=stop_at_end, master=master).run()
