"""``replicator failover``: is the destination ready to take over, and moving the
applications' consumer groups there.

Run in the destination region. It reports, per replicated partition, the destination
partition it is written into (the relay may merge several into one), how far the
destination has replayed and the RPO — what the source has that the destination does not —
and per consumer group and partition the committed source offset, the translated
destination offset and whether the translation is exact. With ``--apply`` it commits the
translated offsets of groups without members, forward only. The exit status is 0 only
when every group reported is ready: found, exact on every partition, and (with
``--apply``) committed.

Which groups: those named with ``--group``; without it, those ``[ingress]
consumer_groups`` (``[relay] consumer_groups``) names, the groups the running sync keeps
committed, never simply every group found in the bucket: anyone who can write to the
bucket can add a group's offsets object there. Group ids and names are escaped in the
text report (a group id may hold a newline or a terminal escape).

Through S3 (``[ingress]``) group offsets come from the objects egress exported into the
bucket, and the RPO compares the segments in the destination bucket with those in the
source region's bucket (when it answers; a destination bucket that fails to list a
partition leaves it unreachable, never empty). A group committed below the first record
replayed is exact when the replay began at or below it (see
:func:`~replicator.core.groups.translation.replayed_from`).

For a direct relay (``[relay]``) group offsets are read straight from the upstream
cluster and the RPO is the upstream's log end minus what was relayed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.core.aws.errors import StorageError
from replicator.core.config import Config, IngressSource, RelayConfig, required
from replicator.core.errors import ReplicatorError
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.plan import GroupPartition, commit_groups, with_replay_starts
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.selection import exported_end, lowest_start
from replicator.core.segments.store import SegmentStore, StoredSegment
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)

REACH_TIMEOUT = 5.0

LOOKUPS = 8
"""Look-ups in flight at once (threads of one ``failover``)."""


@dataclass
class PartitionReadiness:
    source: SourcePartition
    destination_topic: str
    destination_partition: int | None = None
    """The destination partition it is written into (None: the source partition's
    number, as ingress writes; the relay may merge several into one)."""
    replayed_until: int | None = None
    """Next source offset the destination will get (None: nothing yet)."""
    available_end: int | None = None
    """Offset after the last one the destination can still get (segments in its bucket,
    or what was relayed)."""
    source_end: int | None = None
    """Offset after the last one the source has exported (None: source unreachable)."""
    rpo_seconds: float | None = None
    halted: str = ""
    available_known: bool = True
    """False: the destination bucket's listing of the partition failed; what the
    destination can get, and so the RPO, are unknown (not nothing)."""

    @property
    def target(self) -> WriteTarget:
        partition = self.destination_partition
        return WriteTarget(
            self.source,
            self.destination_topic,
            self.source.partition if partition is None else partition,
        )

    @property
    def rpo_records(self) -> int | None:
        if self.source_end is None or not self.available_known:
            return None
        return max(0, self.source_end - (self.available_end or 0))


@dataclass
class GroupReadiness:
    group: str
    rows: list[GroupPartition] = field(default_factory=list)
    active: bool = False
    moved: int | None = None
    """Partitions committed by ``--apply`` (None: not applied)."""

    @property
    def exact(self) -> bool:
        return bool(self.rows) and all(r.translation.exact for r in self.rows)

    def ready(self, applied: bool) -> bool:
        return self.exact and not self.active and (not applied or self.moved is not None)


@dataclass
class FailoverReport:
    destination_region: str
    partitions: list[PartitionReadiness]
    groups: list[GroupReadiness]
    applied: bool = False
    unreachable: list[str] = field(default_factory=list)
    """What could not be reached, and which part of the report it leaves out."""
    notes: list[str] = field(default_factory=list)
    """What was reached and explains a figure (a checkpoint topic not created yet)."""

    @property
    def ready(self) -> bool:
        """Every group ready, at least one group (none found is no assurance), and
        everything reached (what was not may hide a group or a gap)."""
        return (
            bool(self.groups)
            and not self.unreachable
            and all(g.ready(self.applied) for g in self.groups)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "destination_region": self.destination_region,
            "ready": self.ready,
            "applied": self.applied,
            "unreachable": self.unreachable,
            "notes": self.notes,
            "partitions": [
                {
                    "region": p.source.origin,
                    "topic": p.source.topic,
                    "partition": p.source.partition,
                    "destination_topic": p.destination_topic,
                    "destination_partition": p.target.destination_partition,
                    "replayed_until": p.replayed_until,
                    "available_end": p.available_end,
                    "source_end": p.source_end,
                    "rpo_records": p.rpo_records,
                    "rpo_seconds": p.rpo_seconds,
                    "halted": p.halted,
                }
                for p in self.partitions
            ],
            "groups": [
                {
                    "group": g.group,
                    "ready": g.ready(self.applied),
                    "active": g.active,
                    "moved": g.moved,
                    "partitions": [
                        {
                            "topic": r.target.destination_topic,
                            "partition": r.target.destination_partition,
                            "source_offset": r.translation.source_offset,
                            "destination_offset": r.translation.destination_offset,
                            "exact": r.translation.exact,
                        }
                        for r in g.rows
                    ],
                }
                for g in self.groups
            ],
        }


def rpo(
    source: list[StoredSegment], destination: list[StoredSegment]
) -> tuple[int | None, float | None]:
    """(records, seconds) the source bucket holds beyond the destination bucket. Seconds:
    from when the source wrote the newest segment the destination also has to when it wrote
    its newest one. Pure."""
    source_end = exported_end(s.segment_key for s in source)
    if source_end is None:
        return None, None
    have = exported_end(s.segment_key for s in destination) or 0
    if have >= source_end:
        return 0, 0.0
    written = [s for s in source if s.last_modified is not None]
    newest = max((s.last_modified.timestamp() for s in written if s.last_modified), default=None)
    held = [
        s.last_modified.timestamp() for s in written if s.last_modified and s.segment_key.end < have
    ]
    if newest is None:
        return source_end - have, None
    return source_end - have, newest - max(held) if held else None


# -- through S3 ---------------------------------------------------------------------------


def _listed(store: SegmentStore, source: SourcePartition) -> list[StoredSegment] | StorageError:
    """The partition's segments, or why the bucket did not list them."""
    try:
        return store.list_segments(source.origin, source.topic, source.partition)
    except StorageError as exc:
        log.warning(
            "cannot list %s/%s partition %d in %s: %s",
            source.origin,
            source.topic,
            source.partition,
            store.bucket,
            exc,
        )
        return exc


