"""``replicator status``: where each partition stands, from the outside.

It only reads: the source cluster's log ends, the segment listing of the source region's
bucket, and ingress's resume point (its checkpoint and the destination partition's tail,
see :mod:`replicator.core.kafka.checkpoints`). It never joins a consumer group and works while the
services run and when they are down: a cluster that does not answer within a few seconds
is reported as unreachable and the columns that need it stay empty.

Whether ingress is being throttled by the destination's brokers (a client quota on its
user) is read from the same checkpoint: each records the seconds its last transaction
with records was throttled (:mod:`replicator.core.kafka.throttling`), and the state
column says so for :data:`THROTTLE_RECENT` after.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.core.aws.errors import StorageError
from replicator.core.config import Config
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.selection import exported_end
from replicator.core.segments.store import SegmentStore
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)

REACH_TIMEOUT = 5.0

LOOKUPS = 8
"""Look-ups in flight at once (threads of one ``status``)."""
THROTTLE_RECENT = 600.0
"""Seconds after its checkpoint that a throttled transaction is shown: throttling is said
of a service writing now, not of one that has been idle since."""


@dataclass
class PartitionStatus:
    region: str
    topic: str
    partition: int | None
    """None: no partition could be listed (everything that would say is unreachable)."""
    source_end: int | None = None
    """Log end offset of the source partition (None: cluster unreachable)."""
    exported_end: int | None = None
    """Offset after the last one covered by a segment."""
    segments: dict[int, int] = field(default_factory=dict)
    """Segment count per level."""
    last_export_time: float | None = None
    replayed_end: int | None = None
    """Next source offset ingress will replay."""
    replayed_time: float | None = None
    destination_topic: str | None = None
    halted: str = ""
    throttled: float = 0.0
    """Seconds the destination's brokers throttled ingress's writer in its last
    transaction with records, as its latest checkpoint says (a client quota on ingress's
    user); 0: not throttled."""
    notes: list[str] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    """Column -> what could not be reached to fill it (``source end``, ``exported``,
    ``replayed``)."""

    @property
    def egress_lag_records(self) -> int | None:
        if self.source_end is None:
            return None
        return max(0, self.source_end - (self.exported_end or 0))

    @property
    def ingress_lag_records(self) -> int | None:
        if self.exported_end is None or self.replayed_end is None:
            return None
        return max(0, self.exported_end - self.replayed_end)

    def lag_seconds(self, now: float) -> tuple[float | None, float | None]:
        """Seconds since the step last made progress, or 0 when it is caught up."""
        egress = None
        if self.egress_lag_records is not None:
            egress = (
                0.0
                if self.egress_lag_records == 0
                else (now - self.last_export_time if self.last_export_time else None)
            )
        ingress = None
        if self.ingress_lag_records is not None:
            ingress = (
                0.0
                if self.ingress_lag_records == 0
                else (now - self.replayed_time if self.replayed_time else None)
            )
        return egress, ingress

    def to_dict(self, now: float) -> dict[str, Any]:
        data = asdict(self)
        data["segments"] = {str(k): v for k, v in sorted(self.segments.items())}
        data["egress_lag_records"] = self.egress_lag_records
        data["ingress_lag_records"] = self.ingress_lag_records
        data["egress_lag_seconds"], data["ingress_lag_seconds"] = self.lag_seconds(now)
        return data


def _sources(config: Config) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if config.egress:
        found += [(config.egress.region, t) for t in config.egress.topics]
    if config.ingress:
        from ingress.sources import concrete_sources

        store = SegmentStore.for_region(config, config.ingress.region, lookup=True)
        try:
            sources = concrete_sources(config.ingress, store.list_topics)
        except StorageError as exc:
            log.warning("cannot list source topics in %s: %s", store.bucket, exc)
            sources = [s for s in config.ingress.sources if s.topic]
        found += [(s.region, s.topic) for s in sources]
    return sorted(set(found))


def log_ends(config: Config, region: str, topic: str) -> dict[int, int] | None:
    """The log end of each partition of ``topic`` in ``region`` ({}: no such topic; None:
    the cluster did not answer)."""
    admin = AdminClient(client_config(config.region(region).kafka, socket_timeout_ms=3000))
    try:
        metadata = admin.list_topics(topic, timeout=REACH_TIMEOUT)
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            return {}
        requests = {TopicPartition(topic, p): OffsetSpec.latest() for p in described.partitions}
        futures = admin.list_offsets(requests, request_timeout=REACH_TIMEOUT)
        return {tp.partition: f.result().offset for tp, f in futures.items()}
    except KafkaException:
        return None


def _stores(config: Config, region: str) -> list[SegmentStore]:
    """The source region's bucket, then the ingress region's replicated copy."""
    stores = [SegmentStore.for_region(config, region, lookup=True)]
    if config.ingress and config.ingress.region != region:
        stores.append(SegmentStore.for_region(config, config.ingress.region, lookup=True))
    return stores


def _partitions(store: SegmentStore, region: str, topic: str) -> list[int] | None:
    """The partitions ``store`` holds segments of (None: the bucket did not answer)."""
    try:
        return store.list_partitions(region, topic)
    except StorageError as exc:
        log.warning("cannot list segments of %s/%s in %s: %s", region, topic, store.bucket, exc)
        return None


def _destination_answers(config: Config) -> bool:
    """Whether ingress's cluster answers (asked once for every row)."""
    if config.ingress is None:
        return False
    kafka = client_config(config.region(config.ingress.region).kafka, socket_timeout_ms=3000)
    try:
        AdminClient(kafka).list_topics(timeout=REACH_TIMEOUT)
    except KafkaException:
        return False
    return True


