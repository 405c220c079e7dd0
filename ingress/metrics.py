"""Ingress metrics (one registry per service instance)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from replicator.core.health import Health
from replicator.core.kafka.throttling import ThrottleCollector
from replicator.core.metrics import DEFAULT_HOST, serve

LABELS = ["region", "topic", "partition"]


class IngressMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records = Counter(
            "replicator_ingress_records", "Records produced to the destination", LABELS, registry=r
        )
        self.bytes = Counter(
            "replicator_ingress_bytes", "Key and value bytes produced", LABELS, registry=r
        )
        self.records_filtered = Counter(
            "replicator_ingress_records_filtered",
            "Records the source's filters dropped (their offsets still count as replayed)",
            LABELS,
            registry=r,
        )
        self.segments_read = Counter(
            "replicator_ingress_segments_read", "Segments replayed completely", LABELS, registry=r
        )
        self.checkpoint_offset = Gauge(
            "replicator_ingress_checkpoint_offset",
            "Next source offset in the last checkpoint",
            LABELS,
            registry=r,
        )
        self.lag_records = Gauge(
            "replicator_ingress_lag_records",
            "Offsets in known segments not yet replayed",
            LABELS,
            registry=r,
        )
        self.lag_seconds = Gauge(
            "replicator_ingress_lag_seconds",
            "Now minus the source timestamp of the last record produced",
            LABELS,
            registry=r,
        )
        self.late_segments = Counter(
            "replicator_ingress_late_segments",
            "Times a partition waited for a missing segment",
            LABELS,
            registry=r,
        )
        self.lost_segments = Counter(
            "replicator_ingress_lost_segments",
            "Missing segments given up on after lost_segment_timeout",
            LABELS,
            registry=r,
        )
        self.source_data_loss = Counter(
            "replicator_ingress_source_data_loss_segments",
            "Segments replayed that cover offsets lost at the source before export",
            LABELS,
            registry=r,
        )
        self.halted = Gauge(
            "replicator_ingress_partition_halted",
            "1 while a partition is halted (corrupt or lost segment)",
            LABELS,
            registry=r,
        )
        self.sqs_received = Counter(
            "replicator_ingress_sqs_messages_received",
            "SQS messages received",
            ["region"],
            registry=r,
        )
        self.sqs_invalid = Counter(
            "replicator_ingress_sqs_messages_invalid",
            "SQS messages that are not S3 notifications (left for the dead-letter queue)",
            ["region"],
            registry=r,
        )
        self.sqs_reader_restarts = Counter(
            "replicator_ingress_sqs_reader_restarts",
            "Times the SQS notification reader died and was started again",
            ["region"],
            registry=r,
        )
        self.events_invalid = Counter(
            "replicator_ingress_events_invalid",
            "Records on the segment-events topic that are not events (skipped)",
            ["region"],
            registry=r,
        )
        self.owned = Gauge(
            "replicator_ingress_owned_partitions",
            "Source partitions this instance replays",
            ["region"],
            registry=r,
        )
        self.ready_partitions = Gauge(
            "replicator_ingress_ready_partitions",
            "Source partitions this instance owns whose worker is not halted",
            ["region"],
            registry=r,
        )
        self.open_writers = Gauge(
            "replicator_ingress_open_writers",
            "Exactly-once writers open in this process (at most [ingress] max_open_writers)",
            ["region"],
            registry=r,
        )
        self.writer_opens = Counter(
            "replicator_ingress_writer_opens",
            "Times a partition's writer was opened (again after an idle spell or when "
            "another partition needed its slot: many per minute mean max_open_writers is "
            "too low for the partitions busy at once)",
            ["region", "topic", "partition"],
            registry=r,
        )
        self.fenced = Counter(
            "replicator_ingress_writer_fenced",
            "Times a partition's writer was fenced while its partition was still owned "
            "(then re-opened)",
            ["region", "topic", "partition"],
            registry=r,
        )
        self.configs_refused = Counter(
            "replicator_ingress_destination_configs_refused",
            "Config changes a topic descriptor asked of an existing destination topic that "
            "would delete data sooner (lower retention, another cleanup.policy): not made",
            ["region", "topic", "config"],
            registry=r,
        )
        self.group_partitions_moved = Counter(
            "replicator_ingress_group_offsets_moved",
            "Destination group partitions whose offsets the offset sync moved forward",
            ["group"],
            registry=r,
        )
        self.groups_behind = Gauge(
            "replicator_ingress_group_offsets_behind_partitions",
            "Partitions where a group's source offset is beyond what was replayed",
            ["group"],
            registry=r,
        )
        r.register(ThrottleCollector("ingress"))
        self._server: Any = None

    def serve(self, port: int, host: str = DEFAULT_HOST, health: Health | None = None) -> int:
        """Serve the metrics and ``health``; the port bound."""
        self._server = serve(self.registry, port, "ingress", host, health)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
