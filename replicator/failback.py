"""``replicator failback``: after an unplanned failover, bring the old source region back
with every record accounted for.

Run with the config of the forward direction (the one ``replicator failover`` used: a
``[relay]``, or an ``[ingress]`` fed by egress through S3, writing the old region's
topics into the new region) once the old region answers again. The old region is the
forward source whose offsets provenance names (:func:`forward_regions`), by name, never
by position. Per replicated partition it reports the *divergent tail*:
the old region's records after the last one the new region holds (offsets, count, first
and last timestamps), and the *reversed config*: a ``[relay]`` from the new region back
into the old region's own topics, which ``replicator config check`` accepts.

With ``--apply``, in this order, each step idempotent, so a failback killed anywhere and
run again finishes with nothing twice:

1. the tail is exported to the old region's bucket as a segment archive of its own,
   region ``{origin}.divergent`` (:data:`TAIL_SUFFIX`), which ``replicator restore
   --from-region {origin}.divergent`` reads; a segment already there is not written again
   (its key is the tail's first offset and last record, both fixed once the old region is
   back);
2. the reversed relay's checkpoint of each partition is seeded at the new region's first
   offset after the last record replicated forward, by the exactly-once writer, unless a
   checkpoint is there already (a failback run before, or the reversed relay since): what
   came from the old region is never copied back;
3. the reversed relay runs up to the new region's log ends (``--stop-at-end``): the
   records written in the new region since the failover are appended to the old topics,
   after the divergent tail, exactly once and in order (its checkpoints, as ever);
4. consumer groups of the new region are translated into the old region as ``replicator
   failover`` does forward (the same report, over the reversed relay) and committed,
   forward only, where they have no members. A group committed before the last record
   replicated forward resumes where that record's provenance points
   (:func:`~replicator.core.groups.translation.translated_back`).

The tail stays in the old topic's log, before the failback point: groups are translated
past it, and the archive lets operators replay it where they decide. See
docs/operations/failback.md.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.core.config import Config, parse_config, required
from replicator.core.errors import ConfigError, ReplicatorError
from replicator.core.groups.plan import GroupPartition
from replicator.core.groups.translation import translated_back
from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import (
    TAIL_READER_GROUP,
    CheckpointStore,
    ResumePoint,
    WriteTarget,
)
from replicator.core.kafka.clients import (
    LEADER_NOT_READY,
    await_leaders,
    client_config,
    ensure_service_topic,
)
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.records import messages_to_records
from replicator.core.kafka.tail import read_range, tail_reader, watermarks
from replicator.core.kafka.writer import PartitionWriter
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore
from replicator.core.untrusted_text import escape
from replicator.failover import FailoverReport, GroupReadiness, _columns, collect
from replicator.failover import apply as apply_failover

log = logging.getLogger(__name__)

TAIL_SUFFIX = ".divergent"
"""Appended to the origin's name: the region under which the tail's archive is written
(segment keys and restore's ``--from-region``), apart from anything egress exports."""

FORWARD_SECTIONS = ("relay", "ingress", "egress", "compaction")
"""Sections of the forward direction's services, left out of the reversed config."""


class FailbackError(ReplicatorError):
    """A failback cannot proceed (what and where named)."""


# -- pure ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForwardRegions:
    """The forward direction a failback reverses."""

    old: str
    """The old source region: where the tail is read and archived, and where the
    reversed replication writes."""
    new: str
    """The region failed over to."""
    origin: str
    """The name the forward provenance and checkpoints give the old region's offsets (a
    relay's ``origin``, an ingress source's region)."""
    forward: Mapping[str, Any]
    """The forward ``[relay]`` as raw values ({} for ingress)."""


def choose_old_region(
    sources: Sequence[str], origin: str | None, chosen: str | None, where: str
) -> str:
    """The old region among the forward direction's ``sources`` (region names; ``where``
    says where the config lists them): ``chosen`` (``--old-region``) when given, which
    must be one of them; else the one named ``origin``, whose offsets the forward
    provenance names; else the only one. Several, none of them ``origin``: the operator
    names it. Pure."""
    names = list(dict.fromkeys(sources))
    if chosen is not None:
        if chosen not in names:
            raise FailbackError(
                f"--old-region {chosen!r} is not one of {where} ({', '.join(names)})"
            )
        return chosen
    if origin in names:
        return origin
    if len(names) == 1:
        return names[0]
    named_by = f", and none of them is the origin {origin!r}" if origin else ""
    raise FailbackError(
        f"{where} name {', '.join(names)}{named_by}: name the old region that comes back "
        "with --old-region (one at a time)"
    )


def forward_regions(config: Config, chosen: str | None = None) -> ForwardRegions:
    """The forward direction of ``config`` (its ``[relay]``, else its ``[ingress]``), the
    old region chosen by name (:func:`choose_old_region`). Pure."""
    if config.relay is not None:
        relay = config.relay
        old = choose_old_region(relay.sources, relay.origin, chosen, "relay.sources")
        return ForwardRegions(
            old, relay.destination, relay.origin, relay.model_dump(exclude_none=True)
        )
    ingress = required(config, "ingress")
    regions = [source.region for source in ingress.sources]
    old = choose_old_region(regions, None, chosen, "ingress.sources")
    return ForwardRegions(old, ingress.region, old, {})


@dataclass(frozen=True)
class Tail:
    """The old region's records of one partition that the new region never got."""

    start: int
    """The first offset after the last one replicated forward (the tail's range)."""
    count: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    """Epoch ms."""


def divergent_tail(start: int, records: Iterable[tuple[int, int, bool]]) -> Tail:
    """The tail from ``records``: (offset, timestamp ms, written by the reversed
    replication) of the old partition from ``start`` on, in order. It ends before the
    first record the reversed replication wrote: everything after that came back from
    the new region. Pure."""
    tail = Tail(start)
    for offset, timestamp, reversed_record in records:
        if reversed_record:
            break
        tail = replace(
            tail,
            count=tail.count + 1,
            first_offset=offset if tail.first_offset is None else tail.first_offset,
            last_offset=offset,
            first_timestamp=timestamp if tail.first_timestamp is None else tail.first_timestamp,
            last_timestamp=timestamp,
        )
    return tail


def lost_in_old_region(end: int, replayed_until: int | None, region: str) -> str | None:
    """Why the old partition cannot be failed back into by appending: it ends (``end``)
    before the next offset the new region would have got, so records the new region holds
    from it are gone from it (an unclean leader election, a truncation) and its offsets
    past ``end`` would name other records than the new region's provenance does. None
    when it can. Pure."""
    if end >= (replayed_until or 0):
        return None
    return (
        f"{region} ends at offset {end}, before {replayed_until}, the next offset the new "
        "region would have got: records replicated forward are gone from the old region "
        "(an unclean election, a truncation); rebuild its topic from the new region instead"
    )


def tail_segment_key(origin: str, topic: str, partition: int, tail: Tail) -> SegmentKey | None:
    """The archive segment of ``tail`` (None: no record to archive). It covers the tail's
    start to its last record: both are fixed once the old region is back, so a failback
    run again names the same segment. Pure."""
    if tail.last_offset is None:
        return None
    return SegmentKey(origin + TAIL_SUFFIX, topic, partition, 0, tail.start, tail.last_offset)


def reversed_relay(
    forward: Mapping[str, Any], old_region: str, new_region: str, topics: Mapping[str, str]
) -> dict[str, Any]:
    """The ``[relay]`` section (raw TOML values) that relays ``topics`` (new-region topic
    -> old-region topic) from ``new_region`` back into ``old_region``. Names of the
    service topics and the group are kept from the forward ``[relay]`` (``forward``, raw;
    empty for ingress): they live in the other cluster now. ``consumer_groups`` is left
    empty: groups move back with ``replicator failback --apply`` at the switch (a running
    sync would commit groups committed before the failback point at the first reversed
    record). Pure."""
    kept = (
        "group_id",
        "checkpoint_topic",
        "checkpoint_partitions",
        "assignment_topic",
        "assignment_partitions",
        "health_check_interval",
        "checkpoint_interval",
    )
    section: dict[str, Any] = {k: forward[k] for k in kept if k in forward}
    section.update(
        {
            "mode": "single",
            "sources": [new_region],
            "destination": old_region,
            "origin": new_region,
            "start_from": "earliest",
            "topics": [
                {"source_topic": new, "destination_topic": old}
                for new, old in sorted(topics.items())
            ],
        }
    )
    return section


def reversed_config_text(original: str, relay: dict[str, Any]) -> str:
    """The original config text's sections other than the forward services', with
    ``relay`` as ``[relay]``: region references (``${ENV}``) stay references. Pure."""
    raw = tomllib.loads(original)
    for name in FORWARD_SECTIONS:
        raw.pop(name, None)
    raw["relay"] = relay
    return "# The reversed direction of a failback (replicator failback).\n" + to_toml(raw)


def to_toml(data: Mapping[str, Any]) -> str:
    """``data`` (what ``tomllib`` reads) as TOML text. Pure."""
    return "\n".join(_table_lines(data, ())) + "\n"


def _table_lines(data: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[str]:
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in data.items() if _is_table_array(v)}
    for key, value in data.items():
        if key not in tables and key not in arrays:
            yield f"{_key(key)} = {_value(value)}"
    for key, value in tables.items():
        yield ""
        yield f"[{'.'.join(_key(k) for k in (*path, key))}]"
        yield from _table_lines(value, (*path, key))
    for key, items in arrays.items():
        for item in items:
            yield ""
            yield f"[[{'.'.join(_key(k) for k in (*path, key))}]]"
            yield from _table_lines(item, (*path, key))


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else _string(key)


def _string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped)
    return f'"{escaped}"'


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ConfigError("replicator failback", [("", f"cannot write {value!r} as TOML")])


