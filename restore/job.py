"""The restore driver: resolve where from and where to, plan, check, then run one Spark
task per partition while printing progress.

Checks before anything is written: archived segments (GLACIER, DEEP_ARCHIVE) without a
completed S3 restore refuse the run naming their keys; a destination topic that ingress or
the relay writes while their group has members is refused, whatever it holds (even
empty, even with ``--append``); an existing destination topic with fewer partitions, or
with records that no earlier restore of this source wrote, is refused (``--append``
writes after such records). A destination holding what an earlier,
killed run restored is continued: each partition's writer resumes after it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.core.config import RESTORE_CHECKPOINT_TOPIC, Config
from replicator.core.config_json import config_to_json
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.destination import OffsetTranslator
from replicator.core.groups.offsets_file import GroupSelection
from replicator.core.groups.plan import GroupPartition, commit_groups, translate_groups
from replicator.core.groups.stored import read_group_offsets_at
from replicator.core.kafka.checkpoints import Checkpoint, CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config, ensure_topic
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.tail import SETTLE_WAIT, first_committed, tail_reader
from replicator.core.kafka.topics import prepare_destination
from replicator.core.segments.descriptor import read_descriptor
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import SegmentStore, StoredSegment
from replicator.core.spark import spark_session
from replicator.core.untrusted_text import escape
from restore.errors import ArchivedSegmentsError, RestoreError
from restore.ownership import services_writing
from restore.planning import PartitionPlan, plan_partition
from restore.report import TopicPlan, progress_line
from restore.task import PartitionResult, RestoreTask, run_task, target_of

log = logging.getLogger(__name__)

CHECKPOINT_TOPIC = RESTORE_CHECKPOINT_TOPIC
"""Restore's own checkpoint topic: only the restore user writes it (docs/security.md)."""
CHECKPOINT_PARTITIONS = 8
"""Partitions it is created with; an existing one is taken as it is."""
PROGRESS_INTERVAL = 3.0
ARCHIVED_SHOWN = 10
MAX_GROUPS = 1000
"""Exported groups read per topic by ``--groups`` (the first by id; more are named in a
warning): a bucket filled with forged group objects costs at most this many reads."""


@dataclass(frozen=True)
class RestoreRequest:
    topics: list[str]
    from_region: str | None = None
    into_region: str | None = None
    into_topic: str | None = None
    until_ms: int | None = None
    partitions: list[int] | None = None
    append: bool = False
    groups: bool = False
    """Also commit exported consumer groups' offsets as they were at the cut."""
    group_names: list[str] | None = None
    """With ``groups``: only these groups (None: every group exported, at most
    :data:`MAX_GROUPS` of them)."""


