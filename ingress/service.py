"""The ingress service: any number of instances with the same config share the work.

Each instance (1) moves S3 notifications from SQS to the segment-events topic, (2) joins
the ingress consumer group on that topic — Kafka assigns each instance some events-topic
partitions, and with them the source partitions hashed to them (no other coordinator) —
and (3) runs a worker per owned source partition; the owner of events partition 0 also keeps
exported consumer groups' translated offsets committed. When an instance dies or joins, Kafka
moves partitions; the new owner fences the old one and resumes from the destination.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ingress.acl_sync import acl_sync as make_acl_sync
from ingress.group_sync import group_sync as make_group_sync
from ingress.metrics import IngressMetrics
from ingress.segment_events import SegmentEvent
from ingress.siblings import START_TOGETHER_TIMEOUT, InstanceMembers
from ingress.sources import bounded_sources
from ingress.sqs_bridge import SqsBridge
from ingress.worker import ExportStart, PartitionWorker
from replicator.core.aws.errors import StorageError
from replicator.core.config import Config, IngressSource, key_path, required
from replicator.core.errors import ReplicatorError
from replicator.core.filters import FilterChain, load_chain
from replicator.core.freezes import (
    GROUP_SESSION_SECONDS,
    HEARTBEAT_SECONDS,
    process_freeze_watch,
)
from replicator.core.health import CheckResult, Health, Heartbeat, thread_check
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config, ensure_service_topic
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.placement import slot_of
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.recreation import RecreationWatch
from replicator.core.kafka.topics import prepare_destination, sync_configs
from replicator.core.kafka.writer import PartitionWriter
from replicator.core.segments.descriptor import read_descriptor
from replicator.core.segments.errors import DescriptorError
from replicator.core.segments.store import SegmentStore
from replicator.core.signals import stop_on_signals
from replicator.core.untrusted_text import escape
from replicator.core.workers import STOP_AT_END_SETTLE, GroupShare, WorkerPool, WriterSlots

log = logging.getLogger(__name__)


class IngressService:
    def __init__(
        self,
        config: Config,
        *,
        stop_at_end: bool = False,
        handle_signals: bool = True,
        read_notifications: bool = True,
        serving: Callable[[int], object] | None = None,
        members: tuple[InstanceMembers, int] | None = None,
    ) -> None:
        """``read_notifications``: run the SQS reader (one per instance: the other
        processes of a multi-process instance do not). ``serving`` is told the port the
        metrics endpoint bound (``metrics_port = 0`` picks one). ``members``: the
        instance's members and this one's index, in a multi-process instance (they join
        the group and start their workers together and, with ``stop_at_end``, leave it
        together)."""
        self.config = config
        self._members = members
        self._read_notifications = read_notifications
        self._serving = serving
        self.ingress = required(config, "ingress")
        self.region = self.ingress.region
        self.stop_at_end = stop_at_end
        self._handle_signals = handle_signals
        self.kafka = client_config(config.region(self.region).kafka)
        self.metrics = IngressMetrics()
        self.store = SegmentStore.for_region(config, self.region)
        self._filters: dict[tuple[str, str], FilterChain] = {}
        self.sources: list[IngressSource] = [s for s in self.ingress.sources if s.topic]
        """The concrete sources (patterns resolved), refreshed with the descriptors."""
        for index, source in enumerate(self.ingress.sources):  # a bad filter fails now
            chain = load_chain(
                source.filters, key_path(("ingress", "sources", index, "filters")), config.source
            )
            if source.topic:
                self._filters[(source.region, source.topic)] = chain
        self.checkpoints = CheckpointStore(
            self.kafka, self.ingress.checkpoint_topic, self.ingress.checkpoint_partitions
        )
        self.workers: WorkerPool[PartitionWorker] = WorkerPool(self._start_worker)
        self._recreation = RecreationWatch(self.checkpoints.topic_ids)
        self._read_slots = threading.BoundedSemaphore(self.ingress.read_concurrency)
        self._writer_slots = WriterSlots(self.ingress.max_open_writers)
        self._partitions: dict[tuple[str, str], int] = {}
        self._synced_configs: dict[tuple[str, str], dict[str, str]] = {}
        self._refused: dict[tuple[str, str], str] = {}
        """Sources whose destination could not be prepared, with why (no workers)."""
        self._past_bound: dict[tuple[str, str], str] = {}
        """Topics a pattern matches past its ``max_topics``, with why (no workers)."""
        self._owned_events: set[int] = set()
        self._first_share_at: float | None = None
        """In a multi-process instance, while the first share's workers wait for the
        other members to hold shares too: when it came (see :mod:`ingress.siblings`)."""
        self._share_started = False
        self._waiting_for_members = False
        self._share = GroupShare(settle=STOP_AT_END_SETTLE)
        self._stop = threading.Event()
        self._bridge: SqsBridge | None = None
        self._group_sync: threading.Thread | None = None
        self._loop_beat = Heartbeat("events-loop", self.ingress.stall_timeout)
        self.probes = self._health_checks()

    def request_stop(self) -> None:
        self._stop.set()

    # -- set-up ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create the service's topics and the destination topics; fail on a destination
        with fewer partitions than its source, before anything is produced."""
        admin = AdminClient(self.kafka)
        try:
            ensure_service_topic(
                admin,
                self.ingress.segment_events_topic,
                self.ingress.segment_events_partitions,
                "ingress.segment_events_partitions",
                {
                    "cleanup.policy": "delete",
                    "retention.ms": str(int(self.ingress.segment_events_retention * 1000)),
                },
            )
            ensure_service_topic(
                admin,
                self.ingress.checkpoint_topic,
                self.ingress.checkpoint_partitions,
                "ingress.checkpoint_partitions",
                {"cleanup.policy": "compact"},
            )
            for source in self._resolve_sources():
                self._prepare_source(admin, source)
        except KafkaException as exc:
            raise BrokerError.from_kafka(
                f"Kafka of region {self.region} unreachable", exc.args[0]
            ) from None

    def _prepare_destination(self, admin: AdminClient, source: IngressSource) -> bool:
        """Create, grow or check ``source``'s destination topic and let its configs follow
        the source's; True when the source has partitions not known before."""
        descriptor = read_descriptor(self.store, source.region, source.topic)
        if descriptor is not None:
            partitions, configs = descriptor.partitions, descriptor.configs
        else:
            partitions = self._listed_partitions(source)
            configs = {}
        key = (source.region, source.topic)
        if partitions == 0:
            log.info("no segments or descriptor yet for %s/%s", source.region, source.topic)
            return False
        if partitions > self.ingress.max_partitions:
            raise DescriptorError(
                f"{source.region}/{source.topic} names {partitions} partitions, more than "
                f"[ingress] max_partitions = {self.ingress.max_partitions}; raise it if the "
                "source has that many"
            )
        partitions = prepare_destination(
            admin,
            source.destination,
            partitions,
            configs,
            f"{source.region}/{source.topic}",
            may_grow=lambda have: self._writes_into(source, have),
            growth_limit=lambda: self._listed_partitions(source),
            floors=True,
            # Created from these configs (refusals warned about then): nothing to follow.
            created=lambda: self._synced_configs.__setitem__(key, configs),
        )
        if configs and self._synced_configs.get(key) != configs:
            refused = self.metrics.configs_refused
            sync_configs(
                admin,
                source.destination,
                configs,
                refused=lambda name: refused.labels(source.region, source.topic, name).inc(),
            )
            self._synced_configs[key] = configs
        grew = partitions > self._partitions.get(key, 0)
        self._partitions[key] = max(partitions, self._partitions.get(key, 0))
        return grew

    def _listed_partitions(self, source: IngressSource) -> int:
        """The partition count the bucket's partition directories show for ``source``."""
        listed = self.store.list_partitions(source.region, source.topic)
        return max(listed) + 1 if listed else 0

    def _resolve_sources(self) -> list[IngressSource]:
        """The concrete sources now: named ones, and the bucket's topics matching
        patterns (the last known ones if the bucket does not answer); a topic past its
        pattern's ``max_topics`` is reported once and counts as not replayed."""
        replaying = {(s.region, s.topic) for s in self.sources}
        try:
            self.sources, past_bound = bounded_sources(
                self.ingress, self.store.list_topics, replaying
            )
        except StorageError as exc:
            log.warning("cannot list source topics: %s", exc)
            return self.sources
        for region, topic in sorted(past_bound.keys() - self._past_bound.keys()):
            log.error(
                "%s/%s is not replayed: %s", region, escape(topic), past_bound[(region, topic)]
            )
        self._past_bound = past_bound
        return self.sources

    def _filter_chain(self, region: str, topic: str) -> FilterChain:
        key = (region, topic)
        if key not in self._filters:
            found = self.ingress.match(region, topic)
            assert found is not None, key  # workers exist only for matched sources
            index, source = found
            self._filters[key] = load_chain(
                source.filters,
                key_path(("ingress", "sources", index, "filters")),
                self.config.source,
            )
        return self._filters[key]

    def _writes_into(self, source: IngressSource, have: int) -> bool:
        """Whether ingress already replays ``source`` into its destination topic (of
        ``have`` partitions): any partition of it holds a checkpoint or provenance of the
        source (one that is idle holds none, so no single partition decides)."""
        for partition in range(have):
            target = WriteTarget(
                SourcePartition(source.region, source.topic, partition),
                source.destination,
                partition,
            )
            if self.checkpoints.resume_point(target).next_source_offset is not None:
                return True
        return False

    def _prepare_source(self, admin: AdminClient, source: IngressSource) -> bool:
        """:meth:`_prepare_destination`, with its failure contained to ``source``: an
        unreadable descriptor or a destination that cannot take the source's partitions
        leaves that source without workers (reported once, retried at each refresh, and
        counted as halted by a ``--stop-at-end`` run); the other sources go on."""
        key = (source.region, source.topic)
        try:
            grew = self._prepare_destination(admin, source)
        except ReplicatorError as exc:
            if self._refused.get(key) != str(exc):
                log.error("%s/%s is not replayed: %s", source.region, source.topic, exc)
            self._refused[key] = str(exc)
            return False
        if self._refused.pop(key, None) is not None:
            log.info("%s/%s: its destination is ready now", source.region, source.topic)
        return grew

    def _refresh_topics(self) -> None:
        """Follow the sources' descriptors: new partitions (grown topics, sources that
        appeared after start) get workers, destinations grow, configs follow."""
        admin = AdminClient(self.kafka)
        grew = False
        for source in self._resolve_sources():
            try:
                grew |= self._prepare_source(admin, source)
            except KafkaException as exc:
                log.warning("Kafka of region %s: %s", self.region, exc.args[0].str())
        if grew and self._share.ever_assigned and self._first_share_at is None:
            self._own_workers()

    def _follow_recreation(self) -> None:
        """Destination topics deleted and created again: their workers start again, and
        replay from where the export begins (see :mod:`replicator.core.kafka.recreation`);
        a caught-up partition would otherwise leave the new topic without its records."""
        sources = {s.destination: (s.region, s.topic) for s in self.sources}
        recreated = self._recreation.recreated(sorted(sources))
        if recreated:
            keys = {sources[d] for d in recreated}
            self.workers.stop([k for k in self.workers.workers if (k.origin, k.topic) in keys])
            self.workers.own(self._owned_sources(self._owned_events))

    def _health_checks(self) -> Health:
        """Live: the events loop, the SQS reader (the current one: a dead reader is
        replaced within a turn of the events loop) and the group sync keep turning.
        Ready: the group has given this instance its share, and not all of it halted."""
        health = Health()
        health.add_liveness(self._loop_beat.check)
        if self._read_notifications:
            health.add_liveness(self._sqs_reader_check)
        if self.ingress.sync_group_offsets:
            health.add_liveness(thread_check("group-sync", lambda: self._group_sync))
        health.add_readiness(self._assignment_check)
        return health

    def _sqs_reader_check(self) -> CheckResult:
        bridge = self._bridge
        if bridge is None or not bridge.is_alive():
            return CheckResult("sqs-reader", False, "thread not running")
        return bridge.heartbeat.check()

    def _assignment_check(self) -> CheckResult:
        if not self._share.ever_assigned:
            return CheckResult("partitions", False, "no assignment from the group yet")
        if self._first_share_at is not None:
            return CheckResult(
                "partitions", False, "waiting for the instance's other processes to hold shares"
            )
        halted = len(self.workers.halted())
        owned = len(self.workers)
        detail = f"{owned} source partitions owned, {halted} halted"
        return CheckResult("partitions", owned == 0 or halted < owned, detail)

    # -- running --------------------------------------------------------------------------

    def run(self) -> int:
        self.prepare()
        if self.ingress.metrics_port is not None:
            port = self.metrics.serve(
                self.ingress.metrics_port, self.ingress.metrics_host, self.probes
            )
            if self._serving is not None:
                self._serving(port)
        with stop_on_signals(self._stop, install=self._handle_signals):
            halted = self._serve()
        if halted:
            log.error("%d partitions halted: %s", len(halted), "; ".join(halted))
        return 1 if halted else 0

    def _serve(self) -> list[str]:
        """Follow the segment events until stopped (or done, with ``stop_at_end``); the
        reasons of the partitions that halted."""
        bridge = self._bridge = self._start_bridge()
        group_sync = make_group_sync(
            self.config,
            self.kafka,
            self.metrics,
            partitions=lambda: dict(self._partitions),
            sources=lambda: list(self.sources),
            leading=lambda: 0 in self._owned_events,
        )
        if self.ingress.sync_group_offsets:
            group_sync.start()
            self._group_sync = group_sync
        acl_sync = make_acl_sync(
            self.config, self.kafka, lambda: list(self.sources), lambda: 0 in self._owned_events
        )
        if acl_sync is not None:
            acl_sync.start()
        consumer = Consumer(
            {
                **self.kafka,
                "group.id": self.ingress.group_id,
                "partition.assignment.strategy": "roundrobin",
                "session.timeout.ms": int(GROUP_SESSION_SECONDS * 1000),
                "heartbeat.interval.ms": int(HEARTBEAT_SECONDS * 1000),
                "enable.auto.commit": True,
                "auto.offset.reset": "latest",
                # Events are few and each one starts a replay: a broker that holds an
                # empty fetch for the full wait (the local one does) must not delay them.
                "fetch.wait.max.ms": 100,
            }
        )
        if self._members is not None:
            self._members[0].join_together(self._stop)
        consumer.subscribe(
            [self.ingress.segment_events_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
        )
        next_refresh = time.monotonic() + self.ingress.descriptor_interval
        try:
            while not self._stop.is_set():
                self._loop_beat.beat()
                message = consumer.poll(self._poll_timeout())
                if message is not None:
                    self._dispatch(message)
                self._start_first_share()
                self.workers.supervise()
                self.metrics.ready_partitions.labels(self.region).set(
                    len(self.workers) - len(self.workers.halted())
                )
                self.metrics.open_writers.labels(self.region).set(self._writer_slots.in_use())
                if bridge is not None:
                    bridge = self._bridge = self._supervise_bridge(bridge)
                if time.monotonic() >= next_refresh:
                    next_refresh = time.monotonic() + self.ingress.descriptor_interval
                    self._refresh_topics()
                self._follow_recreation()
                if self.stop_at_end and self._finished():
                    break
        finally:
            # Before close(): its revoke callback stops and forgets the workers.
            halted = self.workers.halted() + [
                f"{region}/{escape(topic)}: {reason}"
                for (region, topic), reason in {**self._refused, **self._past_bound}.items()
            ]
            consumer.close()
            self.workers.stop()
            group_sync.stop()
            if acl_sync is not None:
                acl_sync.stop()
            if bridge is not None:
                bridge.stop()
                bridge.join(10)
            self.metrics.close()
        return halted

    def _start_bridge(self) -> SqsBridge | None:
        if not self._read_notifications:
            return None
        bridge = SqsBridge(self.config, self.kafka, self.metrics)
        bridge.start()
        return bridge

    def _supervise_bridge(self, bridge: SqsBridge) -> SqsBridge:
        """A notification reader that died (whatever killed it) is replaced and reported:
        without it, segments arrive only with the periodic re-listing."""
        if bridge.is_alive() or self._stop.is_set():
            return bridge
        self.metrics.sqs_reader_restarts.labels(self.region).inc()
        log.error("the SQS notification reader stopped (%s); starting a new one", bridge.failure)
        replacement = self._start_bridge()
        assert replacement is not None
        return replacement

    def _finished(self) -> bool:
        finished = self._first_share_at is None and self._share.done(self.workers)
        if self._members is None:
            return finished
        members, index = self._members
        self._waiting_for_members = finished
        return members.all_finished(index, finished)

    def _poll_timeout(self) -> float:
        """Seconds the events loop waits for an event. A ``--stop-at-end`` member whose
        share is done looks often for the others' being done: the first to leave starts a
        rebalance, and a member that hears of it before it sees that all are done is
        handed the leaver's (done) partitions and restarts their workers."""
        return 0.05 if self._waiting_for_members else 0.5

    def _owned_sources(self, events: set[int]) -> list[SourcePartition]:
        owned = []
        for (region, topic), count in sorted(self._partitions.items()):
            for partition in range(count):
                source = SourcePartition(region, topic, partition)
                if slot_of(source, self.ingress.segment_events_partitions) in events:
                    owned.append(source)
        return owned

    def _on_assign(self, _consumer: Consumer, partitions: list[Any]) -> None:
        self._owned_events |= {p.partition for p in partitions}
        if not self._partitions:
            self._refresh_topics()
        self._share.assigned(
            whole=self._owned_events >= set(range(self.ingress.segment_events_partitions))
        )
        if self._members is not None and not self._share_started:
            self._first_share_at = self._first_share_at or time.monotonic()
            self._start_first_share()
        else:
            self._own_workers()

    def _start_first_share(self) -> None:
        """Start the first share's workers once every member of the instance holds one, or
        the wait is over (:mod:`ingress.siblings`)."""
        if self._first_share_at is None or self._members is None:
            return
        members, index = self._members
        waited = time.monotonic() - self._first_share_at
        if members.all_assigned(index) or waited >= START_TOGETHER_TIMEOUT:
            self._first_share_at = None
            self._share_started = True
            self._own_workers()

    def _own_workers(self) -> None:
        self.workers.own(self._owned_sources(self._owned_events))
        self.metrics.owned.labels(self.region).set(len(self.workers))
        log.info(
            "owning %d source partitions (events partitions %s)",
            len(self.workers),
            sorted(self._owned_events),
        )

    def _on_revoke(self, _consumer: Consumer, partitions: list[Any]) -> None:
        self._share.revoked()
        self._owned_events -= {p.partition for p in partitions}
        if self._first_share_at is None:
            self.workers.own(self._owned_sources(self._owned_events))
            self.metrics.owned.labels(self.region).set(len(self.workers))

    def _start_worker(self, key: SourcePartition) -> PartitionWorker:
        return PartitionWorker(
            self.config,
            self.ingress.source(key.origin, key.topic),
            key.partition,
            self.metrics,
            open_writer=self._writer,
            segments=SegmentStore.for_region(self.config, self.region),
            filters=self._filter_chain(key.origin, key.topic),
            stop_at_end=self.stop_at_end,
            read_slots=self._read_slots,
            writer_slots=self._writer_slots,
            export_start=lambda: self._export_start(key),
        )

    def _export_start(self, key: SourcePartition) -> ExportStart:
        try:
            descriptor = read_descriptor(self.store, key.origin, key.topic)
        except ReplicatorError as exc:  # unreadable: wait, saying why
            log.warning("cannot read the topic descriptor of %s/%s: %s", key.origin, key.topic, exc)
            return ExportStart(True, None)
        if descriptor is None:
            return ExportStart(False, None, described=False)
        if descriptor.export_start is None:
            return ExportStart(False, None)
        return ExportStart(True, descriptor.export_start.get(key.partition))

    def _writer(self, target: WriteTarget) -> PartitionWriter:
        return PartitionWriter(
            self.kafka,
            self.ingress.group_id,
            target,
            self.checkpoints,
            kind="ingress",
            transaction_timeout=self.ingress.transaction_timeout,
            freezes=process_freeze_watch(),
        )

    def _dispatch(self, message: Any) -> None:
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                log.warning("segment-events topic: %s", error.str())
            return
        try:
            event = SegmentEvent.from_json(message.value())
            segment_key = event.segment(self.config.s3.prefix)
        except ValueError as exc:  # SegmentKeyError is one too
            self.metrics.events_invalid.labels(self.region).inc()
            log.warning(
                "segment-events topic partition %s offset %s: skipping an invalid event: %s",
                message.partition(),
                message.offset(),
                exc,
            )
            return
        worker = self.workers.get(
            SourcePartition(segment_key.region, segment_key.topic, segment_key.partition)
        )
        if worker is not None:
            worker.notify(event)