# -- the report ---------------------------------------------------------------------------


@dataclass
class PartitionFailback:
    forward: WriteTarget
    """Old-region partition -> new-region partition, as replicated forward."""
    old_region: str
    replayed_until: int | None = None
    """The next old-region offset the new region would have got (None: none)."""
    reversed_from: int = 0
    """The new region's first offset after the last record replicated forward: where
    the reversed replication begins."""
    tail: Tail | None = None
    archived: str = ""
    """S3 key of the tail's segment (with ``--apply``)."""
    seeded: bool | None = None
    """With ``--apply``: the reversed checkpoint written now (False: it was there)."""
    problem: str = ""
    new_origin: str = ""
    """The origin the reversed relay names the new region's offsets by (its name)."""

    @property
    def reversed_target(self) -> WriteTarget:
        source = SourcePartition(
            self.new_origin, self.forward.destination_topic, self.forward.destination_partition
        )
        return WriteTarget(source, self.forward.source.topic, self.forward.source.partition)


@dataclass
class FailbackReport:
    old_region: str
    new_region: str
    partitions: list[PartitionFailback]
    reversed_config: str
    origin: str
    """The name the forward direction gives the old region's offsets (see
    :class:`ForwardRegions`): the tail's archive is written under it."""
    groups: FailoverReport | None = None
    applied: bool = False
    relay_exit: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        groups_ready = self.groups is None or self.groups.ready or not self.groups.groups
        return (
            not self.problems
            and all(not p.problem for p in self.partitions)
            and (not self.applied or (self.relay_exit == 0 and groups_ready))
        )


