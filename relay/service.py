"""``replicator relay``: the long-running direct relay.

Any number of instances with the same config share the source partitions: each joins the
relay's consumer group on the assignment topic (in the destination cluster) and relays
the source partitions whose slot (:func:`replicator.core.kafka.placement.slot_of`) is
among the partitions the group assigns it. When an instance dies, the group reassigns its
slots and the new owner's writer fences it and resumes exactly where the destination
says it stopped.

At start, before anything is written: each upstream that answers is asked its cluster id,
and one that is the destination's cluster under another region name is refused
(RelayLoopError) when a topic would be relayed into itself (the config check at load
compares names only). An upstream that first answers later is checked then, and kept
unhealthy if it is the destination (:meth:`UpstreamHealth.refuse_cluster`).
Then the checkpoint and assignment topics are created when missing, the relay's
identity is recorded or checked (:mod:`relay.identity`), and every
destination topic is created like its source (partition count, copied configs) or
checked to have enough partitions, before anything is relayed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from relay.acl_sync import acl_sync
from relay.errors import RelayLoopError, StopOffsetsError
from relay.failover import (
    UpstreamState,
    backoff,
    grown_partition_counts,
    stop_offsets,
)
from relay.groups import group_sync
from relay.health import UpstreamHealth
from relay.identity import check_identity
from relay.metrics import RelayMetrics
from relay.start_points import first_partition_counts
from relay.worker import RelayWorker
from replicator.core.config import Config, RelayTopic, key_path, required
from replicator.core.filters import FilterChain, load_chain
from replicator.core.freezes import (
    GROUP_SESSION_SECONDS,
    HEARTBEAT_SECONDS,
    process_freeze_watch,
)
from replicator.core.health import CheckResult, Health, Heartbeat
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config, ensure_service_topic
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.placement import slot_of
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.recreation import RecreationWatch
from replicator.core.kafka.topics import prepare_destination
from replicator.core.kafka.writer import PartitionWriter
from replicator.core.malloc import tune_process_memory
from replicator.core.signals import stop_on_signals
from replicator.core.workers import STOP_AT_END_SETTLE, GroupShare, WorkerPool

log = logging.getLogger(__name__)


class RelayService:
    def __init__(
        self, config: Config, *, stop_at_end: bool = False, handle_signals: bool = True
    ) -> None:
        self.config = config
        self.relay = required(config, "relay")
        self.stop_at_end = stop_at_end
        self._handle_signals = handle_signals
        self.kafka = client_config(config.region(self.relay.destination).kafka)
        self.metrics = RelayMetrics()
        self.topics = {t.source_topic: t for t in self.relay.topics}
        self._filters: dict[str, FilterChain] = {
            t.source_topic: load_chain(
                t.filters, key_path(("relay", "topics", i, "filters")), config.source
            )
            for i, t in enumerate(self.relay.topics)
        }
        self.checkpoints = CheckpointStore(
            self.kafka, self.relay.checkpoint_topic, self.relay.checkpoint_partitions
        )
        self.health = UpstreamHealth(config, list(self.topics), self._observed)
        self.workers: WorkerPool[RelayWorker] = WorkerPool(self._start_worker)
        self._partitions: dict[str, int] = {}
        """Partition count of each relayed source topic, as relayed now."""
        self._first_counts: dict[str, int] = {}
        """... and at the relay's first start (recorded): partitions beyond it were added
        since, and start at their beginning (see :mod:`relay.start_points`)."""
        self._recreation = RecreationWatch(self.checkpoints.topic_ids)
        self._growth_problem: dict[str, str] = {}
        """The last growth failure reported per topic (reported once, not every turn)."""
        self._stop_offsets: dict[tuple[str, int], int] = {}
        self._owned_slots: set[int] = set()
        self._share = GroupShare(settle=STOP_AT_END_SETTLE)
        self._stop = threading.Event()
        self._loop_beat = Heartbeat("assignment-loop", self.relay.stall_timeout)
        self.probes = self._health_checks()

    def request_stop(self) -> None:
        self._stop.set()

    def _health_checks(self) -> Health:
        """Live: the assignment loop (or the wait for a first upstream) and the upstream
        checks keep turning. Ready: the group has given this instance its share, and an
        upstream answers."""
        probes = Health()
        probes.add_liveness(self._loop_beat.check)
        probes.add_liveness(self.health.liveness)
        probes.add_readiness(self._readiness)
        return probes

    def _readiness(self) -> CheckResult:
        if not self._share.ever_assigned:
            return CheckResult("partitions", False, "no assignment from the group yet")
        healthy = [name for name, s in self.health.states().items() if s.healthy]
        if not healthy:
            return CheckResult("partitions", False, "no upstream answers")
        detail = f"{len(self.workers)} source partitions owned; upstreams up: {healthy}"
        return CheckResult("partitions", True, detail)

    # -- set-up ---------------------------------------------------------------------------

    def _observed(self, upstream: str, state: UpstreamState) -> None:
        self.metrics.source_healthy.labels(upstream).set(1 if state.healthy else 0)

    def _wait_for_upstreams(self) -> dict[str, int] | None:
        """Partition counts of the relayed topics from the first upstream that answers;
        None if a stop came first. Waits with backoff while none answers."""
        attempt = 0
        while not self._stop.is_set():
            self._loop_beat.beat()
            self.health.check_all()
            counts = self.health.partitions()
            if counts is not None:
                return counts
            delay = backoff(attempt)
            attempt += 1
            log.warning(
                "no upstream of %s answers with every relayed topic; retrying in %.1fs",
                ", ".join(self.relay.sources),
                delay,
            )
            self._stop.wait(delay)
        return None

    def prepare(self, counts: dict[str, int]) -> None:
        """Refuse a loop; create the service topics and the destination topics (or check
        them)."""
        admin = AdminClient(self.kafka)
        try:
            self._refuse_loops(admin)
            ensure_service_topic(
                admin,
                self.relay.checkpoint_topic,
                self.relay.checkpoint_partitions,
                "relay.checkpoint_partitions",
                {"cleanup.policy": "compact"},
            )
            ran_before = check_identity(self.checkpoints, self.relay)
            ensure_service_topic(
                admin,
                self.relay.assignment_topic,
                self.relay.assignment_partitions,
                "relay.assignment_partitions",
            )
            for name, topic in self.topics.items():
                prepare_destination(
                    admin,
                    topic.destination,
                    self._needed(name, counts[name]),
                    self._configs(name),
                    f"relay of {name}",
                    may_grow=partial(self._writes_into, name),
                )
        except KafkaException as exc:
            raise BrokerError.from_kafka(
                f"Kafka of region {self.relay.destination} unreachable", exc.args[0]
            ) from None
        self._partitions = counts
        self._first_counts = first_partition_counts(
            self.checkpoints,
            self.relay.group_id,
            counts,
            self._relayed_before if ran_before else None,
        )

    def _refuse_loops(self, admin: AdminClient) -> None:
        """RelayLoopError if an upstream that answers is the destination's cluster and a
        topic would be relayed into itself; upstreams that answer later are checked by
        the health checks."""
        looping = same_name_topics(self.relay.topics)
        if not looping:
            return  # every topic gets another name: one cluster is fine
        destination_id = admin.list_topics(timeout=30).cluster_id
        if not destination_id:
            log.warning(
                "the destination %s has no cluster id: a loop through another name of it "
                "cannot be detected",
                self.relay.destination,
            )
            return
        self.health.refuse_cluster(destination_id, self.relay.destination)
        ids = self.health.cluster_ids()
        problem = loop_problem(self.relay.destination, destination_id, ids, looping)
        if problem is not None:
            raise RelayLoopError(problem)

    def _configs(self, topic: str) -> dict[str, str]:
        states = self.health.states()
        for name in self.relay.sources:
            if not states.get(name, UpstreamState(False)).healthy:
                continue
            resource = ConfigResource("topic", topic)
            try:
                entries = self.health.admin(name).call(partial(_describe_configs, resource))
            except KafkaException as exc:
                log.warning("cannot describe %s on %s: %s", topic, name, exc.args[0].str())
                continue
            return {k: e.value for k, e in entries.items() if e.value is not None}
        return {}

    def _fix_stop_offsets(self) -> bool:
        """With ``--stop-at-end``: the log end of every relayed partition, seen now on the
        first upstream that gives them all; retried with backoff while none does, for at
        most ``stall_timeout`` (then StopOffsetsError). False if a stop came first."""
        deadline = time.monotonic() + self.relay.stall_timeout
        attempt = 0
        while not self._stop.is_set():
            self._loop_beat.beat()
            found = stop_offsets(self._partitions, self.relay.sources, self.health.states())
            if found is not None:
                name, self._stop_offsets = found
                log.info("stop-at-end: relaying up to the ends of %s seen at start", name)
                return True
            delay = backoff(attempt)
            if time.monotonic() + delay > deadline:
                raise StopOffsetsError(
                    "--stop-at-end: no upstream of "
                    f"{', '.join(self.relay.sources)} gave the end offset of every relayed "
                    f"partition within {self.relay.stall_timeout:.0f} s (stall_timeout); "
                    "nothing was relayed"
                )
            attempt += 1
            log.warning(
                "--stop-at-end: no upstream gave the end offset of every relayed partition "
                "yet; asking again in %.1fs",
                delay,
            )
            self._stop.wait(delay)
            self.health.check_all()
        return False

    # -- running --------------------------------------------------------------------------

    def run(self) -> int:
        if self.relay.metrics_port is not None:
            self.metrics.serve(self.relay.metrics_port, self.relay.metrics_host, self.probes)
        try:
            with stop_on_signals(self._stop, install=self._handle_signals):
                counts = self._wait_for_upstreams()
                if counts is None:
                    return 0
                self.prepare(counts)
                if self.stop_at_end and not self._fix_stop_offsets():
                    return 0
                self.health.start()
                halted = self._serve()
        finally:
            self.health.stop()
            self.metrics.close()
        if halted:
            log.error("%d partitions halted: %s", len(halted), "; ".join(halted))
        return 1 if halted else 0

    def _serve(self) -> list[str]:
        consumer = Consumer(
            {
                **self.kafka,
                "group.id": self.relay.group_id,
                "partition.assignment.strategy": "roundrobin",
                "session.timeout.ms": int(GROUP_SESSION_SECONDS * 1000),
                "heartbeat.interval.ms": int(HEARTBEAT_SECONDS * 1000),
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                "fetch.wait.max.ms": 100,
            }
        )
        consumer.subscribe(
            [self.relay.assignment_topic], on_assign=self._on_assign, on_revoke=self._on_revoke
        )
        syncs = [
            sync
            for sync in (
                group_sync(self.config, self.kafka, self._leads_syncs),
                acl_sync(self.config, self.kafka, self._leads_syncs),
            )
            if sync is not None
        ]
        for sync in syncs:
            sync.start()
        try:
            while not self._stop.is_set():
                self._loop_beat.beat()
                message = consumer.poll(0.2)
                error = message.error() if message is not None else None
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    log.warning("assignment topic: %s", error.str())
                if not self.stop_at_end:  # a --stop-at-end run ends at the start's ends
                    self._follow_growth()
                self._follow_recreation()
                self.workers.supervise()
                self.metrics.ready_partitions.set(len(self.workers) - len(self.workers.halted()))
                if self.stop_at_end and self._share.done(self.workers):
                    break
        finally:
            halted = self.workers.halted()
            for sync in syncs:
                sync.stop()
            consumer.close()
            self.workers.stop()
        return halted

    def _leads_syncs(self) -> bool:
        """Whether this instance syncs group offsets and ACLs: the owner of slot 0."""
        return 0 in self._owned_slots

    def _follow_growth(self) -> None:
        """Partitions added to a source topic while the relay runs: grow its destination
        (the relay writes it) and relay them from their first offset, whatever
        ``start_from`` says (it names where a relay starts, not where a new partition does).
        A destination that cannot grow is reported; the topic's other partitions go on."""
        grown = grown_partition_counts(self._partitions, self.relay.sources, self.health.states())
        for name, count in grown.items():
            topic = self.topics[name]
            try:
                prepare_destination(
                    AdminClient(self.kafka),
                    topic.destination,
                    self._needed(name, count),
                    self._configs(name),
                    f"relay of {name}",
                    may_grow=lambda _have: True,
                )
            except (BrokerError, KafkaException) as exc:
                if self._growth_problem.get(name) != str(exc):
                    log.error("%s grew to %d partitions: %s", name, count, exc)
                self._growth_problem[name] = str(exc)
                continue
            self._growth_problem.pop(name, None)
            log.info(
                "source topic %s grew from %d to %d partitions; relaying the new ones",
                name,
                self._partitions[name],
                count,
            )
            self._partitions = {**self._partitions, name: count}
            self.workers.own(self._owned_sources())
            self.metrics.owned.set(len(self.workers))

    def _relayed_before(self, name: str, count: int) -> int:
        """One more than the highest partition of ``name`` below ``count`` that holds a
        checkpoint or provenance (0: none does)."""
        for partition in reversed(range(count)):
            if self._has_written(name, partition):
                return partition + 1
        return 0

    def _has_written(self, name: str, partition: int) -> bool:
        topic = self.topics[name]
        target = WriteTarget(
            SourcePartition(self.relay.origin, name, partition),
            topic.destination,
            partition if topic.destination_partition is None else topic.destination_partition,
        )
        return self.checkpoints.resume_point(target).next_source_offset is not None

    def _writes_into(self, name: str, have: int) -> bool:
        """Whether the relay already writes ``name`` into its destination (of ``have``
        partitions): a partition of it holds a checkpoint or provenance of the source (a
        source that grew while no relay ran then grows its destination at the restart,
        as while the relay runs; someone else's topic is never grown)."""
        return any(self._has_written(name, partition) for partition in range(have))

    def _follow_recreation(self) -> None:
        """Destination topics deleted and created again: their workers start again (see
        :mod:`replicator.core.kafka.recreation`)."""
        destinations = {t.destination for t in self.topics.values()}
        recreated = set(self._recreation.recreated(sorted(destinations)))
        if recreated:
            sources = [
                s for s in self.workers.workers if self.topics[s.topic].destination in recreated
            ]
            self.workers.stop(sources)
            self.workers.own(self._owned_sources())

    def _needed(self, name: str, count: int) -> int:
        """Destination partitions needed for ``count`` source partitions of ``name``."""
        topic = self.topics[name]
        if topic.destination_partition is not None:
            return topic.destination_partition + 1
        return count

    def _owned_sources(self) -> list[SourcePartition]:
        owned = []
        for name, count in sorted(self._partitions.items()):
            for partition in range(count):
                source = SourcePartition(self.relay.origin, name, partition)
                if slot_of(source, self.relay.assignment_partitions) in self._owned_slots:
                    owned.append(source)
        return owned

    def _on_assign(self, _consumer: Consumer, partitions: list[Any]) -> None:
        self._owned_slots |= {p.partition for p in partitions}
        self.workers.own(self._owned_sources())
        self.metrics.owned.set(len(self.workers))
        self._share.assigned(
            whole=self._owned_slots >= set(range(self.relay.assignment_partitions))
        )
        log.info(
            "relaying %d source partitions (slots %s)", len(self.workers), sorted(self._owned_slots)
        )

    def _on_revoke(self, _consumer: Consumer, partitions: list[Any]) -> None:
        self._share.revoked()
        self._owned_slots -= {p.partition for p in partitions}
        self.workers.own(self._owned_sources())
        self.metrics.owned.set(len(self.workers))

    def _start_worker(self, source: SourcePartition) -> RelayWorker:
        return RelayWorker(
            self.config,
            self.topics[source.topic],
            source.partition,
            self.metrics,
            self.health.states,
            open_writer=self._writer,
            filters=self._filters[source.topic],
            stop_at=self._stop_offsets[(source.topic, source.partition)]
            if self.stop_at_end
            else None,
            start_from="earliest"
            if source.partition >= self._first_counts.get(source.topic, 0)
            else None,
        )

    def _writer(self, target: WriteTarget) -> PartitionWriter:
        return PartitionWriter(
            self.kafka,
            self.relay.group_id,
            target,
            self.checkpoints,
            kind="relay",
            freezes=process_freeze_watch(),
        )


