"""Egress metrics, served by the driver process.

Counters of what was written come from the driver state the sink's ``commit`` keeps
(:mod:`egress.driver_state`); positions (committed offset, high watermark, lag) are read
from Kafka by a background thread every few seconds, so a scrape never waits on a broker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from egress.catalog import SourceCatalog
from egress.driver_state import DriverState, PartitionStats
from replicator.core.config import Config, required
from replicator.core.errors import ReplicatorError
from replicator.core.health import Health
from replicator.core.metrics import DEFAULT_HOST, serve

log = logging.getLogger(__name__)

REFRESH_INTERVAL = 5.0
LABELS = ["region", "topic", "partition"]


class EgressMetrics(Collector):
    def __init__(self, config: Config, catalog: SourceCatalog) -> None:
        self.egress = required(config, "egress")
        self.region = self.egress.region
        self.state = DriverState(self.egress.state_dir)
        self._catalog = catalog
        self._positions: dict[tuple[str, int], tuple[int | None, int]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.registry = CollectorRegistry()
        self.batch_duration = Histogram(
            "replicator_egress_batch_duration_seconds",
            "Duration of egress micro-batches",
            ["region"],
            registry=self.registry,
            buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
        )
        self.registry.register(self)

    def serve(self, port: int, host: str = DEFAULT_HOST, health: Health | None = None) -> None:
        self._server = serve(self.registry, port, "egress", host, health)
        self._thread = threading.Thread(target=self._loop, name="egress-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def batch_completed(self, seconds: float) -> None:
        self.batch_duration.labels(self.region).observe(seconds)

    def _loop(self) -> None:
        while not self._closed.wait(REFRESH_INTERVAL):
            self.refresh()

    def refresh(self) -> None:
        """Read committed offsets and high watermarks from Kafka."""
        try:
            tps = self._catalog.partitions()
            marks = self._catalog.watermarks(tps)
            committed = self._catalog.committed(tps)
        except ReplicatorError as exc:
            log.warning("could not refresh egress positions: %s", exc)
            return
        with self._lock:
            self._positions = {tp: (committed.get(tp), marks[tp][1]) for tp in tps}

    def collect(self) -> Iterator[Metric]:
        _, stats = self.state.read_partitions()
        families = {
            "records": CounterMetricFamily(
                "replicator_egress_records", "Records written to level-0 segments", labels=LABELS
            ),
            "bytes": CounterMetricFamily(
                "replicator_egress_bytes",
                "Record bytes (key, value, headers) written",
                labels=LABELS,
            ),
            "segments": CounterMetricFamily(
                "replicator_egress_segments", "Level-0 segments written", labels=LABELS
            ),
        }
        for (topic, partition), entry in sorted(stats.items()):
            labels = [self.region, topic, str(partition)]
            for name, family in families.items():
                family.add_metric(labels, float(getattr(entry, name)))
        yield from families.values()
        yield from self._positions_metrics(stats)
        yield from self._data_loss_metrics()

    def _positions_metrics(self, stats: dict[tuple[str, int], PartitionStats]) -> Iterator[Metric]:
        committed = GaugeMetricFamily(
            "replicator_egress_committed_offset",
            "Next offset to export, as committed by the egress consumer group",
            labels=LABELS,
        )
        high = GaugeMetricFamily(
            "replicator_egress_high_watermark_offset",
            "Log end offset of the source partition",
            labels=LABELS,
        )
        lag = GaugeMetricFamily(
            "replicator_egress_lag_records",
            "Offsets in the source log not yet exported",
            labels=LABELS,
        )
        with self._lock:
            positions = dict(self._positions)
        for (topic, partition), (done, end) in sorted(positions.items()):
            labels = [self.region, topic, str(partition)]
            exported = stats.get((topic, partition))
            position = done if done is not None else (exported.next_offset if exported else None)
            high.add_metric(labels, float(end))
            if position is not None:
                committed.add_metric(labels, float(position))
                lag.add_metric(labels, float(max(0, end - position)))
        yield from (committed, high, lag)

    def _data_loss_metrics(self) -> Iterator[Metric]:
        events = CounterMetricFamily(
            "replicator_egress_data_loss_events",
            "Times offsets were found gone before export",
            labels=LABELS,
        )
        offsets = CounterMetricFamily(
            "replicator_egress_data_loss_offsets",
            "Offsets that will never be exported",
            labels=LABELS,
        )
        totals: dict[tuple[str, int], list[int]] = {}
        for event in self.state.data_loss_events():
            entry = totals.setdefault((event["topic"], int(event["partition"])), [0, 0])
            entry[0] += 1
            entry[1] += max(0, int(event["last"]) - int(event["first"]) + 1)
        for (topic, partition), (count, lost) in sorted(totals.items()):
            labels = [self.region, topic, str(partition)]
            events.add_metric(labels, float(count))
            offsets.add_metric(labels, float(lost))
        yield from (events, offsets)