def plan(config: Config, original_text: str, old_region: str | None = None) -> FailbackReport:
    """What a failback would do: the tail of every partition of the old region (named by
    ``old_region``, else chosen by :func:`forward_regions`) and the reversed config."""
    regions = forward_regions(config, old_region)
    old_region, new_region = regions.old, regions.new
    forward_report = collect(config, with_groups=False)
    new_kafka = client_config(config.region(new_region).kafka)
    old_kafka = client_config(config.region(old_region).kafka)
    checkpoints = _forward_checkpoints(config, new_kafka)
    rows: list[PartitionFailback] = []
    topics: dict[str, str] = {}
    problems = list(forward_report.unreachable)
    for readiness in forward_report.partitions:
        target = readiness.target
        if target.source.origin != regions.origin:
            continue  # another old region's (ingress from several): not this failback's
        if not target.same_partition:
            problems.append(
                f"{target.source}: merged into {target} (no offset translation): not failed back"
            )
            continue
        topics[target.destination_topic] = target.source.topic
        row = PartitionFailback(target, old_region, new_origin=new_region)
        try:
            _fill(row, checkpoints.resume_point(target), old_kafka)
        except ReplicatorError as exc:
            row.problem = str(exc)
        rows.append(row)
    relay = reversed_relay(regions.forward, old_region, new_region, topics)
    text = reversed_config_text(original_text, relay)
    return FailbackReport(
        old_region, new_region, rows, text, origin=regions.origin, problems=problems
    )