def same_name_topics(topics: Sequence[RelayTopic]) -> list[str]:
    """The relayed topics whose destination has the source's name. Pure."""
    return [t.source_topic for t in topics if t.destination == t.source_topic]


def loop_problem(
    destination: str, destination_id: str, upstream_ids: Mapping[str, str], looping: list[str]
) -> str | None:
    """Why relaying ``looping`` from upstreams with ``upstream_ids`` (by region name) into
    the cluster ``destination_id`` is a loop; None if no upstream is that cluster. Pure."""
    same = [name for name, cluster in upstream_ids.items() if cluster == destination_id]
    if not same:
        return None
    return (
        f"relay.sources {same[0]!r} and relay.destination {destination!r} are one cluster "
        f"(cluster id {destination_id}): {', '.join(looping)} would be relayed into itself "
        "(a loop); nothing was written. Name another destination_topic, or point the region "
        "at the cluster it means"
    )


def run_relay(config: Config, *, stop_at_end: bool = False) -> int:
    tune_process_memory()  # before the worker threads exist: see replicator.core.malloc
    return RelayService(config, stop_at_end=stop_at_end).run()


def _describe_configs(resource: ConfigResource, admin: AdminClient) -> dict[str, Any]:
    return admin.describe_configs([resource])[resource].result(timeout=30)
