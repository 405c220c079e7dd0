"""Writers are open only while their partition has work: a process bounds how many are
open at once (``max_open_writers``), a caught-up partition gives its writer up when
another waits for one or after ``writer_idle_close``, and a writer opened again resumes
exactly where the last one stopped. Memory then follows the partitions busy at once, not
the partitions owned (at 512 partitions one process held 512 transactional producers and
2,600 threads: 1.7 GiB)."""

from __future__ import annotations

import threading
import time

from ingress.segment_events import CREATED, SegmentEvent
from ingress.service import IngressService
from ingress.worker import PartitionWorker
from replicator.core.config import Config, load_config
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.segments.key import SegmentKey
from replicator.core.workers import WriterSlots
from tests.fixtures.ingress import provenance_offsets, segment_batch, wait_ready
from tests.fixtures.ingress import wait_for as wait_for_replay
from tests.fixtures.stack import SOURCE
from tests.fixtures.worker import REGION, TOPIC, MemorySegments, config, memory_worker


def settings(idle_close: float) -> Config:
    base = config("fail")
    assert base.ingress is not None
    return base.model_copy(
        update={"ingress": base.ingress.model_copy(update={"writer_idle_close": idle_close})}
    )


def start_worker(
    cfg: Config, segments: MemorySegments, writer: MemoryWriter, slots: WriterSlots
) -> PartitionWorker:
    worker = memory_worker(cfg, segments, writer, stop_at_end=False, writer_slots=slots)
    worker.start()
    return worker


def wait_for(condition, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_slots_bound_the_writers_and_tell_when_one_is_wanted():
    slots, stopping = WriterSlots(1), threading.Event()
    assert slots.acquire(stopping) and slots.in_use() == 1 and not slots.wanted()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(stopping)))
    waiter.start()
    wait_for(slots.wanted, "the waiter to be seen")
    slots.release()
    waiter.join(5)
    assert got == [True] and slots.in_use() == 1 and not slots.wanted()
    stopping.set()
    assert slots.acquire(stopping) is False  # a stop ends the wait
    slots.release()
    assert slots.in_use() == 0


def test_a_caught_up_partition_gives_its_writer_up_at_once_to_one_that_waits():
    cfg = settings(idle_close=600)  # only a waiting partition can make it give up
    slots = WriterSlots(1)
    first, second = MemoryWriter(), MemoryWriter()
    a = start_worker(cfg, MemorySegments([(0, 9)]), first, slots)
    wait_for(lambda: first.committed == list(range(10)), "a to replay")
    b = start_worker(cfg, MemorySegments([(0, 19)]), second, slots)
    try:
        wait_for(lambda: second.committed == list(range(20)), "b to replay", timeout=5)
        assert first.closed and slots.in_use() == 1  # a closed its writer; b holds the slot
    finally:
        for worker in (a, b):
            worker.stop()
            worker.join(5)
    assert slots.in_use() == 0


def test_an_idle_writer_is_closed_and_the_next_one_resumes_where_it_stopped():
    cfg = settings(idle_close=0.2)
    segments = MemorySegments([(0, 9)])
    writer = MemoryWriter()
    worker = start_worker(cfg, segments, writer, WriterSlots(1))
    try:
        wait_for(lambda: writer.committed == list(range(10)), "the first segment")
        wait_for(lambda: writer.closed, "the idle writer to close")
        opened = writer.opened
        segments.present.append((10, 24))  # a new segment, and its event
        s3_key = SegmentKey(REGION, TOPIC, 0, 0, 10, 24).to_s3_key(cfg.s3.prefix)
        worker.notify(SegmentEvent(CREATED, s3_key, 1, "2026-01-01T00:00:00Z"))
        wait_for(lambda: writer.committed == list(range(25)), "the new segment")
        assert writer.opened == opened + 1
    finally:
        worker.stop()
        worker.join(5)
    assert writer.committed == list(range(25))


# -- on the local stack ---------------------------------------------------------------------

PARTITIONS, PER_SEGMENT = 4, 500


def test_one_writer_slot_for_four_partitions_replays_each_record_once(local_stack, ingress_setup):
    """Real writers closed and opened again (fencing their own earlier producer, resuming
    from the destination's tail) while two waves of segments arrive."""
    setup = ingress_setup()
    text = setup.path.read_text().replace(
        "[ingress]\n", '[ingress]\nmax_open_writers = 1\nwriter_idle_close = "60s"\n'
    )
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    setup.put_descriptor(PARTITIONS)

    def wave(index: int) -> None:
        for partition in range(PARTITIONS):
            for s in range(2):
                start = (index * 2 + s) * PER_SEGMENT
                batch = segment_batch(start, PER_SEGMENT)
                setup.put_segment(partition, start, start + PER_SEGMENT - 1, batch)

    def replayed(count: int) -> bool:
        return all(
            provenance_offsets(local_stack, setup, p) == list(range(count))
            for p in range(PARTITIONS)
        )

    wave(0)
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run)
    runner.start()
    try:
        wait_ready(service)
        wait_for_replay(lambda: replayed(2 * PER_SEGMENT), "the first wave")
        wave(1)  # every partition caught up meanwhile: its writer opens again
        wait_for_replay(lambda: replayed(4 * PER_SEGMENT), "the second wave")
    finally:
        service.request_stop()
        runner.join(60)
    opens = [
        service.metrics.registry.get_sample_value(
            "replicator_ingress_writer_opens_total",
            {"region": SOURCE, "topic": setup.topic, "partition": str(p)},
        )
        for p in range(PARTITIONS)
    ]
    # One slot: in the second wave every partition but the one holding it opens again.
    assert sum((n or 0) >= 2 for n in opens) >= PARTITIONS - 1, opens
    for partition in range(PARTITIONS):  # and nothing twice, in order
        assert provenance_offsets(local_stack, setup, partition) == list(range(4 * PER_SEGMENT))