def _forward_checkpoints(config: Config, kafka: dict[str, Any]) -> CheckpointStore:
    if config.relay is not None:
        return CheckpointStore(
            kafka, config.relay.checkpoint_topic, config.relay.checkpoint_partitions
        )
    ingress = required(config, "ingress")
    return CheckpointStore(kafka, ingress.checkpoint_topic, ingress.checkpoint_partitions)


def _fill(row: PartitionFailback, forward: ResumePoint, old_kafka: dict[str, Any]) -> None:
    row.replayed_until = forward.next_source_offset
    row.reversed_from = forward.destination_offset + 1
    lost = lost_in_old_region(_old_end(old_kafka, row), row.replayed_until, row.old_region)
    if lost is not None:
        row.problem = lost
        return
    row.tail = divergent_tail(
        row.replayed_until or 0,
        ((m.offset(), m.timestamp()[1], _reversed(m, row)) for m in _old_records(old_kafka, row)),
    )


def _reversed(message: Any, row: PartitionFailback) -> bool:
    return provenance.source_offset(message.headers(), row.reversed_target.source) is not None


def _old_end(old_kafka: dict[str, Any], row: PartitionFailback) -> int:
    consumer = tail_reader(old_kafka, TAIL_READER_GROUP)
    try:
        tp = TopicPartition(row.forward.source.topic, row.forward.source.partition)
        return watermarks(consumer, tp, f"{row.old_region} {tp.topic}", timeout=10)[1]
    finally:
        consumer.close()


def _old_records(
    old_kafka: dict[str, Any], row: PartitionFailback, end: int | None = None
) -> Iterator[Any]:
    """The old partition's committed records from the tail's start, up to ``end`` (None:
    the partition's end)."""
    consumer = tail_reader(old_kafka, TAIL_READER_GROUP)
    try:
        tp = TopicPartition(row.forward.source.topic, row.forward.source.partition)
        low, high = watermarks(consumer, tp, f"{row.old_region} {tp.topic}", timeout=10)
        start = max(low, row.replayed_until or 0)
        if start < high:
            yield from read_range(consumer, tp, start, end)
    finally:
        consumer.close()


# -- applying -----------------------------------------------------------------------------


def apply(config: Config, report: FailbackReport, groups: Iterable[str] = ()) -> None:
    """Export the tails, seed the reversed checkpoints, run the reversed relay to the new
    region's log ends, and move the groups (see the module docstring for the order)."""
    blocking = report.problems + [p.problem for p in report.partitions if p.problem]
    if blocking:
        raise FailbackError("failback not applied (nothing was changed): " + "; ".join(blocking))
    reversed_config = parse_config(report.reversed_config, "the reversed config", os.environ)
    ready = [row for row in report.partitions if row.tail is not None]
    _archive_tails(config, report, ready)
    _seed(reversed_config, report.old_region, ready)
    report.applied = True
    report.relay_exit = _run_reversed_relay(reversed_config)
    if report.relay_exit != 0:
        report.problems.append(
            f"the reversed relay stopped with exit status {report.relay_exit}: groups not moved"
        )
        return
    report.groups = _groups_back(config, reversed_config, report, set(groups))