def _ingress_partitions(
    config: Config,
    sources: list[IngressSource],
    report: FailoverReport,
    pool: Executor,
    starts: dict[SourcePartition, int],
) -> list[PartitionReadiness]:
    """A row per partition the destination bucket holds segments of, with the source
    bucket's end and the RPO where it answers. Each source bucket is asked for a topic's
    partitions first and only then for each partition's segments: in a source region's
    outage that is one unanswered request per topic, not one per partition. A partition
    whose listing the destination bucket fails is unreachable, not empty (its RPO is not
    known). ``starts`` gets, per partition, the lowest segment start the destination
    bucket holds: ingress's replay began there or below (at the export start, below
    which no segment is written; segments expire from the lowest)."""
    ingress = required(config, "ingress")
    destination = SegmentStore.for_region(config, ingress.region, lookup=True)
    asked = []
    for source in sources:
        origin = SegmentStore.for_region(config, source.region, lookup=True)
        asked.append(
            (
                source,
                origin,
                pool.submit(destination.list_partitions, source.region, source.topic),
                pool.submit(origin.list_partitions, source.region, source.topic),
            )
        )
    listings = []
    for source, origin, at_destination, at_origin in asked:
        try:
            partitions = at_destination.result()
        except StorageError as exc:
            report.unreachable.append(
                f"bucket {destination.bucket} ({ingress.region}): the partitions of "
                f"{source.region}/{source.topic} are not known ({exc})"
            )
            continue
        try:
            at_origin.result()
            origin_answers = True
        except StorageError as exc:
            origin_answers = False
            report.notes.append(
                f"bucket {origin.bucket} ({source.region}) did not answer: source ends and "
                f"RPO of {source.region}/{source.topic} unknown ({exc})"
            )
        for partition in partitions:
            sp = SourcePartition(source.region, source.topic, partition)
            listings.append(
                (
                    PartitionReadiness(sp, source.destination),
                    pool.submit(_listed, destination, sp),
                    pool.submit(_listed, origin, sp) if origin_answers else None,
                )
            )
    rows = []
    for row, present_future, at_source_future in listings:
        present = present_future.result()
        at_source = at_source_future.result() if at_source_future else None
        if isinstance(at_source, list):
            row.source_end = exported_end(s.segment_key for s in at_source)
        if isinstance(present, StorageError):
            row.available_known = False
            report.unreachable.append(
                f"bucket {destination.bucket} ({ingress.region}): the segments of "
                f"{row.source.origin}/{row.source.topic} partition {row.source.partition} "
                f"are not known; what the destination can get and the RPO unknown ({present})"
            )
        else:
            row.available_end = exported_end(s.segment_key for s in present)
            lowest = lowest_start(s.segment_key for s in present)
            if lowest is not None:
                starts[row.source] = lowest
            if isinstance(at_source, list):
                _, row.rpo_seconds = rpo(at_source, present)
        rows.append(row)
    return rows


