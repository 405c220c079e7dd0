"""Segment events name objects that need not exist: anyone who can send to the
notification queue (or produce to the segment-events topic) can announce a segment. An
event only says "look again": a gap — and with it the late-segment clock that ends in a
lost segment — is decided from listed objects only, and the clock stops once the listing
no longer shows a later segment. In-memory listing and writer: no Kafka, no S3."""

from __future__ import annotations

import time

import pytest

from ingress.replay_plan import LateClock, late_clock
from ingress.segment_events import CREATED, SegmentEvent
from replicator.core.config import Config
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.selection import CaughtUp, Gap, ReadNext
from tests.fixtures.worker import REGION, TOPIC, MemorySegments, config, memory_worker

FORGED = SegmentKey(REGION, TOPIC, 0, 0, 500, 999_999)
"""A segment past the end of the partition's data that was never written."""


def created(key: SegmentKey) -> SegmentEvent:
    return SegmentEvent(CREATED, key.to_s3_key("data"), 1, "2026-01-01T00:00:00Z")


def until(condition, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def idle_closing(base: Config, seconds: float) -> Config:
    assert base.ingress is not None
    return base.model_copy(
        update={"ingress": base.ingress.model_copy(update={"writer_idle_close": seconds})}
    )


@pytest.mark.parametrize("on_lost_segment", ["skip", "fail"])
def test_forged_events_of_a_segment_that_does_not_exist_lose_nothing(on_lost_segment):
    """Offsets 0..100 replayed; then, for three times ``lost_segment_timeout`` and more
    often than ``writer_idle_close``, events announce offsets 500..999999, which no object
    holds; then offsets 101..150 are exported. They are replayed, and the partition never
    halts nor skips."""
    segments = MemorySegments([(0, 100)])
    writer = MemoryWriter()
    cfg = idle_closing(config(on_lost_segment, lost_segment_timeout="0.3s"), 0.2)
    worker = memory_worker(cfg, segments, writer, stop_at_end=False)
    worker.start()
    try:
        until(lambda: writer.committed == list(range(101)), "offsets 0..100")
        deadline = time.monotonic() + 0.9
        while time.monotonic() < deadline:
            worker.notify(created(FORGED))
            time.sleep(0.05)
        segments.present.append((101, 150))
        worker.notify(created(SegmentKey(REGION, TOPIC, 0, 0, 101, 150)))
        until(
            lambda: writer.committed == list(range(151)) or worker.status.state == "halted",
            "offsets 101..150 or a halt",
        )
        assert worker.status.state != "halted", worker.status
        assert writer.committed == list(range(151)) and writer.halted == ""
        assert worker.metrics.lost_segments.labels(REGION, TOPIC, "0")._value.get() == 0
    finally:
        worker.stop()
        worker.join(10)


def test_a_forged_event_of_a_later_segment_starts_no_late_clock_and_opens_no_writer():
    """Caught up with its writer closed, the partition takes the announced segment past
    its data as "look again": the listing shows no later segment, so there is no gap to
    wait for and nothing to open a writer for."""
    segments = MemorySegments([(0, 9)])
    writer = MemoryWriter()
    worker = memory_worker(idle_closing(config("fail"), 0.1), segments, writer, stop_at_end=False)
    worker.start()
    try:
        until(lambda: writer.committed == list(range(10)) and writer.closed, "an idle writer")
        opened, listings = writer.opened, segments.listings
        worker.notify(created(FORGED))
        until(lambda: segments.listings > listings, "a look at the listing")
        time.sleep(0.2)
        assert writer.opened == opened
        assert worker.metrics.late_segments.labels(REGION, TOPIC, "0")._value.get() == 0
    finally:
        worker.stop()
        worker.join(10)


def test_the_late_clock_starts_at_a_gap_and_keeps_running_while_the_same_gap_is_listed():
    started = late_clock(None, Gap(10, 19), now=5.0)
    assert started == LateClock(10, 5.0)
    assert late_clock(started, Gap(10, 19), now=9.0) is started
    assert late_clock(started, Gap(10, 14), now=9.0) is started  # part of it arrived
    # A read that did not move the next offset (the object was gone by then) keeps it.
    assert late_clock(started, ReadNext(SegmentKey(REGION, TOPIC, 0, 0, 10, 19)), 9.0) is started


def test_the_late_clock_stops_when_the_listing_shows_no_later_segment():
    started = LateClock(10, 5.0)
    assert late_clock(started, CaughtUp(), now=9.0) is None
    # A later gap (the next offset moved on) is a new one, missed from now.
    assert late_clock(started, Gap(20, 29), now=9.0) == LateClock(20, 9.0)