def _archive_tails(config: Config, report: FailbackReport, rows: list[PartitionFailback]) -> None:
    if not any(row.tail and row.tail.count for row in rows):
        return
    region = config.region(report.old_region)
    if region.bucket is None:
        raise FailbackError(
            f"regions.{report.old_region}.bucket is not set: the divergent tail has nowhere "
            "to be archived (set the old region's bucket; nothing was changed)"
        )
    store = SegmentStore.for_region(config, report.old_region)
    kafka = client_config(region.kafka)
    counts: dict[str, int] = {}
    starts: dict[str, dict[int, int]] = {}
    origin = report.origin
    for row in rows:
        topic, partition = row.forward.source.topic, row.forward.source.partition
        assert row.tail is not None
        counts[topic] = max(counts.get(topic, 0), partition + 1)
        key = tail_segment_key(origin, topic, partition, row.tail)
        if key is None:
            continue
        starts.setdefault(topic, {})[partition] = row.tail.start
        row.archived = key.to_s3_key(store.prefix)
        if _exists(store, key):
            log.info("the tail of %s is archived already: %s", row.forward.source, row.archived)
            continue
        records = list(_old_records(kafka, row, key.end + 1))
        store.write_segment(key, messages_to_records(records))
        log.info("archived %d records of %s: %s", len(records), row.forward.source, row.archived)
    for topic, count in counts.items():
        if topic in starts:
            descriptor = describe(topic, count, {}, origin + TAIL_SUFFIX, starts[topic])
            store.put_json(
                topic_descriptor_s3_key(store.prefix, origin + TAIL_SUFFIX, topic), descriptor
            )


def _exists(store: SegmentStore, key: SegmentKey) -> bool:
    listed = store.list_segments(key.region, key.topic, key.partition)
    return any(s.segment_key == key for s in listed)


def _seed(reversed_config: Config, old_region: str, rows: list[PartitionFailback]) -> None:
    """The reversed relay's checkpoint of each partition at ``reversed_from``, written by
    the exactly-once writer the relay itself uses, unless one is there."""
    relay = required(reversed_config, "relay")
    kafka = client_config(reversed_config.region(old_region).kafka)
    admin = AdminClient(kafka)
    ensure_service_topic(
        admin,
        relay.checkpoint_topic,
        relay.checkpoint_partitions,
        "relay.checkpoint_partitions",
        {"cleanup.policy": "compact"},
    )
    await_leaders(admin, relay.checkpoint_topic, relay.checkpoint_partitions)
    _await_answers(kafka, relay.checkpoint_topic, relay.checkpoint_partitions)
    store = CheckpointStore(kafka, relay.checkpoint_topic, relay.checkpoint_partitions)
    for row in rows:
        writer = PartitionWriter(kafka, relay.group_id, row.reversed_target, store, kind="relay")
        try:
            resume = writer.open()
            row.seeded = resume.next_source_offset is None
            if row.seeded:
                writer.commit(row.reversed_from)
        finally:
            writer.close()


def _await_answers(kafka: dict[str, Any], topic: str, partitions: int) -> None:
    """Until each partition's leader answers for its ends: a topic created a moment ago
    (or a broker just started) is in the metadata before its leaders serve it."""
    consumer = tail_reader(kafka, TAIL_READER_GROUP)
    try:
        for partition in range(partitions):
            tp = TopicPartition(topic, partition)
            watermarks(consumer, tp, "the log ends", retry=LEADER_NOT_READY)
    finally:
        consumer.close()


def _run_reversed_relay(reversed_config: Config) -> int:
    from relay.service import RelayService

    relay = required(reversed_config, "relay").model_copy(update={"metrics_port": None})
    config = reversed_config.model_copy(update={"relay": relay})
    return RelayService(config, stop_at_end=True).run()


def _groups_back(
    config: Config, reversed_config: Config, report: FailbackReport, names: set[str]
) -> FailoverReport:
    """The groups of the new region, as ``replicator failover`` translates them over the
    reversed relay, with the translation back (:func:`translated_back`), committed."""
    patterns = _group_patterns(config)
    if not names:
        admin_groups = _matching_groups(reversed_config, report.new_region, patterns)
        names = set(admin_groups)
    groups = collect(reversed_config, names) if names else None
    if groups is None:
        return FailoverReport(report.old_region, [], [])
    by_target = {row.reversed_target: row for row in report.partitions}
    new_kafka = client_config(config.region(report.new_region).kafka)
    for group in groups.groups:
        group.rows = [_back(row, by_target.get(row.target), new_kafka) for row in group.rows]
    apply_failover(reversed_config, groups)
    return groups