def _ingress_sources(config: Config, unreachable: list[str]) -> list[IngressSource]:
    """The concrete sources: from the bucket's topics, or the named ones when the bucket
    does not answer (patterns then match nothing known)."""
    from ingress.sources import concrete_sources

    ingress = required(config, "ingress")
    store = SegmentStore.for_region(config, ingress.region, lookup=True)
    try:
        return concrete_sources(ingress, store.list_topics)
    except StorageError as exc:
        unreachable.append(f"bucket {store.bucket} ({ingress.region}): topics not listed ({exc})")
        return [s for s in ingress.sources if s.topic]


def _ingress_report(config: Config, names: set[str] | None, pool: Executor) -> FailoverReport:
    from ingress.group_sync import translate_exported

    ingress = required(config, "ingress")
    kafka = client_config(config.region(ingress.region).kafka, socket_timeout_ms=3000)
    answer = pool.submit(_kafka_answer, kafka)  # asked while the buckets are
    report = FailoverReport(ingress.region, [], [])
    sources = _ingress_sources(config, report.unreachable)
    starts: dict[SourcePartition, int] = {}
    report.partitions = _ingress_partitions(config, sources, report, pool, starts)
    counts: dict[tuple[str, str], int] = {}
    for row in report.partitions:
        key = (row.source.origin, row.source.topic)
        counts[key] = max(counts.get(key, 0), row.source.partition + 1)
    if not _kafka_answers(answer.result(), ingress.region, report):
        return report
    checkpoints = CheckpointStore(kafka, ingress.checkpoint_topic, ingress.checkpoint_partitions)
    rows: list[GroupPartition] = []
    if _replayed(checkpoints, report.partitions, report, pool):  # else nothing to translate
        try:
            rows = with_replay_starts(
                translate_exported(config, kafka, sources, counts, names),
                lambda target: starts.get(target.source),
            )
        except ReplicatorError as exc:
            report.unreachable.append(f"consumer groups not translated: {exc}")
    report.groups = _groups(kafka, ingress.region, rows, names, report.unreachable)
    return report


def _kafka_answer(kafka: dict[str, Any]) -> str | None:
    """None when the cluster answers, else why not."""
    try:
        AdminClient(kafka).list_topics(timeout=REACH_TIMEOUT)
    except KafkaException as exc:
        return str(exc.args[0].str())
    return None


def _kafka_answers(failure: str | None, region: str, report: FailoverReport) -> bool:
    """Whether the destination cluster answered; if not, the report says what is missing."""
    if failure is not None:
        report.unreachable.append(
            f"Kafka of {region}: positions in the destination and consumer groups unknown "
            f"({failure})"
        )
        return False
    return True


# -- direct relay -------------------------------------------------------------------------


def _relay_report(config: Config, names: set[str] | None, pool: Executor) -> FailoverReport:
    from relay.groups import translate_upstream

    relay = required(config, "relay")
    kafka = client_config(config.region(relay.destination).kafka, socket_timeout_ms=3000)
    answer = pool.submit(_kafka_answer, kafka)  # asked while the upstreams are
    unreachable: list[str] = []
    ends = _upstream_ends(config, relay, pool)
    if not ends:
        unreachable.append(
            f"upstreams {', '.join(relay.sources)}: none answered; source ends unknown"
        )
    partitions = []
    for (topic, partition), end in sorted(ends.items()):
        target = relayed_to(relay, SourcePartition(relay.origin, topic, partition))
        if target is None:
            continue
        row = PartitionReadiness(
            target.source,
            target.destination_topic,
            target.destination_partition,
            source_end=end,
        )
        partitions.append(row)
    report = FailoverReport(relay.destination, partitions, [], unreachable=unreachable)
    if not _kafka_answers(answer.result(), relay.destination, report):
        return report
    checkpoints = CheckpointStore(kafka, relay.checkpoint_topic, relay.checkpoint_partitions)
    replayed = _replayed(checkpoints, partitions, report, pool)
    for row in partitions:
        row.available_end = row.replayed_until
    rows: list[GroupPartition] = []
    if replayed and not ends:  # groups' offsets are read upstream: asking again would wait
        unreachable.append(
            "consumer groups not translated: their offsets are read from an upstream, and "
            "none answered"
        )
    elif replayed:
        try:
            rows = translate_upstream(config, kafka, names, relay.consumer_groups)
        except (ReplicatorError, KafkaException) as exc:
            unreachable.append(f"consumer groups not translated: {exc}")
    report.groups = _groups(kafka, relay.destination, rows, names, unreachable)
    return report


