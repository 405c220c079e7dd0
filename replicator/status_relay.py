"""``replicator status``, the relay's rows: where each relayed source partition stands.

A row per partition of each ``[[relay.topics]]`` source topic: the upstream's log end,
the next source offset the relay will write (its resume point: the latest checkpoint the
relay's writer wrote in ``[relay] checkpoint_topic`` and the destination partition's
provenance tail, :mod:`replicator.core.kafka.checkpoints`), the lag between them, and a
state. Like the other rows it only reads and never joins a group: an upstream or a
destination that does not answer within a few seconds is reported as unreachable.

Which upstream: in ``single`` mode the relay reads the first of ``sources`` only, so only
that one is asked; in ``failover`` mode the upstreams are identical (the same records at
the same offsets): all are asked at once, and the first in order of preference that
answered gives the log ends, its name shown. Checkpoint keys name ``[relay] origin``, as
the relay's writers do. Rows come in the order of ``[[relay.topics]]``, partitions
ascending.

Whether the relay is being throttled by the destination's brokers is read from its
checkpoint, as for ingress (:data:`replicator.status.THROTTLE_RECENT`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from replicator.core.config import Config
from replicator.core.config.relay import RelayConfig, RelayTopic
from replicator.core.kafka.checkpoints import CheckpointStore, ResumePoint, WriteTarget
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.untrusted_text import escape
from replicator.status import (
    LOOKUPS,
    REACH_TIMEOUT,
    THROTTLE_RECENT,
    PartitionStatus,
    collect,
    log_ends,
)


@dataclass
class RelayPartitionStatus:
    origin: str
    """The name the relay's checkpoints give the upstream offsets (``[relay] origin``)."""
    topic: str
    """The relayed source topic."""
    partition: int | None
    """None: no upstream could list the topic's partitions."""
    destination_topic: str
    destination_partition: int | None
    upstream: str | None = None
    """The upstream whose log end is shown (None: none answered)."""
    upstream_end: int | None = None
    relayed_end: int | None = None
    """Next source offset the relay will write (None: nothing relayed yet)."""
    relayed_time: float | None = None
    """When the relay's latest checkpoint of the partition was written."""
    has_checkpoint: bool = False
    halted: str = ""
    throttled: float = 0.0
    """Seconds the destination's brokers throttled the relay's writer in its last
    transaction with records, as its latest checkpoint says; 0: not throttled."""
    notes: list[str] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    """Column -> what could not be reached to fill it (``upstream end``, ``relayed``)."""
    service: str = "relay"
    """Tells these rows from egress's and ingress's in ``--json``."""

    @property
    def lag_records(self) -> int | None:
        return relay_lag(self.upstream_end, self.relayed_end)

    def to_dict(self, now: float) -> dict[str, Any]:
        data = asdict(self)
        data["lag_records"] = self.lag_records
        data["state"] = relay_state(self, now)
        return data


def relay_lag(upstream_end: int | None, relayed_end: int | None) -> int | None:
    """Records the relay has still to write (None: either end is not known). Pure."""
    if upstream_end is None or relayed_end is None:
        return None
    return max(0, upstream_end - relayed_end)


def relay_state(row: RelayPartitionStatus, now: float) -> str:
    """The state column: halted; or not known, no checkpoint yet, behind or caught up;
    then the throttle of the relay's last transaction if its checkpoint is recent. Pure."""
    if row.halted:
        return f"HALTED: {row.halted}"
    lag = row.lag_records
    if row.unreachable and lag is None:
        main = "not known: see unreachable"
    elif row.relayed_end is None and not row.has_checkpoint:
        main = "no checkpoint yet"
    elif lag is None:
        main = "not known"
    else:
        main = f"behind by {lag}" if lag > 0 else "caught up"
    parts = [*row.notes, main]
    age = None if row.relayed_time is None else max(0.0, now - row.relayed_time)
    if row.throttled > 0 and age is not None and age <= THROTTLE_RECENT:
        parts.append(
            f"throttled: the broker held the relay back {row.throttled:.1f} s in its last "
            f"transaction, {age:.0f} s ago (a client quota)"
        )
    return "; ".join(parts)


def build_rows(
    relay: RelayConfig,
    topic: RelayTopic,
    upstream: str | None,
    ends: dict[int, int] | None,
    tried: list[str],
) -> list[RelayPartitionStatus]:
    """A row per partition ``upstream`` lists for ``topic`` (``ends`` None: no upstream
    of ``tried`` answered; one row, partition ``?``). Pure."""
    partitions: list[int | None] = [*sorted(ends)] if ends else [None]
    rows = []
    for partition in partitions:
        row = RelayPartitionStatus(
            relay.origin,
            topic.source_topic,
            partition,
            topic.destination,
            destination_partition(topic, partition),
            upstream=upstream,
        )
        if ends is None:
            row.unreachable["upstream end"] = "Kafka of " + ", ".join(tried)
        elif partition is None:
            row.notes.append("no partition yet: the upstream topic has none")
        else:
            row.upstream_end = ends[partition]
        rows.append(row)
    return rows


def destination_partition(topic: RelayTopic, partition: int | None) -> int | None:
    """The destination partition the relay writes ``partition`` of ``topic`` into. Pure."""
    if topic.destination_partition is not None:
        return topic.destination_partition
    return partition


