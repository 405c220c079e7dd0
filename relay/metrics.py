"""The relay's Prometheus metrics (``replicator_relay_…``)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from replicator.core.health import Health
from replicator.core.kafka.throttling import ThrottleCollector
from replicator.core.metrics import DEFAULT_HOST, serve

LABELS = ["topic", "partition"]
ERROR_KINDS = ("transport", "timeout", "fenced", "too_large", "data_loss", "other")
"""The fixed values of the ``error`` label of the error counters."""


class RelayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records = Counter("replicator_relay_records", "Records relayed", LABELS, registry=r)
        self.bytes = Counter(
            "replicator_relay_bytes", "Key and value bytes relayed", LABELS, registry=r
        )
        self.filtered = Counter(
            "replicator_relay_records_filtered",
            "Records the topic's filters dropped (their offsets still count as relayed)",
            LABELS,
            registry=r,
        )
        self.lag_records = Gauge(
            "replicator_relay_lag_records",
            "Records behind the current upstream's log end",
            LABELS,
            registry=r,
        )
        self.lag_seconds = Gauge(
            "replicator_relay_lag_seconds",
            "Now minus the timestamp of the last record relayed",
            LABELS,
            registry=r,
        )
        self.current_source = Gauge(
            "replicator_relay_current_source",
            "1 for the upstream a topic's partitions relay from (the last one chosen)",
            ["topic", "source"],
            registry=r,
        )
        self.source_healthy = Gauge(
            "replicator_relay_source_healthy",
            "1 while the upstream answers its health checks",
            ["source"],
            registry=r,
        )
        self.switches = Counter(
            "replicator_relay_source_switches",
            "Times a partition changed upstream, by reason (failure, lag)",
            ["topic", "reason"],
            registry=r,
        )
        self.lag_exceeded = Counter(
            "replicator_relay_lag_threshold_exceeded",
            "Times a partition's upstream trailed another by more than lag_threshold",
            ["topic"],
            registry=r,
        )
        self.fetch_errors = Counter(
            "replicator_relay_fetch_errors",
            "Errors reading from an upstream, by kind",
            ["source", "error"],
            registry=r,
        )
        self.produce_errors = Counter(
            "replicator_relay_produce_errors",
            "Errors writing to the destination, by kind",
            ["error"],
            registry=r,
        )
        self.halted = Gauge(
            "replicator_relay_partition_halted",
            "1 while a partition is halted (upstreams differ, a filter failed, data loss)",
            LABELS,
            registry=r,
        )
        self.owned = Gauge(
            "replicator_relay_owned_partitions",
            "Source partitions this instance relays",
            [],
            registry=r,
        )
        self.ready_partitions = Gauge(
            "replicator_relay_ready_partitions",
            "Source partitions this instance relays whose worker is not halted",
            [],
            registry=r,
        )
        r.register(ThrottleCollector("relay"))
        self._server: Any = None

    def serve(self, port: int, host: str = DEFAULT_HOST, health: Health | None = None) -> None:
        self._server = serve(self.registry, port, "relay", host, health)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
