"""Checkpoints on a log-compacted topic, and where a writer resumes.

Checkpoint key: ``{destination topic}/{destination partition}/{origin}/{source topic}``
when a destination partition is written from the source partition of the same number (as
ingress always does), with ``/{source partition}`` appended when several source
partitions merge into one destination partition (each keeps its own checkpoint, its own
``transactional.id`` and its order);
value: JSON with the next source offset to write, the destination offset of the last
record produced and the time. A checkpoint is produced in the same transaction as the
records it covers, so an operator can read progress with any Kafka client. Each key goes
to a fixed partition of the checkpoint topic (a stable hash), so a writer finds its latest
checkpoint by reading one partition from the end.

The resume point is the furthest of the latest checkpoint and the last provenance header
in the destination partition's tail (read_committed), read once no transaction is open in
that partition any more (a fenced predecessor's may end only after the fencing call
returned; records of an open transaction are invisible until it ends). What is in the
destination is the truth: a segment may end in offsets without records (so the checkpoint
can be ahead of the tail).

A checkpoint describes one topic, not a topic name. Rule: it is a resume point only for
the destination topic it was written into, so every checkpoint carries Kafka's topic id
of its destination (``destination_topic_id``), and one written into another topic of the
same name is no resume point at all (:func:`stale_reason`): the writer starts as if it
were not there, and the records are written again. Why the topic id: it is the one thing
a deleted and re-created topic never shares with its predecessor. The log end, the only
test before, grows in the new topic too (aborted transactions and their markers, sibling
writers of a merged destination partition, any application's writes), and once past the
old checkpoint's destination offset that checkpoint looked valid again: everything before
its source offset never reached the new topic. Two more tests stay, for what a topic id
cannot see and for checkpoints written before it was recorded: a checkpoint claiming a
record at or beyond the partition's log end, and one whose claimed record is there but
carries another source's provenance (an unclean leader election truncated the partition
and other records took the offsets).

A checkpoint is its writer's own. Each service (ingress, the relay, restore) writes a
checkpoint topic of its own, which only its Kafka user may write (docs/security.md): a
plain record produced there is visible to read_committed readers at once, and a
checkpoint claiming no destination record and a source offset far on would skip every
offset between. A writer also passes over a checkpoint recording another writer kind
(:func:`other_writer`): it is never its resume point.

Encoding is pure; :class:`CheckpointStore` does the reading and the writing.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.core.kafka import provenance
from replicator.core.kafka.clients import LEADER_NOT_READY, retry_while_moving
from replicator.core.kafka.errors import BrokerError, CheckpointError
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.shared_admin import SharedAdmin
from replicator.core.kafka.tail import (
    read_range,
    scan_back,
    settled_end,
    tail_reader,
    watermark_reader,
    watermarks,
)
from replicator.core.untrusted_json import Kinds, check_fields, json_object

log = logging.getLogger(__name__)

TAIL_READER_GROUP = "replicator-tail-reader"
"""Never joined: tail scans assign partitions by hand."""


WriterKind = Literal["ingress", "relay", "restore"]
"""Which service wrote a checkpoint. The three write the same kind of checkpoint under the
same key for the same source and destination partition; a restore must not write beside
ingress or the relay (their checkpoints would interleave and each would resume from the
other's position)."""


@dataclass(frozen=True)
class WriteTarget:
    """Where one exactly-once writer writes: a destination partition, from one source."""

    source: SourcePartition
    destination_topic: str
    destination_partition: int

    @property
    def same_partition(self) -> bool:
        """Source and destination partition have the same number: the short forms."""
        return self.source.partition == self.destination_partition

    def transactional_id(self, group: str) -> str:
        base = f"{group}.{self.destination_topic}.{self.destination_partition}"
        if self.same_partition:
            return base
        return f"{base}.{self.source.origin}.{self.source.topic}.{self.source.partition}"

    @property
    def checkpoint_key(self) -> str:
        key = checkpoint_key(
            self.destination_topic,
            self.destination_partition,
            self.source.origin,
            self.source.topic,
        )
        return key if self.same_partition else f"{key}/{self.source.partition}"

    def __str__(self) -> str:
        return f"{self.destination_topic} partition {self.destination_partition}"


@dataclass(frozen=True)
class Checkpoint:
    destination_topic: str
    partition: int
    """The destination partition (and the source partition: they are the same number
    wherever checkpoints were written before relay and restore)."""
    source_region: str
    """The origin of the source offsets (see :class:`SourcePartition`); JSON name kept."""
    source_topic: str
    next_source_offset: int
    destination_offset: int
    """Offset of the last record produced for it in the destination partition (-1: none)."""
    time: float
    halted: str = ""
    """Why the partition halted (corrupt or lost segment, record too large); empty if not."""
    source_partition: int | None = None
    """Set only where it differs from ``partition`` (merged source partitions)."""
    writer: str = ""
    """The kind of writer (:data:`WriterKind`); empty in checkpoints of versions that did
    not record it."""
    destination_topic_id: str = ""
    """Kafka's id of the destination topic it was written into (see the module
    docstring); empty in checkpoints of versions that did not record it."""
    throttled: float = 0.0
    """Seconds the destination's brokers throttled the writer (a client quota) in the
    last transaction that held records: the one this checkpoint commits, or the one
    before when it commits none. What ``replicator status`` shows; left out when 0, and
    in checkpoints of versions that did not record it."""

    def to_json(self) -> bytes:
        # Fields left out when unset: what versions before them wrote, byte for byte.
        fields = {
            k: v
            for k, v in asdict(self).items()
            if v is not None and (k not in _OMITTED_WHEN_EMPTY or v)
        }
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Checkpoint:
        """Parse and type-check; ``ValueError`` naming the first bad field."""
        data = check_fields(json_object(raw, MAX_CHECKPOINT_BYTES), _CHECKPOINT_TYPES)
        if data["next_source_offset"] < 0 or data["destination_offset"] < -1:
            raise ValueError("negative offsets")
        return cls(**data)


MAX_CHECKPOINT_BYTES = 64 * 1024
_OMITTED_WHEN_EMPTY = frozenset({"writer", "destination_topic_id", "throttled"})
_CHECKPOINT_TYPES: dict[str, tuple[Kinds, bool]] = {
    "destination_topic": (str, True),
    "partition": (int, True),
    "source_region": (str, True),
    "source_topic": (str, True),
    "next_source_offset": (int, True),
    "destination_offset": (int, True),
    "time": ((int, float), True),
    "halted": (str, False),
    "source_partition": ((int, type(None)), False),
    "writer": (str, False),
    "destination_topic_id": (str, False),
    "throttled": ((int, float), False),
}


@dataclass(frozen=True)
class ResumePoint:
    next_source_offset: int | None
    """None: nothing of this source was ever written here."""
    destination_offset: int
    checkpoint: Checkpoint | None = None
    destination_topic_id: str = ""
    """Kafka's id of the destination topic now (empty: not known); the writer records it
    in every checkpoint it writes."""
    discarded: Checkpoint | None = None
    """The latest checkpoint of the key, when it was no resume point (written into an
    earlier topic of the same name): something was written here before. The relay then
    refills the destination from the upstream's log start, whatever ``start_from`` says."""


def _own_checkpoint(message: Any, key: bytes) -> Checkpoint:
    try:
        return Checkpoint.from_json(message.value())
    except ValueError as exc:
        raise CheckpointError(
            f"checkpoint {key.decode(errors='replace')} at {message.topic()} partition "
            f"{message.partition()} offset {message.offset()} is unreadable ({exc}); "
            "the partition halts"
        ) from None


def checkpoint_key(destination_topic: str, partition: int, origin: str, topic: str) -> str:
    return f"{destination_topic}/{partition}/{origin}/{topic}"


def checkpoint_partition(checkpoint_key: str, partitions: int) -> int:
    return zlib.crc32(checkpoint_key.encode()) % partitions


def furthest(checkpoint: Checkpoint | None, tail: tuple[int, int] | None) -> ResumePoint:
    """The resume point from the latest checkpoint and the last provenance found in the
    destination tail, ``(destination offset, source offset)``. Pure."""
    candidates = []
    if checkpoint is not None:
        candidates.append((checkpoint.next_source_offset, checkpoint.destination_offset))
    if tail is not None:
        destination_offset, source_offset = tail
        candidates.append((source_offset + 1, destination_offset))
    if not candidates:
        return ResumePoint(None, -1, checkpoint)
    # Both grow together; the furthest of each (a checkpoint an earlier version wrote
    # after a commit without records claims destination offset -1 with its source offset).
    next_offset = max(c[0] for c in candidates)
    destination_offset = max(c[1] for c in candidates)
    return ResumePoint(next_offset, destination_offset, checkpoint)


def stale_reason(checkpoint: Checkpoint, topic_id: str, log_end: int) -> str | None:
    """Why ``checkpoint`` is no resume point for a destination partition of the topic with
    id ``topic_id`` (empty: not known) whose log ends at ``log_end``; None if it may be.
    Retention, DeleteRecords and compaction move a log's start, never its end: a record
    claimed at or beyond the end means the partition is not the one it was written into.
    Pure."""
    recorded = checkpoint.destination_topic_id
    if recorded and topic_id and recorded != topic_id:
        return (
            f"was written into an earlier topic of this name (topic id {recorded}; the "
            f"topic's id is now {topic_id}: deleted and created again)"
        )
    if checkpoint.destination_offset >= log_end:
        return (
            f"claims a record at destination offset {checkpoint.destination_offset} but the "
            f"partition ends at {log_end} (deleted and created again, or truncated)"
        )
    return None


def other_writer(checkpoint: Checkpoint, kind: WriterKind) -> str | None:
    """Why ``checkpoint`` is not a resume point of a writer of ``kind``: it records another
    writer kind; None if it records ``kind``, or none (versions before the kind was
    recorded wrote none). Pure."""
    if not checkpoint.writer or checkpoint.writer == kind:
        return None
    return f"was written by {checkpoint.writer}, not {kind}: another service's checkpoint"


def foreign_claim(
    checkpoint: Checkpoint, found_offset: int, source_offset: int | None
) -> str | None:
    """Why the record found at ``found_offset`` when reading (read_committed) from
    ``checkpoint``'s destination offset shows the checkpoint describes other data, given
    the source offset of the provenance it carries for the writer's source (None: none);
    None if it does not. A record found further on says nothing (the claimed one was
    compacted away, or lay below the log start). Pure."""
    claimed = checkpoint.destination_offset
    if found_offset != claimed:
        return None
    if source_offset is not None and source_offset < checkpoint.next_source_offset:
        return None
    held = "none" if source_offset is None else str(source_offset)
    return (
        f"claims its last record at destination offset {claimed}, but the record there holds "
        f"source offset {held} (truncated and written again?)"
    )


def _warn_stale(target: WriteTarget, checkpoint: Checkpoint, reason: str) -> None:
    log.warning(
        "%s: checkpoint %s (next source offset %d) %s: not a resume point; resuming as if "
        "it were not there",
        target,
        target.checkpoint_key,
        checkpoint.next_source_offset,
        reason,
    )


DESCRIBE_TIMEOUT = 10.0
_DESCRIBE_RETRY = LEADER_NOT_READY - {KafkaError.UNKNOWN_TOPIC_OR_PART}
"""A topic that does not exist is an answer here (it was deleted), not a moment to wait."""


def topic_ids(admin: AdminClient, topics: Sequence[str]) -> dict[str, str]:
    """Kafka's id of each of ``topics`` now (base64, as Kafka's tools print it), in one
    request; empty for a topic that does not exist. Raises :class:`BrokerError`."""
    if not topics:
        return {}

    def describe() -> dict[str, str]:
        futures = admin.describe_topics(
            TopicCollection(list(topics)), request_timeout=DESCRIBE_TIMEOUT
        )
        ids = {}
        for topic, future in futures.items():
            try:
                ids[topic] = str(future.result().topic_id)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
                ids[topic] = ""
        return ids

    try:
        return retry_while_moving(describe, _DESCRIBE_RETRY, timeout=DESCRIBE_TIMEOUT)
    except KafkaException as exc:
        raise BrokerError.from_kafka(
            f"describing topics {', '.join(topics)}", exc.args[0]
        ) from None


class CheckpointStore:
    """The checkpoint topic of one cluster: reads, writes and resume points."""

    def __init__(self, kafka: dict[str, Any], topic: str, partitions: int) -> None:
        self.kafka = kafka
        self.topic = topic
        self.partitions = partitions
        self._admin = SharedAdmin(kafka)

    def topic_id(self, topic: str) -> str:
        """Kafka's id of the destination ``topic`` now (see :func:`topic_ids`)."""
        return self.topic_ids([topic])[topic]

    def topic_ids(self, topics: Sequence[str]) -> dict[str, str]:
        """Kafka's ids of the destination ``topics`` now (see :func:`topic_ids`), asked with
        one admin client the store's writers share (a client per writer would double
        their threads), renewed after a failed request
        (:mod:`replicator.core.kafka.shared_admin`)."""
        return self._admin.call(lambda admin: topic_ids(admin, topics))

    def topic_partition(self, target: WriteTarget) -> TopicPartition:
        return TopicPartition(
            self.topic, checkpoint_partition(target.checkpoint_key, self.partitions)
        )

    def produce(self, producer: Producer, target: WriteTarget, checkpoint: Checkpoint) -> None:
        """Produce ``target``'s ``checkpoint`` with ``producer`` (inside the caller's
        transaction)."""
        producer.produce(
            self.topic,
            key=target.checkpoint_key.encode(),
            value=checkpoint.to_json(),
            partition=checkpoint_partition(target.checkpoint_key, self.partitions),
        )

    def latest(self, key: str) -> bytes | None:
        """The latest committed value of ``key``: a record kept beside the checkpoints
        under a key no checkpoint has (``relay-identity/…``), None if there is none."""
        consumer = tail_reader(self.kafka, TAIL_READER_GROUP)
        ends = watermark_reader(self.kafka, TAIL_READER_GROUP)
        try:
            tp = TopicPartition(self.topic, checkpoint_partition(key, self.partitions))
            low, high = watermarks(ends, tp, "the log end", retry=LEADER_NOT_READY)
            wanted = key.encode()
            found = scan_back(
                consumer, tp, low, high, lambda m: m.value() if m.key() == wanted else None
            )
        finally:
            consumer.close()
            ends.close()
        return found[1] if found else None

    def put(self, key: str, value: bytes) -> None:
        """Write ``key`` (see :meth:`latest`), acknowledged by every in-sync replica."""
        producer = Producer({**self.kafka, "acks": "all", "enable.idempotence": True})
        failures: list[Any] = []
        producer.produce(
            self.topic,
            key=key.encode(),
            value=value,
            partition=checkpoint_partition(key, self.partitions),
            on_delivery=lambda error, _message: failures.append(error) if error else None,
        )
        if producer.flush(30) or failures:
            why = failures[0].str() if failures else "not acknowledged within 30 s"
            raise CheckpointError(f"could not write {key} to {self.topic}: {why}")

    def resume_point(
        self, target: WriteTarget, *, settle: float = 0.0, kind: WriterKind | None = None
    ) -> ResumePoint:
        """Where ``target``'s writer resumes. A writer calls it just after fencing earlier
        writers with ``settle`` > 0: it then waits up to that many seconds for their
        open transaction to end, which would otherwise still change the answer. Readers
        (status, failover) read what is committed now.

        A writer gives its ``kind``: the latest checkpoint of the key that kind (or a
        version recording none) wrote is its own; one another kind wrote is passed over
        with a warning (:func:`other_writer`), never a resume point. Each service has a
        checkpoint topic of its own that only its user may write (docs/security.md): a
        checkpoint of another kind there was put there by hand, or by a user that should
        not hold WRITE on it."""
        consumer = tail_reader(self.kafka, TAIL_READER_GROUP)
        ends = watermark_reader(self.kafka, TAIL_READER_GROUP)
        try:
            ctp = self.topic_partition(target)
            # Another writer's open transaction in the shared checkpoint partition must not
            # hide this key's committed checkpoints from the scan (see settled_end).
            low, high = settled_end(consumer, ends, ctp, settle)
            found = scan_back(
                consumer,
                ctp,
                low,
                high,
                lambda m: self._writers_checkpoint(m, target, kind),
            )
            checkpoint = found[1] if found else None
            dtp = TopicPartition(target.destination_topic, target.destination_partition)
            low, high = settled_end(consumer, ends, dtp, settle)
            destination_id = self.topic_id(target.destination_topic)
            discarded = None
            if checkpoint is not None:
                reason = stale_reason(checkpoint, destination_id, high)
                if reason is None and checkpoint.destination_offset >= low:
                    reason = self._claimed_elsewhere(consumer, target, dtp, checkpoint)
                if reason is not None:
                    _warn_stale(target, checkpoint, reason)
                    checkpoint, discarded = None, checkpoint
            floor = max(low, checkpoint.destination_offset) if checkpoint else low
            tail = scan_back(
                consumer,
                dtp,
                floor,
                high,
                lambda m: provenance.source_offset(m.headers(), target.source),
            )
        finally:
            consumer.close()
            ends.close()
        point = furthest(checkpoint, tail)
        return replace(point, destination_topic_id=destination_id, discarded=discarded)

    def progress(self, targets: Sequence[WriteTarget]) -> dict[WriteTarget, int | None]:
        """The next source offset of each of ``targets`` by its latest committed checkpoint
        (None: none yet, or one :func:`stale_reason` passes over): what a progress line
        shows while writers run, read with one pair of clients for all targets.

        Not a resume point: :meth:`resume_point` also reads the destination's tail, past
        the writers' open transactions chunk by chunk, and makes two clients for each
        target; restore's driver asking that of every partition every few seconds spent a
        fifth of its CPU on it, beside the tasks it watched (docs/performance.md)."""
        consumer = tail_reader(self.kafka, TAIL_READER_GROUP)
        ends = watermark_reader(self.kafka, TAIL_READER_GROUP)
        try:
            ids = self.topic_ids(sorted({t.destination_topic for t in targets}))
            found: dict[WriteTarget, int | None] = {}
            for target in targets:
                ctp = self.topic_partition(target)
                low, high = watermarks(ends, ctp, "the log end", retry=LEADER_NOT_READY)
                hit = scan_back(
                    consumer, ctp, low, high, partial(self._writers_checkpoint, target=target)
                )
                checkpoint = hit[1] if hit else None
                if checkpoint is not None:
                    dtp = TopicPartition(target.destination_topic, target.destination_partition)
                    _, log_end = watermarks(ends, dtp, "the log end", retry=LEADER_NOT_READY)
                    if stale_reason(checkpoint, ids[target.destination_topic], log_end):
                        checkpoint = None
                found[target] = None if checkpoint is None else checkpoint.next_source_offset
        finally:
            consumer.close()
            ends.close()
        return found

    @staticmethod
    def _writers_checkpoint(
        message: Any, target: WriteTarget, kind: WriterKind | None = None
    ) -> Checkpoint | None:
        """``message``'s checkpoint if it is ``target``'s, of ``kind`` when given (see
        :meth:`resume_point`); None to scan on."""
        key = target.checkpoint_key.encode()
        if message.key() != key or not message.value():
            return None
        checkpoint = _own_checkpoint(message, key)
        reason = None if kind is None else other_writer(checkpoint, kind)
        if reason is None:
            return checkpoint
        log.warning(
            "%s: checkpoint %s at %s partition %d offset %d %s: passed over",
            target,
            target.checkpoint_key,
            message.topic(),
            message.partition(),
            message.offset(),
            reason,
        )
        return None

    @staticmethod
    def _claimed_elsewhere(
        consumer: Any, target: WriteTarget, dtp: TopicPartition, checkpoint: Checkpoint
    ) -> str | None:
        """Why the record ``checkpoint`` claims shows it describes other data (see
        :func:`foreign_claim`), judged by the first committed record from its destination
        offset; None if it does not."""
        at = checkpoint.destination_offset
        for message in read_range(consumer, dtp, at, at + 1):
            found = provenance.source_offset(message.headers(), target.source)
            return foreign_claim(checkpoint, message.offset(), found)
        return None