def relayed_to(relay: RelayConfig, source: SourcePartition) -> WriteTarget | None:
    """Where the relay writes ``source`` (as its workers do), topics merged into one
    ``destination_partition`` included: they have no offset translation, but their
    replay is reported. None: not relayed. Pure."""
    for topic in relay.topics:
        if topic.source_topic == source.topic:
            merged = topic.destination_partition
            partition = source.partition if merged is None else merged
            return WriteTarget(source, topic.destination, partition)
    return None


def _upstream_ends(
    config: Config, relay: RelayConfig, pool: Executor
) -> dict[tuple[str, int], int]:
    """Log ends of the relayed topics on the first upstream, in order of preference, that
    answers ({} if none). Every upstream is asked at once."""
    asked = [
        (upstream, pool.submit(_log_ends, config, relay, upstream)) for upstream in relay.sources
    ]
    for upstream, ends in asked:
        try:
            return ends.result()
        except KafkaException as exc:
            log.warning("upstream %s did not answer: %s", upstream, exc)
    return {}


def _log_ends(config: Config, relay: RelayConfig, upstream: str) -> dict[tuple[str, int], int]:
    admin = AdminClient(client_config(config.region(upstream).kafka, socket_timeout_ms=3000))
    metadata = admin.list_topics(timeout=REACH_TIMEOUT)
    requests = {
        TopicPartition(t.source_topic, p): OffsetSpec.latest()
        for t in relay.topics
        if t.source_topic in metadata.topics
        for p in metadata.topics[t.source_topic].partitions
    }
    futures = admin.list_offsets(requests, request_timeout=REACH_TIMEOUT)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


# -- shared -------------------------------------------------------------------------------


def _replayed(
    checkpoints: CheckpointStore,
    partitions: list[PartitionReadiness],
    report: FailoverReport,
    pool: Executor,
) -> bool:
    """Each row's replayed position, from the checkpoints. False when the checkpoint topic
    does not exist: nothing was ever written into the region (the report says so)."""
    try:
        metadata = AdminClient(checkpoints.kafka).list_topics(
            checkpoints.topic, timeout=REACH_TIMEOUT
        )
        exists = metadata.topics[checkpoints.topic].error is None
    except KafkaException as exc:
        report.unreachable.append(
            f"checkpoint topic {checkpoints.topic}: positions unknown ({exc.args[0].str()})"
        )
        return False
    if not exists:
        report.notes.append(
            f"checkpoint topic {checkpoints.topic} does not exist in "
            f"{report.destination_region}: nothing has been replayed there yet"
        )
        return False
    list(pool.map(lambda row: _replayed_row(checkpoints, row), partitions))
    return True


def _replayed_row(checkpoints: CheckpointStore, row: PartitionReadiness) -> None:
    target = row.target
    try:
        point = checkpoints.resume_point(target)
    except ReplicatorError as exc:
        log.warning("position of %s unknown: %s", target, exc)
        return
    row.replayed_until = point.next_source_offset
    if point.checkpoint is not None:
        row.halted = point.checkpoint.halted


def _groups(
    kafka: dict[str, object],
    region: str,
    rows: list[GroupPartition],
    names: set[str] | None,
    unreachable: list[str],
) -> list[GroupReadiness]:
    admin = GroupAdmin(dict(kafka), region)
    found: dict[str, GroupReadiness] = {n: GroupReadiness(n) for n in names or ()}
    for row in rows:
        found.setdefault(row.group, GroupReadiness(row.group)).rows.append(row)
    for group in found.values():
        try:
            group.active = admin.is_active(group.group)
        except ReplicatorError as exc:
            group.active = True  # not known to be idle: never moved
            unreachable.append(f"whether group {group.group!r} has members: {exc}")
    return [found[name] for name in sorted(found)]


