"""The worker of one source partition: replays its segments into the destination partition
of the same number, in offset order, exactly once.

It keeps an index of the partition's segments built from S3 listings and updated by
segment events. Events only say "look again": a lost, duplicated, late or reordered event
changes when the worker notices a segment, never what it replays, because the listing is
the truth and records below the next offset are skipped. An event names an object that
need not exist (whoever can send to the notification queue can name any key): a segment
known from events only is read (a GET, which finds it or not), but never makes a gap — the
partition waits for missing offsets only when a listed segment follows them (it lists
first when the one that follows is known from an event only), and the late-segment clock
that ends in a lost segment runs only while the listing shows a later segment
(:func:`ingress.replay_plan.late_clock`).

Order of work per segment: read a row group (verified), produce its records at or after the
next offset, then — before the next read, and at the segment's end — flush, write the
checkpoint, commit the transaction (the exactly-once writer,
:mod:`replicator.core.kafka.writer`, does that part). A transaction therefore never spans
an S3 read or a wait for a read slot: however slow S3 is, it stays open only while one row
group is produced, well inside ``transaction_timeout``. Opening a segment (reading and
parsing its footer) holds one of the process's read slots (``read_concurrency``) as
reading a row group does, so the footers parsed at once are bounded by the slots, not by
the writers open (``max_open_writers``).

A partition holds its writer (a transactional producer) only while it has work: it takes
one of the process's writer slots to open it, and closes it once caught up for
``writer_idle_close`` or at once when another partition of the process waits for a slot;
work arriving later opens a new writer, which resumes from the destination as after a
restart. So memory follows the partitions busy at once, not the partitions owned.

A writer fenced while its partition is still owned (a transaction the coordinator aborted
after a broker outage, or a takeover not yet noticed) fails the worker; the supervisor
re-opens the writer, which resumes from the destination, if the partition is still owned.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ingress.errors import PartitionHaltedError
from ingress.metrics import IngressMetrics
from ingress.replay_plan import LateClock, late_clock, late_segment_wait
from ingress.segment_events import REMOVED, SegmentEvent
from replicator.core.aws.errors import ObjectNotFoundError
from replicator.core.config import Config, IngressSource, required
from replicator.core.errors import ReplicatorError
from replicator.core.filters import FilterChain
from replicator.core.filters.errors import FilterError
from replicator.core.kafka.checkpoints import ResumePoint, WriteTarget
from replicator.core.kafka.errors import (
    AuthorizationError,
    CheckpointError,
    OwnershipLostError,
    RecordRefusedError,
)
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.writer import RecordWriter
from replicator.core.logs import ContextLog, partition_fields
from replicator.core.read_ahead import ReadAhead
from replicator.core.segments.errors import (
    CorruptSegmentError,
    SegmentKeyError,
    SegmentMismatchError,
)
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.selection import (
    CaughtUp,
    Gap,
    ReadingCursor,
    ReadNext,
    Step,
    exported_end,
    lowest_start,
)
from replicator.core.segments.store import StoredSegment
from replicator.core.workers import WriterSlots, report_failure

log = logging.getLogger(__name__)

HALTING_ERRORS = (PartitionHaltedError, RecordRefusedError, CheckpointError, AuthorizationError)
"""What halts a partition instead of failing its worker: asking again gets the same answer
(a record the destination refuses, a checkpoint that is not one, an ACL the broker does not
grant) until an operator acts, so a restart every few seconds would only loop."""


class TableSource(Protocol):
    def iter_tables(self) -> Iterator[pa.Table]: ...


class SegmentSource(Protocol):
    """What a worker reads: a region's segment listing and verified readers
    (:class:`replicator.core.segments.store.SegmentStore`, or a fake in unit tests)."""

    def list_segments(self, region: str, topic: str, partition: int) -> list[StoredSegment]: ...

    def open(self, segment: StoredSegment) -> TableSource: ...


@dataclass(frozen=True)
class ExportStart:
    """What the topic descriptor says of where a partition's export began."""

    recorded: bool
    """The descriptor records export starts (egress versions that do)."""
    offset: int | None
    """The partition's first exported offset; None: not recorded yet."""
    described: bool = True
    """The topic descriptor is in the bucket (False: not replicated yet, or lost)."""


