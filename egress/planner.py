"""The driver's planning of egress micro-batches: where each partition's next batch ends.

Lives in Spark's planner process (see :mod:`egress.kafka_source`) and keeps state there
across calls: when each offset was first seen (the *planning clock* behind
``max_segment_age``), the fixed end of an ``--stop-at-end`` run, which data-loss events were
already reported. Look-ups go through :class:`egress.catalog.SourceCatalog`; the decisions
themselves are :mod:`egress.planning`'s pure functions.

Offsets are next offsets: a batch plans, per partition, the half-open range from the
start offset Spark hands it to the end offset returned here.
"""

from __future__ import annotations

import logging

from egress.catalog import SourceCatalog
from egress.driver_state import DriverState
from egress.errors import DataLossError
from egress.generations import TopicGenerations
from egress.planning import (
    Limits,
    Offsets,
    PendingClock,
    PositionProblem,
    TopicPartitionKey,
    check_position,
    plan_end,
)
from replicator.core.config import Config, EgressConfig, required
from replicator.core.logs import partition_fields
from replicator.core.segments.store import SegmentStore

log = logging.getLogger(__name__)


def limits_for(egress: EgressConfig, topic: str) -> Limits:
    t = egress.thresholds(topic)
    return Limits(t.max_segment_messages, t.max_segment_bytes, t.max_segment_age)


class Planner:
    """Driver-side planning state of one egress query."""

    def __init__(self, config: Config, catalog: SourceCatalog | None = None) -> None:
        self.config = config
        self.egress = required(config, "egress")
        self.catalog = catalog or SourceCatalog(config)
        self.state = DriverState(self.egress.state_dir)
        self.generations = TopicGenerations(
            config, self.catalog, SegmentStore.for_region(config, self.egress.region)
        )
        self.clocks: dict[TopicPartitionKey, PendingClock] = {}
        self.target: Offsets | None = None
        """With ``--stop-at-end``: the log ends seen at start, where the query stops."""
        self.reported: set[tuple[TopicPartitionKey, int]] = set()

    def starting_offsets(
        self, tps: list[TopicPartitionKey], start_from: str
    ) -> dict[TopicPartitionKey, int]:
        """Where partitions unknown to Spark's checkpoint start.

        The furthest of the group's committed offset and the end of the segments already in
        the bucket: after a lost checkpoint nothing is exported twice (no overlapping
        segments) and nothing is skipped. Otherwise the log start or end (``start_from``).
        """
        committed = self.catalog.committed(tps)
        exported = self.catalog.exported(tps)
        marks = self.catalog.watermarks(tps)
        result = {}
        for tp in tps:
            known = [o for o in (committed.get(tp), exported.get(tp)) if o is not None]
            if known:
                result[tp] = max(known)
            else:
                low, high = marks[tp]
                result[tp] = low if start_from == "earliest" else high
            log.info(
                "egress of %s partition %d starts at offset %d (committed %s, exported up to %s)",
                tp[0],
                tp[1],
                result[tp],
                committed.get(tp),
                exported.get(tp),
                extra=partition_fields(self.egress.region, tp[0], tp[1], offset=result[tp]),
            )
        return result

    # -- planning -------------------------------------------------------------------------

    def plan(self, start: Offsets, now: float) -> tuple[Offsets, Offsets]:
        """The end offsets of the next batch, and the ranges it skips over."""
        tps = self.catalog.partitions()
        # A topic deleted and created again is held where it is (ERROR, see generations).
        held = self.generations.check(sorted({t for t, _ in tps}))
        if held:
            tps = [tp for tp in tps if tp[0] not in held]
            if self.target is not None:
                self.target = {tp: o for tp, o in self.target.items() if tp[0] not in held}
        new = [tp for tp in tps if tp not in start]
        end: Offsets = dict(start)
        if new:
            # A partition or topic that appeared while running holds only new data.
            end.update(self.starting_offsets(new, "earliest"))
        known = [tp for tp in tps if tp in start]
        marks = self.catalog.watermarks(known)
        _, stats = self.state.read_partitions()
        skipped: Offsets = {}
        for tp in known:
            next_offset = start[tp]
            low, high = marks[tp]
            problem = check_position(tp[0], tp[1], next_offset, low, high)
            if problem is not None:
                self._report(problem)
                if problem.resume_at != next_offset:
                    skipped[tp] = next_offset
                    end[tp] = problem.resume_at
                continue
            if self.target is not None:
                high = min(high, self.target.get(tp, next_offset))
            clock = self.clocks.setdefault(tp, PendingClock())
            clock.observe(now, high)
            seen = clock.first_seen(next_offset)
            partition_stats = stats.get(tp)
            end[tp] = plan_end(
                next_offset,
                high,
                limits_for(self.egress, tp[0]),
                waited=None if seen is None else now - seen,
                bytes_per_offset=partition_stats.bytes_per_offset if partition_stats else None,
                drain=self.target is not None,
                lookahead=self.egress.trigger_interval,
            )
            clock.forget_before(end[tp])
        return end, skipped

    def _report(self, problem: PositionProblem) -> None:
        key = ((problem.topic, problem.partition), problem.next_offset)
        if key in self.reported:
            return
        self.reported.add(key)
        action = "stop" if self.egress.on_data_loss == "fail" else "skip"
        log.error(
            "DATA LOSS in region %s: %s (on_data_loss=%s)",
            self.egress.region,
            problem.describe(),
            self.egress.on_data_loss,
            extra=partition_fields(
                self.egress.region,
                problem.topic,
                problem.partition,
                start=problem.lost_first,
                end=problem.lost_last,
            ),
        )
        self.state.record_data_loss(
            {
                "topic": problem.topic,
                "partition": problem.partition,
                "first": problem.lost_first,
                "last": problem.lost_last,
                "reason": problem.reason,
                "action": action,
            }
        )
        if action == "stop":
            raise DataLossError(
                problem.topic,
                problem.partition,
                problem.lost_first,
                problem.lost_last,
                f'data loss: {problem.describe()}; set [egress] on_data_loss = "skip" to '
                "continue without them",
            )