def collect(config: Config) -> list[PartitionStatus]:
    """One row per source partition, whatever does not answer: a row per configured topic
    when no partition can be listed, with what could not be reached in the columns it
    would fill. Segments are read from the source region's bucket, or from the ingress
    region's replicated copy where the source bucket has none.

    Every cluster, bucket and partition is asked at once (at most :data:`LOOKUPS` in
    flight): in an outage a status takes about one timeout, not one per topic, bucket and
    partition. Tasks never wait on each other, so the pool cannot deadlock."""
    with ThreadPoolExecutor(LOOKUPS, thread_name_prefix="status") as pool:
        destination = pool.submit(_destination_answers, config)
        asked = [
            (
                region,
                topic,
                pool.submit(log_ends, config, region, topic),
                [(store, pool.submit(_partitions, store, region, topic)) for store in stores],
            )
            for region, topic in _sources(config)
            for stores in [_stores(config, region)]
        ]
        rows: list[tuple[PartitionStatus, SegmentStore | None]] = []
        for region, topic, ends, listings in asked:
            listed = [(store, partitions.result()) for store, partitions in listings]
            rows += _rows(region, topic, ends.result(), listed)
        answers = destination.result()
        filled = [pool.submit(_fill, config, row, store, answers) for row, store in rows]
        for done in filled:
            done.result()
    return [row for row, _ in rows]


def _rows(
    region: str,
    topic: str,
    ends: dict[int, int] | None,
    listed_by_store: list[tuple[SegmentStore, list[int] | None]],
) -> list[tuple[PartitionStatus, SegmentStore | None]]:
    """A row per partition known to the source cluster or a bucket, each with the store
    its segments are read from (the source bucket wins)."""
    listed: dict[int, SegmentStore] = {}
    unlisted = [f"bucket {store.bucket}" for store, found in listed_by_store if found is None]
    for store, found in reversed(listed_by_store):
        listed.update({p: store for p in found or ()})
    known: list[int | None] = [*sorted(set(listed) | set(ends or {}))] or [None]
    rows: list[tuple[PartitionStatus, SegmentStore | None]] = []
    for partition in known:
        row = PartitionStatus(region, topic, partition)
        if ends is None:
            row.unreachable["source end"] = f"Kafka of {region}"
        else:
            row.source_end = None if partition is None else ends.get(partition)
        if partition not in listed and len(unlisted) == len(listed_by_store):
            row.unreachable["exported"] = ", ".join(unlisted)
        if partition is None and not row.unreachable:
            row.notes.append("no partition yet: the topic has none, nothing is exported")
        rows.append((row, listed.get(partition) if partition is not None else None))
    return rows