@dataclass
class WorkerStatus:
    state: str = "starting"
    """starting | waiting | replaying | caught-up | done | halted | failed | stopped"""
    next_offset: int | None = None
    reason: str = ""


class PartitionWorker(threading.Thread):
    def __init__(
        self,
        config: Config,
        source: IngressSource,
        partition: int,
        metrics: IngressMetrics,
        *,
        open_writer: Callable[[WriteTarget], RecordWriter],
        segments: SegmentSource,
        filters: FilterChain | None = None,
        stop_at_end: bool = False,
        read_slots: threading.Semaphore | None = None,
        export_start: Callable[[], ExportStart] | None = None,
        writer_slots: WriterSlots | None = None,
    ) -> None:
        """``export_start``: where egress says the partition's export began (see
        :meth:`_first_offset`); None where no descriptor can say. ``writer_slots``: the
        process's bound on open writers (None: one of its own)."""
        super().__init__(name=f"ingress-{source.topic}-{partition}", daemon=True)
        self.config = config
        self.ingress = required(config, "ingress")
        self.source = source
        self.partition = partition
        self.metrics = metrics
        self._open_writer = open_writer
        self.stop_at_end = stop_at_end
        self._read_slots = read_slots or threading.BoundedSemaphore(1)
        self._writer_slots = writer_slots or WriterSlots(1)
        self.status = WorkerStatus()
        self.events: queue.Queue[SegmentEvent] = queue.Queue()
        self.failure: BaseException | None = None
        self._stopping = threading.Event()
        self._store = segments
        self._export_start = export_start or (lambda: ExportStart(False, None))
        self._filters = filters or FilterChain([])
        self._index: dict[SegmentKey, StoredSegment] = {}
        self._unlisted: set[SegmentKey] = set()
        """Segments of the index known from events only, not (yet) from a listing."""
        self._cursor = ReadingCursor()
        """Steps through the index in O(1) each while it does not change."""
        self._index_end: int | None = None
        """``exported_end`` of the index, kept until it changes (asked at every step)."""
        self._end: int | None = None
        """With ``stop_at_end``: the half-open end of the segments present at start."""
        self._labels = (source.region, source.topic, str(partition))
        self.target = WriteTarget(
            SourcePartition(source.region, source.topic, partition), source.destination, partition
        )
        self.log = ContextLog(log, partition_fields(source.region, source.topic, partition))

    # -- control --------------------------------------------------------------------------

    def stop(self) -> None:
        self._stopping.set()

    def notify(self, event: SegmentEvent) -> None:
        self.events.put(event)

    def run(self) -> None:
        try:
            self._run()
        except OwnershipLostError as exc:
            # Fenced while the partition is still ours as far as this instance knows:
            # either another instance took it over (this one hears of it as a
            # revocation, which removes the worker before its restart is due) or the
            # coordinator aborted a transaction that outlived transaction.timeout.ms
            # (a broker outage). Fail: the supervisor re-opens the writer, which
            # resumes from the destination, if the partition is still owned then.
            self.status.state, self.status.reason = "failed", f"fenced: {exc}"
            self.failure = exc
            self.metrics.fenced.labels(*self._labels).inc()
            self.log.warning("%s fenced; re-opening its writer unless it moved: %s", self.name, exc)
        except HALTING_ERRORS as exc:
            self.status.state, self.status.reason = "halted", str(exc)
            self.metrics.halted.labels(*self._labels).set(1)
            self.log.error("partition halted: %s", exc)
        except BaseException as exc:  # reported, and the service restarts the worker
            self.status.state, self.status.reason = "failed", str(exc)
            self.failure = exc
            report_failure(self.log, self.name, exc, traceback=not isinstance(exc, ReplicatorError))

    # -- the replay loop ------------------------------------------------------------------

    def _run(self) -> None:
        """Replay with a writer while there is work; between spells of work, without one
        (see :class:`~replicator.core.workers.WriterSlots`)."""
        next_offset: int | None = None  # known once a writer has opened
        while not self._stopping.is_set():
            if not self._writer_slots.acquire(self._stopping):
                return
            try:
                next_offset = self._replay_with_writer(next_offset)
            finally:
                self._writer_slots.release()
            if next_offset is None:  # done, stopped, or nothing to start from
                return
            self._wait_for_work(next_offset)

    def _replay_with_writer(self, next_offset: int | None) -> int | None:
        """Open the writer, replay until caught up and due to give the writer up, close
        it. Returns where replay stands then; None when the worker is done or stopping."""
        writer = self._open_writer(self.target)
        try:
            resume = writer.open()
            self.metrics.writer_opens.labels(*self._labels).inc()
            try:
                if next_offset is None:
                    next_offset = self._starting_offset(resume)
                else:
                    next_offset = self._reopened_at(resume, next_offset)
                if next_offset is None:
                    return None
                return self._replay(writer, next_offset)
            except (PartitionHaltedError, RecordRefusedError, AuthorizationError) as exc:
                writer.abort()
                if self.status.next_offset is not None:  # else nothing started: no position
                    writer.record_halt(self.status.next_offset, str(exc))
                raise
        finally:
            writer.close()

    def _starting_offset(self, resume: ResumePoint) -> int | None:
        """Where the first writer resumes: the destination's resume point, or where the
        export began."""
        self._relist()
        if self.stop_at_end:
            self._end = exported_end(self._index) or 0
        next_offset = resume.next_source_offset
        if next_offset is None:
            next_offset = self._first_offset()
            if next_offset is None:
                return None
        self.log.info(
            "%s resumes at source offset %d",
            self.name,
            next_offset,
            extra={"offset": next_offset},
        )
        self.status.next_offset = next_offset
        if resume.next_source_offset is not None:
            self._check_resume_listed(resume.next_source_offset)
        return next_offset

    def _reopened_at(self, resume: ResumePoint, next_offset: int) -> int | None:
        """Where a writer opened again after an idle spell resumes: where the last one
        stopped, unless the destination says otherwise. Nothing held in memory outlives
        the destination's answer, so a writer opened again resumes exactly as after a
        restart: from the destination's resume point (checked against the bucket), or,
        when the destination holds nothing of this source (its topic deleted and created
        again: the checkpoint is stale, the tail empty), from where the export began.
        None: stopping before a start was known."""
        at = resume.next_source_offset
        if at == next_offset:
            return next_offset
        if at is None:
            return self._replayed_again(next_offset)
        self.log.warning(
            "%s: the destination resumes at source offset %d, this worker had reached %d; "
            "going on from the destination's",
            self.name,
            at,
            next_offset,
            extra={"offset": at},
        )
        self.status.next_offset = at
        self._relist()  # the check below is a restart's, against a fresh listing
        self._check_resume_listed(at)
        return at

    def _replayed_again(self, reached: int) -> int | None:
        """The destination holds nothing of this source although this worker replayed
        offsets up to ``reached`` into it: start again where the export began (as a
        restart does), or None when stopping first."""
        # No position until the start is known: a halt on the way records none (a halt
        # recorded at ``reached`` would be a checkpoint claiming offsets the topic lacks).
        self.status.next_offset = None
        self._relist()
        start = self._first_offset()
        if start is None:
            return None
        self.log.warning(
            "%s: destination topic %s partition %d holds nothing of %s/%s partition %d "
            "(deleted and created again?), though this worker had replayed its offsets "
            "below %d into it; replaying again from source offset %d, where the export began",
            self.name,
            self.target.destination_topic,
            self.target.destination_partition,
            self.source.region,
            self.source.topic,
            self.partition,
            reached,
            start,
            extra={"offset": start},
        )
        self.status.next_offset = start
        return start

    def _wait_for_work(self, next_offset: int) -> None:
        """Without a writer, until a segment to replay (or a gap to wait on) is listed."""
        while not self._stopping.is_set():
            self._apply_events(next_offset)
            if not isinstance(self._listed_step(next_offset), CaughtUp):
                return
            if not self._wait_for_events(self.ingress.relist_interval):
                self._relist()

    def _check_resume_listed(self, next_offset: int) -> None:
        """The destination says offsets up to ``next_offset`` were replayed, so segments
        up to there were in the bucket: a resume point beyond every listed segment comes
        from a forged checkpoint or provenance header (or a bucket that lost its newest
        segments). Halting says so; going on would silently skip the offsets between."""
        end = exported_end(self._index)
        if end is not None and next_offset > end:
            raise PartitionHaltedError(
                f"{self.source.region}/{self.source.topic} partition {self.partition}: the "
                f"destination resumes at source offset {next_offset}, beyond the last "
                f"offset in the bucket ({end - 1}); check its checkpoint and the "
                "provenance headers of its last records"
            )

    def _first_offset(self) -> int | None:
        """No checkpoint and nothing produced yet: start where the export began.

        The topic descriptor names that offset; until it does (egress records it seconds
        after the first segment, and replication may carry the descriptor after the
        segments) the partition waits, asking for the descriptor again within seconds (no
        event announces a descriptor change, and ``relist_interval`` may be long), under
        the lost-segment rules: lower segments may still be on the way, so starting at the
        lowest listed could skip them. A missing segment at the named offset is then a gap
        like any other (late, then lost). Descriptors of egress versions that did not
        record export starts: wait ``first_segment_delay`` after the first segment
        appeared (late segments of lower offsets may still arrive), then start at the
        lowest offset present.

        A named start is taken only once segments are listed, and only if none of them
        begins below it (:meth:`_checked_start`): the descriptor is a bucket writer's to
        forge, and a start past the real one would skip the segments between."""
        self.status.state = "waiting"
        unnamed_since: float | None = None
        while not self._stopping.is_set():
            start = self._export_start()
            if start.offset is not None and self._index:
                return self._checked_start(start.offset)
            if not self._index:
                if self.stop_at_end:
                    self.status.state = "done"
                    return None
                if start.offset is not None:
                    # The export named its start and has written nothing yet: nothing to
                    # replay, as a partition that has replayed everything (ready).
                    self.status.state = "caught-up"
                self._wait_for_events(self.ingress.relist_interval)  # a segment event wakes
            elif start.recorded or not start.described:
                unnamed_since = unnamed_since or time.monotonic()
                waited = time.monotonic() - unnamed_since
                if waited >= self.source.lost_segment_timeout:
                    return self._start_unnamed(start)
                # Asked again after 1 s, then after half the time waited so far.
                self._wait_for_events(
                    min(
                        max(1.0, waited / 2),
                        self.ingress.descriptor_interval,
                        self.source.lost_segment_timeout - waited,
                        self.ingress.relist_interval,
                    )
                )
            else:
                appeared = min(
                    (s.last_modified.timestamp() for s in self._index.values() if s.last_modified),
                    default=time.time(),
                )
                wait = appeared + self.source.first_segment_delay - time.time()
                if wait <= 0 or self.stop_at_end:
                    return lowest_start(self._index)
                self._wait_for_events(min(wait, self.ingress.relist_interval))
            self._relist()
        return None

    def _checked_start(self, named: int) -> int:
        """``named`` (the descriptor's export start), unless a listed segment begins
        below it: then, as for a lost segment, halt (``on_lost_segment = "fail"``) or
        start at the lowest listed (``skip``: nothing listed is skipped)."""
        lowest = lowest_start(self._index)
        assert lowest is not None  # called with segments listed
        if lowest >= named:
            return named
        message = (
            f"{self.source.region}/{self.source.topic} partition {self.partition}: the topic "
            f"descriptor says its export began at offset {named}, but the bucket holds "
            f"segments from offset {lowest}; the descriptor is damaged or was written by "
            "someone else"
        )
        self._lost(message, f"starting at offset {lowest}")
        return lowest

    def _start_unnamed(self, start: ExportStart) -> int:
        """Segments are listed, but no topic descriptor naming where the export began
        arrived within ``lost_segment_timeout``: as a lost segment, halt
        (``on_lost_segment = "fail"``) or start at the lowest listed (``skip``)."""
        lowest = lowest_start(self._index)
        assert lowest is not None  # called with segments listed
        what = (
            "no topic descriptor appeared"
            if not start.described
            else f"the topic descriptor did not name where partition {self.partition}'s "
            "export began"
        )
        message = (
            f"lost topic descriptor: {self.source.region}/{self.source.topic} has segments "
            f"(partition {self.partition} from offset {lowest}) but {what} within "
            f"{self.source.lost_segment_timeout:.0f}s"
        )
        self._lost(message, f"starting at offset {lowest}")
        return lowest

    def _lost(self, message: str, instead: str, extra: dict[str, int] | None = None) -> None:
        """What ``on_lost_segment`` says for something lost: halt, or log what is done
        ``instead`` and go on."""
        if self.ingress.on_lost_segment == "fail":
            raise PartitionHaltedError(message)
        self.log.error("%s; %s (on_lost_segment = skip)", message, instead, extra=extra or {})

    def _replay(self, writer: RecordWriter, next_offset: int) -> int | None:
        """Replay in offset order. Returns the next offset when caught up and due to
        give the writer up (idle for ``writer_idle_close``, or another partition waits
        for a writer); None when done or stopping."""
        late: LateClock | None = None  # since when the listing shows offsets missing
        idle_until: float | None = None  # when a caught-up partition gives its writer up
        while not self._stopping.is_set():
            self._apply_events(next_offset)
            if self._end is not None and next_offset >= self._end:
                self._finish(next_offset)
                return None
            step = self._listed_step(next_offset)
            self._report_lag(next_offset)
            late = self._late_clock(late, step)
            if isinstance(step, ReadNext):
                idle_until = None
                next_offset = self._replay_segment(writer, self._index[step.segment], next_offset)
                self.status.next_offset = next_offset
            elif isinstance(step, Gap):
                assert late is not None  # a listed gap runs the clock
                idle_until = None
                if self._gives_gap_up(step, late):
                    late, next_offset = None, step.last + 1
            else:
                self.status.state = "caught-up"
                if self.stop_at_end:
                    self._finish(next_offset)
                    return None
                if idle_until is None:
                    idle_until = time.monotonic() + self.ingress.writer_idle_close
                give_way = functools.partial(self._gives_writer_up, idle_until)
                if give_way():
                    return next_offset
                if not self._wait_for_events(self.ingress.relist_interval, wake=give_way):
                    self._relist()  # nothing arrived: the periodic look for lost events
        return None

    def _finish(self, next_offset: int) -> None:
        """``--stop-at-end``: this partition is done; say where it stopped."""
        self.status.state = "done"
        self.log.info(
            "%s done at source offset %d (the segments listed at its start cover offsets below %s)",
            self.name,
            next_offset,
            self._end,
            extra={"offset": next_offset},
        )

    def _gives_writer_up(self, idle_until: float) -> bool:
        return self._writer_slots.wanted() or time.monotonic() >= idle_until

    def _listed_step(self, next_offset: int) -> Step:
        """The next step, a gap only as the listing shows it: a gap that ends where a
        segment known from events only begins is looked at in a listing first (an event
        may name an object that does not exist, past the end of the data)."""
        step = self._cursor.step(next_offset, self._index)
        if isinstance(step, Gap) and any(k.start == step.last + 1 for k in self._unlisted):
            self._relist()
            step = self._cursor.step(next_offset, self._index)
        return step

    def _late_clock(self, late: LateClock | None, step: Step) -> LateClock | None:
        """:func:`~ingress.replay_plan.late_clock`, reporting a gap newly missed."""
        clock = late_clock(late, step, time.monotonic())
        if clock is not None and clock is not late and isinstance(step, Gap):
            self.metrics.late_segments.labels(*self._labels).inc()
            self.log.warning(
                "%s: offsets %d..%d missing while later segments are listed; waiting",
                self.name,
                step.first,
                step.last,
                extra={"start": step.first, "end": step.last},
            )
        return clock

    def _gives_gap_up(self, gap: Gap, late: LateClock) -> bool:
        """Wait for the gap's segment (one look after the wait), or give it up once
        ``lost_segment_timeout`` has passed since the listing first showed it missing:
        True when skipped (``on_lost_segment = "skip"``; ``fail`` halts)."""
        wait = late_segment_wait(
            self.source.late_segment_retries,
            self.source.lost_segment_timeout,
            time.monotonic() - late.since,
        )
        if wait is not None:
            self.status.state = "waiting"
            self._wait_for_events(wait)
            self._relist()
            return False
        self.metrics.lost_segments.labels(*self._labels).inc()
        message = (
            f"lost segment: {self.source.region}/{self.source.topic} partition "
            f"{self.partition} offsets {gap.first}..{gap.last} did not appear within "
            f"{self.source.lost_segment_timeout:.0f}s"
        )
        self._lost(message, "skipping them", {"start": gap.first, "end": gap.last})
        return True

    def _replay_segment(self, writer: RecordWriter, stored: StoredSegment, next_offset: int) -> int:
        """Produce the segment's records from ``next_offset``; returns the next offset.

        Whatever stops the replay part-way (a stop request, the segment removed by
        compaction, a corrupt row group) commits what was produced from verified row groups
        instead of aborting: brokers that show aborted records to readers would otherwise
        see them twice.
        """
        self.status.state = "replaying"
        produced_until: int | None = None  # next offset after the open transaction's records
        try:
            # Opening reads and parses the footer: memory, held under a read slot as a row
            # group's is (no transaction is open here: the last one was committed at the
            # previous segment's end).
            with self._read_slots:
                reader = self._store.open(stored)
            self._report_source_loss(stored, getattr(reader, "footer", None))
            with ReadAhead(reader.iter_tables(), self._read_slots) as tables:
                while not self._stopping.is_set():
                    if produced_until is not None:
                        # Never hold a transaction open across a read: a slow S3 read or a
                        # wait for a read slot would let it outlive transaction.timeout.ms.
                        writer.commit(produced_until)
                        self.status.next_offset = produced_until
                        produced_until = None
                    # A row group is decoded and produced while holding a read slot (the
                    # next one read ahead only into a free slot), so memory is bounded by
                    # the slots however many partitions are owned.
                    with tables.next() as table:
                        if table is None:
                            break
                        offsets = table.column("offset")
                        if len(table) == 0 or offsets[-1].as_py() < next_offset:
                            continue
                        if offsets[0].as_py() < next_offset:
                            table = table.filter(pc.greater_equal(offsets, next_offset))
                        kept = self._filters.apply(table, self.source.topic, self.partition)
                        if kept.num_rows:
                            writer.write(kept)
                        self._count(kept, filtered=table.num_rows - kept.num_rows)
                        next_offset = produced_until = table.column("offset")[-1].as_py() + 1
                        del table, offsets, kept
            if not self._stopping.is_set():
                writer.commit(stored.segment_key.end + 1)
                self.metrics.segments_read.labels(*self._labels).inc()
                self.metrics.checkpoint_offset.labels(*self._labels).set(stored.segment_key.end + 1)
                return stored.segment_key.end + 1
        except ObjectNotFoundError:
            self.log.info(
                "%s: %s was removed; re-listing",
                self.name,
                stored.s3_key,
                extra={"key": stored.s3_key},
            )
            self._relist()
        except (CorruptSegmentError, SegmentMismatchError) as exc:
            self._commit_progress(writer, produced_until)
            raise PartitionHaltedError(f"cannot replay {exc}") from None
        except FilterError as exc:
            self._commit_progress(writer, produced_until)
            raise PartitionHaltedError(f"{exc} (records from offset {next_offset})") from None
        self._commit_progress(writer, produced_until)
        return next_offset

    def _commit_progress(self, writer: RecordWriter, produced_until: int | None) -> None:
        if produced_until is not None:
            writer.commit(produced_until)
            self.status.next_offset = produced_until
            self.metrics.checkpoint_offset.labels(*self._labels).set(produced_until)

    # -- bookkeeping ----------------------------------------------------------------------

    def _report_source_loss(self, stored: StoredSegment, footer: Any) -> None:
        """Egress skipped offsets this segment covers because the source no longer held
        them (``on_data_loss = "skip"``): not a gap to wait for, but a loss to report."""
        if footer is None or not footer.source_data_loss:
            return
        key = stored.segment_key
        self.metrics.source_data_loss.labels(*self._labels).inc()
        self.log.error(
            "SOURCE DATA LOSS: %s covers offsets %d..%d, some of them gone from the source "
            "before egress read them (egress on_data_loss = skip); going on",
            stored.s3_key,
            key.start,
            key.end,
            extra={"key": stored.s3_key, "start": key.start, "end": key.end},
        )

    def _count(self, table: Any, filtered: int = 0) -> None:
        if filtered:
            self.metrics.records_filtered.labels(*self._labels).inc(filtered)
        if len(table) == 0:
            return
        size = sum(pc.sum(pc.binary_length(table.column(c))).as_py() or 0 for c in ("key", "value"))
        self.metrics.records.labels(*self._labels).inc(len(table))
        self.metrics.bytes.labels(*self._labels).inc(size)
        last_ms = table.column("timestamp")[-1].value
        if last_ms is not None and last_ms > 0:
            self.metrics.lag_seconds.labels(*self._labels).set(
                max(0.0, time.time() - last_ms / 1000)
            )

    def _report_lag(self, next_offset: int) -> None:
        if self._index_end is None:
            self._index_end = exported_end(self._index)
        end = self._index_end or next_offset
        self.metrics.lag_records.labels(*self._labels).set(max(0, end - next_offset))

    def _relist(self) -> None:
        segments = self._store.list_segments(self.source.region, self.source.topic, self.partition)
        self._index = {s.segment_key: s for s in segments}
        self._unlisted.clear()
        self._index_changed()

    def _index_changed(self) -> None:
        self._cursor.invalidate()
        self._index_end = None

    def _apply_events(self, next_offset: int) -> bool:
        """Fold queued events into the index; True if any arrived.

        A removed segment wholly below ``next_offset`` was replayed already: it only
        leaves the index. That is the common case — compaction removing what ingress
        replayed, thousands of events after a large run — and re-listing for each would
        cost a listing of the whole partition per event. The removal of a segment not yet
        replayed means its replacement (a merged segment) must be found: the partition
        re-lists, once for all the events drained together."""
        changed = relist = False
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                break
            changed = True
            try:
                key = event.segment(self.config.s3.prefix)
            except SegmentKeyError:
                continue
            if event.kind == REMOVED:
                self._index.pop(key, None)
                self._unlisted.discard(key)
                relist |= key.end >= next_offset
            elif key not in self._index:
                modified = _parse_time(event.event_time)
                self._index[key] = StoredSegment(key, event.s3_key, event.size, modified)
                self._unlisted.add(key)
        if changed:
            self._index_changed()
        if relist:
            self._relist()
        return changed

    def _wait_for_events(self, seconds: float, wake: Callable[[], bool] | None = None) -> bool:
        """Up to ``seconds`` for an event (left queued) or for ``wake`` to say so;
        whether either did."""
        deadline = time.monotonic() + seconds
        while not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if wake is not None and wake():
                return True
            try:
                event = self.events.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            self.events.put(event)
            return True
        return False


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)
