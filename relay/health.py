"""Background health checks of the relay's upstreams.

Every ``health_check_interval`` each upstream is asked, with bounded timeouts, for its
metadata and the end offsets of the relayed partitions. An upstream that does not answer,
or lacks a relayed topic, is unhealthy until a later check succeeds. Workers read the
latest snapshot; they never wait for a check.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from relay.failover import TopicPartitionKey, UpstreamState
from replicator.core.config import Config, required
from replicator.core.health import CheckResult, Heartbeat
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.shared_admin import SharedAdmin

log = logging.getLogger(__name__)


def check_timeout(interval: float) -> float:
    """How long one check of one upstream may take."""
    return min(5.0, max(1.0, 2 * interval))


def check_failure(what: str, exc: Exception, timeout: float) -> str:
    """Why a check of ``what`` failed, for the operator: the error's text, or for a wait
    that ran out (a ``TimeoutError``, whose text is empty) that no answer came within
    ``timeout`` seconds. Pure."""
    if isinstance(exc, TimeoutError):
        return f"{what}: no answer within {timeout:g} s"
    return f"{what}: {str(exc) or type(exc).__name__}"


class UpstreamHealth:
    """The latest state of every upstream; :meth:`check_all` refreshes it."""

    def __init__(
        self,
        config: Config,
        topics: Sequence[str],
        on_state: Callable[[str, UpstreamState], None] | None = None,
    ) -> None:
        self.relay = required(config, "relay")
        self._topics = sorted(set(topics))
        self._admins = {
            name: SharedAdmin(client_config(config.region(name).kafka, socket_timeout_ms=3000))
            for name in self.relay.sources
        }
        """Renewed after a failed check: see :mod:`replicator.core.kafka.shared_admin`."""
        self._timeout = check_timeout(self.relay.health_check_interval)
        self._states: dict[str, UpstreamState] = {}
        self._lock = threading.Lock()
        self._on_state = on_state
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._heartbeat = Heartbeat("upstream-checks", self.relay.stall_timeout)
        self._cluster_ids: dict[str, str] = {}
        """Each upstream's cluster id, from its last metadata."""
        self._refused: tuple[str, str] | None = None
        """(cluster id, region name) of the destination when relaying from it loops."""

    def refuse_cluster(self, cluster_id: str, name: str) -> None:
        """From now on an upstream whose cluster id is ``cluster_id`` (the destination
        ``name``) is unhealthy: relaying from it would loop."""
        self._refused = (cluster_id, name)

    def cluster_ids(self) -> dict[str, str]:
        """The cluster id of every upstream that answers now (asked now)."""
        for name in self.relay.sources:
            self._partition_counts(name)
        with self._lock:
            return dict(self._cluster_ids)

    def states(self) -> dict[str, UpstreamState]:
        with self._lock:
            return dict(self._states)

    def partitions(self) -> dict[str, int] | None:
        """Partition count of every relayed topic, from the first healthy upstream."""
        for name in self.relay.sources:
            counts = self._partition_counts(name)
            if counts is not None:
                return counts
        return None

    def admin(self, upstream: str) -> SharedAdmin:
        return self._admins[upstream]

    def check_all(self) -> dict[str, UpstreamState]:
        for name in self.relay.sources:
            state = self._check(name)
            with self._lock:
                before = self._states.get(name)
                self._states[name] = state
            if before is None or before.healthy != state.healthy:
                if state.healthy:
                    log.info("upstream %s is healthy", name)
                else:
                    log.warning("upstream %s is unhealthy: %s", name, state.problem)
            if self._on_state is not None:
                self._on_state(name, state)
        return self.states()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="relay-health", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop checking and let go of the admin clients (a client of a cluster that is
        gone keeps reconnecting, and logging so, for as long as it exists)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._timeout * 2 + 5)
        self._admins.clear()

    def liveness(self) -> CheckResult:
        """The checking thread turns (each turn's checks have bounded timeouts)."""
        if self._thread is None:
            return CheckResult("upstream-checks", True, "not started yet")
        if not self._thread.is_alive() and not self._stop.is_set():
            return CheckResult("upstream-checks", False, "thread not running")
        return self._heartbeat.check()

    def _loop(self) -> None:
        while not self._stop.wait(self.relay.health_check_interval):
            self._heartbeat.beat()
            try:
                self.check_all()
            except Exception:  # a check must never end the checking
                log.exception("health check failed")

    def _partition_counts(self, name: str) -> dict[str, int] | None:
        try:
            metadata = self._admins[name].call(
                lambda admin: admin.list_topics(timeout=self._timeout)
            )
        except KafkaException:
            return None
        if metadata.cluster_id:
            with self._lock:
                self._cluster_ids[name] = metadata.cluster_id
        counts = {}
        for topic in self._topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                return None
            counts[topic] = len(described.partitions)
        return counts

    def _log_ends(
        self, admin: AdminClient, requests: dict[Any, Any]
    ) -> dict[TopicPartitionKey, int]:
        futures = admin.list_offsets(
            requests, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self._timeout
        )
        return {
            (tp.topic, tp.partition): future.result(timeout=self._timeout).offset
            for tp, future in futures.items()
        }

    def _check(self, name: str) -> UpstreamState:
        counts = self._partition_counts(name)
        with self._lock:
            cluster_id = self._cluster_ids.get(name)
        if self._refused is not None and cluster_id == self._refused[0]:
            return UpstreamState(
                False,
                problem=f"it is the destination {self._refused[1]!r} under another name "
                f"(cluster id {cluster_id}): relaying from it would loop",
            )
        if counts is None:
            return UpstreamState(False, problem="no metadata, or a relayed topic is missing")
        requests: dict[Any, Any] = {
            TopicPartition(t, p, 0): OffsetSpec.latest()
            for t, n in counts.items()
            for p in range(n)
        }
        try:
            ends = self._admins[name].call(lambda admin: self._log_ends(admin, requests))
        except Exception as exc:
            return UpstreamState(False, problem=check_failure("end offsets", exc, self._timeout))
        return UpstreamState(True, ends)