def _fill(
    config: Config, row: PartitionStatus, store: SegmentStore | None, destination_answers: bool
) -> None:
    if store is not None:
        _exported(row, store)
    if row.partition is not None:
        _replayed(config, row, destination_answers)


def _exported(row: PartitionStatus, store: SegmentStore) -> None:
    assert row.partition is not None
    try:
        segments = store.list_segments(row.region, row.topic, row.partition)
    except StorageError as exc:
        row.unreachable["exported"] = f"bucket {store.bucket}"
        log.warning("cannot list segments of %s in %s: %s", row.partition, store.bucket, exc)
        return
    for segment in segments:
        level = segment.segment_key.level
        row.segments[level] = row.segments.get(level, 0) + 1
    row.exported_end = exported_end(s.segment_key for s in segments)
    stamps = [s.last_modified.timestamp() for s in segments if s.last_modified]
    row.last_export_time = max(stamps) if stamps else None


def _replayed(config: Config, row: PartitionStatus, destination_answers: bool) -> None:
    ingress = config.ingress
    if ingress is None:
        return
    found = ingress.match(row.region, row.topic)
    if found is None:
        return
    source = found[1]
    row.destination_topic = source.destination
    if not destination_answers:
        row.unreachable["replayed"] = f"Kafka of {ingress.region}"
        return
    kafka = client_config(config.region(ingress.region).kafka, socket_timeout_ms=3000)
    checkpoints = CheckpointStore(kafka, ingress.checkpoint_topic, ingress.checkpoint_partitions)
    assert row.partition is not None
    try:
        point = checkpoints.resume_point(
            WriteTarget(
                SourcePartition(row.region, row.topic, row.partition),
                source.destination,
                row.partition,
            )
        )
    except Exception as exc:
        row.notes.append(f"ingress position unknown: {exc}")
        return
    row.replayed_end = point.next_source_offset
    if point.checkpoint is not None:
        row.replayed_time = point.checkpoint.time
        row.halted = point.checkpoint.halted
        row.throttled = max(0.0, point.checkpoint.throttled)


def render(rows: list[PartitionStatus], now: float | None = None) -> str:
    now = time.time() if now is None else now
    header = (
        "topic",
        "part",
        "source end",
        "exported",
        "segments",
        "replayed",
        "egress lag",
        "ingress lag",
        "state",
    )
    lines = [header]
    for row in rows:
        egress_s, ingress_s = row.lag_seconds(now)
        segments = " ".join(f"L{k}:{v}" for k, v in sorted(row.segments.items())) or "-"
        state = f"HALTED: {row.halted}" if row.halted else "; ".join(_notes(row, now))
        state = state or ("not known: see unreachable" if row.unreachable else "ok")
        lines.append(
            (
                f"{row.region}/{row.topic}",
                "?" if row.partition is None else str(row.partition),
                _cell(row, "source end", row.source_end),
                _cell(row, "exported", row.exported_end),
                segments,
                _cell(row, "replayed", row.replayed_end),
                _lag(row.egress_lag_records, egress_s),
                _lag(row.ingress_lag_records, ingress_s),
                state,
            )
        )
    # Topic names listed from a bucket and halt reasons are the outside's text: escaped.
    cells = [[escape(cell) for cell in line] for line in lines]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def _notes(row: PartitionStatus, now: float) -> list[str]:
    """The state column's notes, with the throttle of ingress's last transaction if its
    checkpoint is recent (:data:`THROTTLE_RECENT`)."""
    age = None if row.replayed_time is None else max(0.0, now - row.replayed_time)
    if row.throttled <= 0 or age is None or age > THROTTLE_RECENT:
        return row.notes
    return [
        *row.notes,
        f"throttled: the broker held ingress back {row.throttled:.1f} s in its last "
        f"transaction, {age:.0f} s ago (a client quota)",
    ]


def _cell(row: PartitionStatus, column: str, value: int | None) -> str:
    what = row.unreachable.get(column)
    return f"unreachable: {what}" if what else _num(value)


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _lag(records: int | None, seconds: float | None) -> str:
    if records is None:
        return "-"
    return f"{records} ({seconds:.0f}s)" if seconds is not None else f"{records}"