def upstreams_to_ask(relay: RelayConfig) -> list[str]:
    """``single``: the first source only (the one relayed from); ``failover``: all, in
    order of preference. Pure."""
    return list(relay.sources) if relay.mode == "failover" else list(relay.sources[:1])


def fill_from_checkpoint(row: RelayPartitionStatus, point: ResumePoint) -> None:
    """The relay's resume point into ``row``. Pure."""
    row.relayed_end = point.next_source_offset
    if point.checkpoint is not None:
        row.has_checkpoint = True
        row.relayed_time = point.checkpoint.time
        row.halted = point.checkpoint.halted
        row.throttled = max(0.0, point.checkpoint.throttled)


def collect_relay(config: Config) -> list[RelayPartitionStatus]:
    """The relay's rows (none without ``[relay]``), every upstream and partition asked at
    once (at most :data:`LOOKUPS` in flight; tasks never wait on each other, so the pool
    cannot deadlock)."""
    relay = config.relay
    if relay is None:
        return []
    asked_upstreams = upstreams_to_ask(relay)
    with ThreadPoolExecutor(LOOKUPS, thread_name_prefix="status-relay") as pool:
        destination = pool.submit(_destination_topics, config, relay.destination)
        asked = [
            (
                topic,
                [
                    (u, pool.submit(log_ends, config, u, topic.source_topic))
                    for u in asked_upstreams
                ],
            )
            for topic in relay.topics
        ]
        rows: list[RelayPartitionStatus] = []
        for topic, answers in asked:
            upstream, ends = first_answer([(u, answer.result()) for u, answer in answers])
            rows += build_rows(relay, topic, upstream, ends, asked_upstreams)
        topics = destination.result()
        for done in [pool.submit(_relayed, config, relay, row, topics) for row in rows]:
            done.result()
    return rows


def collect_everything(config: Config) -> tuple[list[PartitionStatus], list[RelayPartitionStatus]]:
    """Egress's and ingress's rows (:func:`replicator.status.collect`) and the relay's,
    asked side by side: in an outage ``status`` waits out one timeout, not one for each."""
    with ThreadPoolExecutor(1, thread_name_prefix="status-relay-rows") as pool:
        relayed = pool.submit(collect_relay, config)
        rows = collect(config)
        return rows, relayed.result()


def _destination_topics(config: Config, region: str) -> set[str] | None:
    """The topics of the relay's destination cluster (None: it did not answer)."""
    kafka = client_config(config.region(region).kafka, socket_timeout_ms=3000)
    try:
        return set(AdminClient(kafka).list_topics(timeout=REACH_TIMEOUT).topics)
    except KafkaException:
        return None


def first_answer(
    answers: list[tuple[str, dict[int, int] | None]],
) -> tuple[str | None, dict[int, int] | None]:
    """The first upstream, in order of preference, that answered, and its log ends (None,
    None: none did). Every upstream is asked at once: in an outage that takes one timeout,
    not one per upstream. Pure."""
    for upstream, ends in answers:
        if ends is not None:
            return upstream, ends
    return None, None


def _relayed(
    config: Config, relay: RelayConfig, row: RelayPartitionStatus, topics: set[str] | None
) -> None:
    """The relay's resume point of ``row``, from the destination (``topics``: the
    destination's topics, None: it did not answer). Before the relay's first commit its
    checkpoint topic or the destination topic does not exist yet: nothing relayed."""
    if row.partition is None or row.destination_partition is None:
        return
    if topics is None:
        row.unreachable["relayed"] = f"Kafka of {relay.destination}"
        return
    if relay.checkpoint_topic not in topics or row.destination_topic not in topics:
        return
    kafka = client_config(config.region(relay.destination).kafka, socket_timeout_ms=3000)
    checkpoints = CheckpointStore(kafka, relay.checkpoint_topic, relay.checkpoint_partitions)
    target = WriteTarget(
        SourcePartition(relay.origin, row.topic, row.partition),
        row.destination_topic,
        row.destination_partition,
    )
    try:
        point = checkpoints.resume_point(target, kind="relay")
    except Exception as exc:
        row.notes.append(f"relay position unknown: {exc}")
        return
    fill_from_checkpoint(row, point)


def render_relay(rows: list[RelayPartitionStatus], now: float) -> str:
    """The relay's table (names and halt reasons escaped: the outside's text)."""
    header = ("relayed", "part", "into", "upstream", "upstream end", "relayed to", "lag", "state")
    lines = [header]
    for row in rows:
        part = "?" if row.partition is None else str(row.partition)
        into = "?" if row.destination_partition is None else str(row.destination_partition)
        lines.append(
            (
                f"{row.origin}/{row.topic}",
                part,
                f"{row.destination_topic}/{into}",
                row.upstream or "-",
                _cell(row, "upstream end", row.upstream_end),
                _cell(row, "relayed", row.relayed_end),
                "-" if row.lag_records is None else str(row.lag_records),
                relay_state(row, now),
            )
        )
    cells = [[escape(cell) for cell in line] for line in lines]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def _cell(row: RelayPartitionStatus, column: str, value: int | None) -> str:
    what = row.unreachable.get(column)
    if what:
        return f"unreachable: {what}"
    return "-" if value is None else str(value)