def collect(
    config: Config, groups: Iterable[str] = (), *, with_groups: bool = True
) -> FailoverReport:
    """The failover report of the config's destination: through S3 when it has
    ``[ingress]``, else of its ``[relay]``. ``with_groups`` False: the partitions only
    (``replicator failback`` reads them; no group is looked up).

    Clusters, buckets and partitions are asked at once (at most :data:`LOOKUPS` in
    flight), and buckets with a few attempts each: in an outage, which is when failover
    runs, the report takes about one timeout per step, not one per partition. No task
    waits on another's result, so the pool cannot deadlock."""
    names = set(groups) or (None if with_groups else set())
    if config.ingress is None and config.relay is None:
        required(config, "ingress")  # raises: names what is missing
    with ThreadPoolExecutor(LOOKUPS, thread_name_prefix="failover") as pool:
        if config.ingress is not None:
            return _ingress_report(config, names, pool)
        return _relay_report(config, names, pool)


def apply(config: Config, report: FailoverReport) -> None:
    """Commit the translated offsets of the report's groups without members (forward
    only); each group's ``moved`` says what was committed."""
    kafka = client_config(config.region(report.destination_region).kafka)
    admin = GroupAdmin(kafka, report.destination_region)
    rows = [row for group in report.groups if not group.active for row in group.rows]
    moved = commit_groups(admin, rows)
    for group in report.groups:
        if group.group in moved:
            group.moved = moved[group.group]
            group.active = group.moved is None
    report.applied = True


# -- output -------------------------------------------------------------------------------


def render(report: FailoverReport, now: float | None = None) -> str:
    now = time.time() if now is None else now
    lines = [
        f"Failover into {report.destination_region}",
        "",
        "Replication (RPO: what the source has that the destination cannot get)",
    ]
    table: list[tuple[str, ...]] = [
        (
            "topic",
            "part",
            "destination",
            "dest part",
            "replayed until",
            "available",
            "source end",
            "RPO records",
            "RPO seconds",
            "state",
        )
    ]
    for row in report.partitions:
        table.append(
            (
                f"{row.source.origin}/{row.source.topic}",
                str(row.source.partition),
                row.destination_topic,
                str(row.target.destination_partition),
                _num(row.replayed_until),
                _num(row.available_end) if row.available_known else "unreachable",
                _num(row.source_end) if row.source_end is not None else "unreachable",
                _num(row.rpo_records),
                "-" if row.rpo_seconds is None else f"{row.rpo_seconds:.0f}",
                f"HALTED: {row.halted}" if row.halted else "ok",
            )
        )
    lines += _columns(table)
    lines += ["", "Consumer groups"]
    by_group: list[tuple[str, ...]] = [
        ("group", "topic", "part", "source offset", "destination offset", "exact", "state")
    ]
    for group in report.groups:
        state = _group_state(group, report.applied)
        if not group.rows:
            by_group.append((group.group, "-", "-", "-", "-", "-", state))
        for member in group.rows:
            t = member.translation
            by_group.append(
                (
                    group.group,
                    member.target.destination_topic,
                    str(member.target.destination_partition),
                    str(t.source_offset),
                    str(t.destination_offset),
                    "yes" if t.exact else f"no: {t.behind_records} behind",
                    state,
                )
            )
    lines += _columns(by_group)
    if report.notes:
        lines += ["", "Notes:"] + [f"  {escape(note)}" for note in report.notes]
    if report.unreachable:
        lines += ["", "NOT REACHED (the report is incomplete; not ready):"]
        lines += [f"  {escape(what)}" for what in report.unreachable]
    if not report.groups:
        lines += [
            "",
            "no consumer groups found: name them with --group, or in [ingress] consumer_groups "
            "([relay] consumer_groups)",
        ]
        return "\n".join(lines)
    ready = sum(g.ready(report.applied) for g in report.groups)
    lines += [
        "",
        f"{ready} of {len(report.groups)} groups ready"
        + (" (offsets committed)" if report.applied else ""),
    ]
    return "\n".join(lines)


def _group_state(group: GroupReadiness, applied: bool) -> str:
    if not group.rows:
        return "no exported offsets found"
    if group.active:
        return "active in the destination: not moved"
    if not group.exact:
        return "behind"
    if applied:
        return f"committed ({group.moved} partitions moved)"
    return "ready"


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Aligned columns; every cell escaped (group ids and names come from the bucket)."""
    rows = [tuple(escape(cell) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)