class RestoreJob:
    def __init__(
        self,
        config: Config,
        request: RestoreRequest,
        *,
        master: str | None = None,
        spark: Any = None,
        say: Callable[[str], None] = lambda _line: None,
    ) -> None:
        """``spark``: an existing session to run in (left running); ``say``: where
        progress lines go."""
        if request.into_topic and len(request.topics) != 1:
            raise RestoreError("--into-topic names the destination of one --topic only")
        self.config = config
        self.request = request
        self.master = master
        self._spark = spark
        self._say = say
        self.into_region = request.into_region or (
            config.ingress.region if config.ingress else None
        )
        self._from = {t: self._from_region(t) for t in request.topics}
        if self.into_region is None:
            regions = set(self._from.values())
            self.into_region = regions.pop() if len(regions) == 1 else None
        if self.into_region is None or self.into_region not in config.regions:
            raise RestoreError(f"--into-region {self.into_region!r} is not a region of the config")
        self.store = SegmentStore.for_region(config, self.into_region)
        # Restore writes its own checkpoint topic; it only reads the one of the service
        # (ingress or relay) that writes into this region, to see who wrote a partition.
        self._checkpoint_topic, self._checkpoint_partitions = (
            CHECKPOINT_TOPIC,
            CHECKPOINT_PARTITIONS,
        )
        self._service_checkpoint_topic: tuple[str, int] | None = None
        if config.ingress and config.ingress.region == self.into_region:
            ingress = config.ingress
            self._service_checkpoint_topic = (
                ingress.checkpoint_topic,
                ingress.checkpoint_partitions,
            )
        elif config.relay and config.relay.destination == self.into_region:
            relay = config.relay
            self._service_checkpoint_topic = (relay.checkpoint_topic, relay.checkpoint_partitions)
        self.groups_moved: dict[str, int | None] = {}
        self._config_json = config_to_json(config)
        """What every task gets (secrets resolved): built once, not once per task."""
        self.tasks_seconds = 0.0
        """From the first task submitted to the last result (Spark start-up excluded)."""
        self.kafka = client_config(config.region(self.into_region).kafka)

    # -- where from ----------------------------------------------------------------------

    def _from_region(self, topic: str) -> str:
        if self.request.from_region is not None:
            return self.request.from_region
        candidates = set()
        egress = self.config.egress
        if egress and (topic in egress.topics or _matches(egress.topic_pattern, topic)):
            candidates.add(egress.region)
        if self.config.ingress:
            candidates |= {s.region for s in self.config.ingress.sources if s.matches(topic)}
        if len(candidates) != 1:
            found = ", ".join(sorted(candidates)) or "none"
            raise RestoreError(
                f"cannot tell which region exported {topic} (config names: {found}); "
                "give --from-region"
            )
        return candidates.pop()

    # -- planning ------------------------------------------------------------------------

    def plan(self) -> list[TopicPlan]:
        plans = []
        for topic in self.request.topics:
            region = self._from[topic]
            descriptor = read_descriptor(self.store, region, topic)
            listed = self.store.list_partitions(region, topic)
            count = descriptor.partitions if descriptor else (max(listed) + 1 if listed else 0)
            if count == 0:
                raise RestoreError(
                    f"nothing of {region}/{topic} in bucket {self.store.bucket} "
                    f"(prefix {self.config.s3.prefix!r})"
                )
            starts = (descriptor.export_start if descriptor else None) or {}
            wanted = (
                self.request.partitions if self.request.partitions is not None else range(count)
            )
            topic_plan = TopicPlan(
                topic,
                self.request.into_topic or topic,
                count,
                descriptor.configs if descriptor else {},
            )
            for partition in wanted:
                if partition >= count:
                    raise RestoreError(f"{topic} has no partition {partition} (it has {count})")
                segments = self.store.list_segments(region, topic, partition)
                topic_plan.plans.append(
                    plan_partition(topic, partition, segments, starts.get(partition))
                )
            plans.append(topic_plan)
        return plans

    def preview_cuts(self, plans: list[TopicPlan]) -> None:
        """``--plan --until``: the offset each partition would be cut at, found from
        row-group statistics (one row group read per partition at most)."""
        until = self.request.until_ms
        if until is None:
            return
        for topic in plans:
            for plan in topic.plans:
                topic.cuts[plan.partition] = self._cut(topic.topic, plan, until)

    def _cut(self, topic: str, plan: PartitionPlan, until: int) -> int | None:
        region = self._from[topic]
        for planned in plan.segments:
            key = SegmentKey(
                region, topic, plan.partition, planned.level, planned.start, planned.end
            )
            reader = self.store.open(
                StoredSegment(key, planned.s3_key, planned.size, None, planned.etag)
            )
            for index in range(reader.num_row_groups):
                stamps = reader.timestamp_range(index)
                if stamps is not None and stamps[1] <= until:
                    continue
                table = reader.read_row_group(index)
                later = [
                    o
                    for o, t in zip(
                        table.column("offset").to_pylist(),
                        table.column("timestamp").cast("int64").to_pylist(),
                        strict=True,
                    )
                    if t is not None and t > until and o >= plan.start
                ]
                if later:
                    return int(later[0])
        return None

    # -- checks --------------------------------------------------------------------------

    def check_archived(self, plans: list[TopicPlan]) -> None:
        frozen = [
            s.s3_key
            for topic in plans
            for plan in topic.plans
            for s in plan.archived
            if not self.store.is_restored(s.s3_key)
        ]
        if frozen:
            shown = "\n  ".join(frozen[:ARCHIVED_SHOWN])
            more = (
                f"\n  … and {len(frozen) - ARCHIVED_SHOWN} more"
                if len(frozen) > ARCHIVED_SHOWN
                else ""
            )
            raise ArchivedSegmentsError(
                f"{len(frozen)} segments are archived (GLACIER/DEEP_ARCHIVE) and cannot be "
                f"read until S3 restores them; nothing was written:\n  {shown}{more}\n"
                f"Request their restore (aws s3api restore-object --bucket {self.store.bucket} "
                "--key KEY --restore-request Days=7), wait until it completes, run again."
            )

    def prepare_destination(self, plans: list[TopicPlan]) -> None:
        admin = AdminClient(self.kafka)
        try:
            # No setting names its partition count: an existing topic is taken as it is.
            ensure_topic(
                admin,
                self._checkpoint_topic,
                self._checkpoint_partitions,
                {"cleanup.policy": "compact"},
            )
            existing = admin.list_topics(timeout=30).topics
            self._checkpoint_partitions = len(existing[self._checkpoint_topic].partitions)
            service_topic = self._service_checkpoint_topic
            if service_topic is not None and service_topic[0] not in existing:
                self._service_checkpoint_topic = None  # the service never ran here
        except KafkaException as exc:
            raise BrokerError.from_kafka(
                f"Kafka of region {self.into_region} unreachable", exc.args[0]
            ) from None
        for topic in plans:
            source = f"{self._from[topic.topic]}/{topic.topic}"
            self._refuse_beside_services(topic)
            if topic.into_topic in existing:
                self._refuse_foreign_records(topic)
            prepare_destination(
                admin, topic.into_topic, topic.partitions, topic.configs, source, floors=True
            )

    def _refuse_beside_services(self, topic: TopicPlan) -> None:
        """Refuse, even with ``--append``, a destination topic that ingress or the relay
        writes while their group has members, whatever its partitions hold (empty, not
        created yet): restore's writer has a transactional id of its own, so neither
        fences the other, and every source offset both write lands twice.

        Who writes the topic is decided by this config, not by what the partitions hold
        nor by checkpoints alone: the topic is a destination of its ``[ingress]`` (of
        this region) or of its ``[relay]`` (into this region), and that service's group
        has members. That answers for a partition retention emptied or the service has
        not written yet, and for the relay, whose checkpoints are kept under its own
        origin and source topic (never under restore's key). Checkpoints are asked too,
        per partition (:meth:`_refuse_foreign_records`): a service whose group this
        config names may run under other sources than this file lists."""
        for service, group in services_writing(
            self.config, self.into_region or "", topic.into_topic
        ):
            if self._group_active(group):
                raise RestoreError(
                    f"{topic.into_topic} is being written by {service} (group {group!r} has "
                    f"members; [{service}] of the config writes it); stop it first, or "
                    "restore into another --into-topic"
                )

    def _refuse_foreign_records(self, topic: TopicPlan) -> None:
        """Refuse a partition for which the checkpoint topic of the service writing into
        this region (ingress or the relay) holds a checkpoint under restore's key while
        their group (as this config names it) has members: even with ``--append``, and
        whatever the partition holds (see :meth:`_refuse_beside_services`); the latest one
        whichever topic of that name it was written for, as a service that wrote a topic
        deleted and created again writes the new one too. Unless ``--append``, refuse a
        partition holding records that no restore of this source wrote (restore's own
        checkpoint topic has none for it); records of aborted transactions are none (a
        restore killed mid-transaction leaves them, and its rerun must go on)."""
        checkpoints = self._checkpoints()
        services = self._service_checkpoints()
        consumer = tail_reader(self.kafka, "replicator-restore-check")
        try:
            for plan in topic.plans:
                where = f"{topic.into_topic} partition {plan.partition}"
                target = target_of(self._task(topic, plan))
                latest = _latest_writer(services, target) if services else ""
                if latest in ("ingress", "relay") and self._service_running(latest):
                    raise RestoreError(
                        f"{where} is being written by {latest} (group "
                        f"{self._service_group(latest)!r} has members); stop it first, or "
                        "restore into another --into-topic"
                    )
                tp = TopicPartition(topic.into_topic, plan.partition)
                low, high = consumer.get_watermark_offsets(tp, timeout=30)
                if high <= low or self.request.append:
                    continue
                if first_committed(consumer, tp, low) is None:
                    continue  # only aborted records: a killed restore's, or anyone's
                resume = checkpoints.resume_point(target, kind="restore")
                if resume.checkpoint is None:
                    # A commit's markers reach its partitions in no set order: wait for
                    # the checkpoint partition's open transactions before refusing.
                    resume = checkpoints.resume_point(target, kind="restore", settle=SETTLE_WAIT)
                if resume.checkpoint is not None:
                    continue
                who = {"ingress": "ingress", "relay": "the relay"}.get(
                    latest, "another writer (or a version that did not record its kind)"
                )
                held = "" if resume.next_source_offset is None else f", written by {who}"
                raise RestoreError(
                    f"{where} already holds records that no restore of "
                    f"{self._from[topic.topic]}/{topic.topic} wrote{held}; restore into "
                    "another --into-topic, or give --append to restore after them"
                )
        finally:
            consumer.close()

    def _service_group(self, writer: str) -> str | None:
        """The consumer group of the ``writer`` service that writes into this region, as
        this config names it (None: the config has none writing here)."""
        ingress, relay = self.config.ingress, self.config.relay
        if writer == "ingress" and ingress and ingress.region == self.into_region:
            return ingress.group_id
        if writer == "relay" and relay and relay.destination == self.into_region:
            return relay.group_id
        return None

    def _service_running(self, writer: str) -> bool:
        group = self._service_group(writer)
        return group is not None and self._group_active(group)

    def _group_active(self, group: str) -> bool:
        return GroupAdmin(self.kafka, self.into_region or "").is_active(group)

    def _checkpoints(self) -> CheckpointStore:
        return CheckpointStore(self.kafka, self._checkpoint_topic, self._checkpoint_partitions)

    def _service_checkpoints(self) -> CheckpointStore | None:
        """The checkpoint topic of the service writing into this region (read only)."""
        if self._service_checkpoint_topic is None:
            return None
        return CheckpointStore(self.kafka, *self._service_checkpoint_topic)

    def _task(self, topic: TopicPlan, plan: PartitionPlan) -> RestoreTask:
        return RestoreTask(
            self._config_json,
            self.into_region or "",
            self._from[topic.topic],
            topic.into_topic,
            plan,
            self.request.until_ms,
            self._checkpoint_topic,
            self._checkpoint_partitions,
        )

    # -- running -------------------------------------------------------------------------

    def run(self, plans: list[TopicPlan]) -> list[PartitionResult]:
        self.check_archived(plans)
        self.prepare_destination(plans)
        tasks = [self._task(topic, plan) for topic in plans for plan in topic.plans]
        if not tasks:
            return []
        spark = self._spark or spark_session(
            self.master or f"local[{min(len(tasks), 8)}]",
            "replicator-restore",
            {},
            self.config.spark,
            bounded=True,
        )
        results: list[PartitionResult] = []
        failure: list[BaseException] = []

        def collect() -> None:
            started = time.monotonic()
            try:
                results.extend(
                    spark.sparkContext.parallelize(tasks, len(tasks)).map(run_task).collect()
                )
                self.tasks_seconds = time.monotonic() - started
            except BaseException as exc:  # raised again on the driver's thread
                failure.append(exc)

        runner = threading.Thread(target=collect, name="restore-collect", daemon=True)
        runner.start()
        try:
            self._watch(runner, plans, tasks)
        finally:
            if self._spark is None:
                spark.stop()
        if failure:
            raise failure[0]
        return sorted(results, key=lambda r: (r.topic, r.partition))

    def _watch(
        self, runner: threading.Thread, plans: list[TopicPlan], tasks: list[RestoreTask]
    ) -> None:
        """A progress line per topic when the tasks start, every few seconds while they
        run, and once they are done."""
        started = time.monotonic()
        checkpoints = self._checkpoints()
        planned_bytes = {t.topic: sum(p.bytes for p in t.plans) for t in plans}
        targets = [target_of(task) for task in tasks]
        while True:
            running = runner.is_alive()
            done: dict[str, int] = {}
            planned: dict[str, int] = {}
            try:
                points = checkpoints.progress(targets)
            except (BrokerError, KafkaException) as exc:
                # A progress line only: a leader on the move (NOT_LEADER_FOR_PARTITION
                # just after the topic was created) waits for the next round.
                log.debug("restore progress not read this round: %s", exc)
                points = {}
            for task, target in zip(tasks, targets, strict=True):
                plan = task.plan
                planned[plan.topic] = planned.get(plan.topic, 0) + max(0, plan.end - plan.start)
                point = points.get(target)
                reached = min(plan.end, point) - plan.start if point is not None else 0
                done[plan.topic] = done.get(plan.topic, 0) + max(0, reached)
            elapsed = time.monotonic() - started
            for topic, total in sorted(planned.items()):
                share = done[topic] / total if total else 1.0
                eta = (
                    elapsed * (1 - share) / share
                    if running and 0 < share < 1 and elapsed >= 1
                    else None
                )
                self._say(progress_line(topic, done[topic], total, planned_bytes[topic], eta))
            if not running:
                return
            runner.join(PROGRESS_INTERVAL)

    def restore_groups(self, plans: list[TopicPlan]) -> list[GroupPartition]:
        """Commit, for the restored topics, the offsets exported consumer groups had
        committed at the cut (the latest without ``--until``), translated to the restored
        topics' offsets; groups with members in the destination are left alone. The
        translated rows (``commit`` per group in the log)."""
        committed = []
        targets: dict[SourcePartition, WriteTarget] = {}
        for topic in plans:
            region = self._from[topic.topic]
            for plan in topic.plans:
                source = SourcePartition(region, topic.topic, plan.partition)
                targets[source] = WriteTarget(source, topic.into_topic, plan.partition)
            for exported in read_group_offsets_at(
                self.store, region, topic.topic, self.request.until_ms, self._group_selection()
            ):
                committed += [
                    (exported.group, SourcePartition(region, topic.topic, p), offset)
                    for p, offset in sorted(exported.offsets.items())
                ]
        rows = translate_groups(
            OffsetTranslator(self.kafka, self._checkpoints()), committed, targets.get
        )
        moved = commit_groups(GroupAdmin(self.kafka, self.into_region or ""), rows)
        for group, count in moved.items():
            if count is None:
                log.warning(
                    "group %s has members in %s: not moved", escape(group), self.into_region
                )
            else:
                log.info("group %s: offsets committed on %d partitions", escape(group), count)
        self.groups_moved = moved
        return rows

    def _group_selection(self) -> GroupSelection:
        names = self.request.group_names
        return GroupSelection(names=frozenset(names) if names else None, limit=MAX_GROUPS)


def _latest_writer(checkpoints: CheckpointStore, target: WriteTarget) -> str:
    """The writer kind of the latest committed checkpoint of ``target``'s key, whichever
    topic of that name it was written for ("" when there is none, or it is unreadable:
    restore's writer then halts on it)."""
    raw = checkpoints.latest(target.checkpoint_key)
    if raw is None:
        return ""
    try:
        return Checkpoint.from_json(raw).writer
    except ValueError as exc:
        log.warning("checkpoint %s is unreadable: %s", target.checkpoint_key, exc)
        return ""


def _matches(pattern: str | None, topic: str) -> bool:
    return pattern is not None and re.fullmatch(pattern, topic) is not None