def _group_patterns(config: Config) -> list[str]:
    if config.relay is not None:
        return list(config.relay.consumer_groups)
    return list(required(config, "ingress").consumer_groups)


def _matching_groups(config: Config, region: str, patterns: list[str]) -> list[str]:
    from replicator.core.groups.admin import GroupAdmin, matching

    if not patterns:
        return []
    admin = GroupAdmin(client_config(config.region(region).kafka), region)
    return matching(admin.group_ids(), patterns)


def _back(
    row: GroupPartition, partition: PartitionFailback | None, new_kafka: dict[str, Any]
) -> GroupPartition:
    if partition is None or row.translation.exact:
        return row
    committed = row.translation.source_offset
    found = None
    if committed < partition.reversed_from:
        found = _first_replicated(new_kafka, partition, committed)
    return replace(
        row, translation=translated_back(row.translation, partition.reversed_from, found)
    )


def _first_replicated(
    new_kafka: dict[str, Any], partition: PartitionFailback, offset: int
) -> int | None:
    """The old-region offset named by the first record at or after ``offset`` in the new
    region that the forward replication wrote."""
    target = partition.forward
    consumer = tail_reader(new_kafka, TAIL_READER_GROUP)
    try:
        tp = TopicPartition(target.destination_topic, target.destination_partition)
        for message in read_range(consumer, tp, offset, partition.reversed_from):
            found = provenance.source_offset(message.headers(), target.source)
            if found is not None:
                return found
    finally:
        consumer.close()
    return None


def write_reversed_config(report: FailbackReport, path: Path) -> None:
    path.write_text(report.reversed_config, encoding="utf-8")


# -- output -------------------------------------------------------------------------------


def render(report: FailbackReport) -> str:
    lines = [
        f"Failback from {report.new_region} into {report.old_region}",
        "",
        "Divergent tail (records of the old region the new region never got)",
    ]
    table: list[tuple[str, ...]] = [
        (
            "topic",
            "part",
            "replayed until",
            "tail first",
            "tail last",
            "records",
            "first timestamp",
            "last timestamp",
            "reversed from",
            "archive",
        )
    ]
    for row in report.partitions:
        tail = row.tail or Tail(row.replayed_until or 0)
        table.append(
            (
                f"{row.forward.source.origin}/{row.forward.source.topic}",
                str(row.forward.source.partition),
                _num(row.replayed_until),
                _num(tail.first_offset),
                _num(tail.last_offset),
                str(tail.count),
                _stamp(tail.first_timestamp),
                _stamp(tail.last_timestamp),
                f"{row.forward.destination_topic}@{row.reversed_from}",
                row.archived or ("-" if not row.problem else f"PROBLEM: {row.problem}"),
            )
        )
    lines += _columns(table)
    if report.groups is not None:
        lines += ["", "Consumer groups (into the old region)"]
        groups: list[tuple[str, ...]] = [("group", "topic", "part", "new offset", "old offset")]
        groups += [
            (
                g.group,
                r.target.destination_topic,
                str(r.target.destination_partition),
                str(r.translation.source_offset),
                str(r.translation.destination_offset)
                + ("" if r.translation.exact else " (behind)"),
            )
            for g in report.groups.groups
            for r in g.rows
        ]
        lines += _columns(groups)
        lines += [f"  {escape(g.group)}: {_moved(g)}" for g in report.groups.groups]
    if report.problems:
        lines += ["", "PROBLEMS:"] + [f"  {escape(p)}" for p in report.problems]
    if report.applied:
        lines += ["", "failback " + ("done" if report.ok else "NOT complete")]
    else:
        lines += ["", "plan only: run with --apply to archive, reverse and move groups"]
    return "\n".join(lines)


def _moved(group: GroupReadiness) -> str:
    if group.moved is None:
        return "has members in the old region (or not applied): not moved"
    return f"moved on {group.moved} partitions"


def _stamp(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)
