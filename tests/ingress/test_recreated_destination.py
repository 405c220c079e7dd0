"""The destination topic deleted and created again while its partition's writer is closed
(idle): the writer opening again replays the partition from where the export began, as a
restart would, not from where the closed writer had stopped.

Issue 47: the writer opening again found the checkpoint stale (it claims a record beyond
the new topic's end) and nothing of the source in the topic, yet went on from the source
offset it held in memory: the new topic received only the records exported after the
re-creation, and its first commit wrote a checkpoint that made the loss permanent.

The whole path runs: egress exports the source topic, the replication stand-in copies the
segments, a running ingress replays them; the test deletes the destination topic once the
caught-up writer closed, the ingress creates it again (as it does for a missing destination
topic, at its next descriptor refresh), and egress exports more records.

The service also looks at its destination topics' ids every few seconds and starts the
workers of a topic created again anew (:mod:`replicator.core.kafka.recreation`). Work that
arrives between two looks meets the worker's own writer opening again first: run once
with the looks put off (the worker alone must be right, deterministically), and once as
shipped (whichever comes first, the destination is exact)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException, Producer, TopicCollection

from egress.job import EgressJob
from ingress.metrics import IngressMetrics
from ingress.segment_events import CREATED, SegmentEvent
from ingress.service import IngressService
from ingress.worker import ExportStart, PartitionWorker
from replicator.core.config import Config, load_config
from replicator.core.kafka import provenance
from replicator.core.kafka.recreation import RecreationWatch
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.segments.key import SegmentKey
from replicator.core.workers import WriterSlots
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import read_partition, watermarks
from tests.fixtures.ingress import wait_for, wait_ready
from tests.fixtures.pipeline import pipeline_toml, wait_for_replication
from tests.fixtures.stack import DESTINATION, SOURCE, LocalStack
from tests.fixtures.worker import REGION, TOPIC, MemorySegments, config

FIRST = 1001
"""Records replayed before the destination topic is deleted."""
MORE = 10
"""Records produced and exported after it was created again."""


def produce(local_stack: LocalStack, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    producer.flush(30)


def topic_id(local_stack: LocalStack, topic: str) -> str | None:
    """The id of ``topic`` in the destination cluster; None while it does not exist."""
    admin = local_stack.admin(DESTINATION)
    futures = admin.describe_topics(TopicCollection([topic]), request_timeout=10)
    try:
        return str(futures[topic].result(timeout=10).topic_id)
    except KafkaException:  # unknown topic (deleted, not created again yet)
        return None


def replayed(local_stack: LocalStack, topic: str, copy: str) -> list[int | None]:
    """The source offsets the destination partition's committed records name, in order."""
    named = provenance.SourcePartition(SOURCE, topic, 0)
    records = read_partition(local_stack.bootstrap(DESTINATION), copy, 0)
    return [provenance.source_offset(list(r[5]), named) for r in records]


@pytest.mark.parametrize("watch", ["put-off", "as-shipped"])
def test_a_writer_reopening_on_a_recreated_destination_replays_from_the_export_start(
    local_stack, unique, spark, tmp_path, caplog, watch
):
    topic, copy = unique("orders"), unique("orders.copy")
    path = tmp_path / "replicator.toml"
    path.write_text(
        pipeline_toml(
            local_stack,
            unique,
            tmp_path,
            topic,
            copy,
            topic_limits="max_segment_messages = 200",
            ingress='writer_idle_close = "1s"\ndescriptor_interval = "500ms"',
        )
    )
    config = load_config(path)
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, 0, FIRST)
    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
    wait_for_replication(local_stack, topic)

    service = IngressService(config, handle_signals=False)
    alone = watch == "put-off"
    if alone:  # its first look remembers the ids; the next one is an hour away
        service._recreation = RecreationWatch(service.checkpoints.topic_ids, interval=3600)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        wait_ready(service)
        wait_for(
            lambda: replayed(local_stack, topic, copy) == list(range(FIRST)),
            "the first records were not replayed",
        )
        worker = service.workers.get(provenance.SourcePartition(SOURCE, topic, 0))
        assert worker is not None
        wait_for(lambda: service._writer_slots.in_use() == 0, "the idle writer to close")

        old_id = topic_id(local_stack, copy)
        assert old_id is not None
        admin = local_stack.admin(DESTINATION)
        admin.delete_topics([copy], operation_timeout=30)[copy].result(timeout=60)
        wait_for(
            lambda: topic_id(local_stack, copy) not in (None, old_id),
            "the ingress did not create the deleted destination topic again",
        )
        assert watermarks(local_stack.bootstrap(DESTINATION), copy, 0) == (0, 0)

        produce(local_stack, topic, FIRST, MORE)
        EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
        wait_for_replication(local_stack, topic)
        last = FIRST + MORE - 1
        wait_for(
            lambda: last in replayed(local_stack, topic, copy),
            "the records exported after the re-creation were not replayed",
            timeout=90,
        )
        # As shipped, the service's own look at topic ids may be starting the partition's
        # worker again at this moment (stopped, not yet replaced): wait for the one owning it.
        key = provenance.SourcePartition(SOURCE, topic, 0)
        wait_for(lambda: service.workers.get(key) is not None, "a worker owning the partition")
        now = service.workers.get(key)
    finally:
        service.request_stop()
        runner.join(60)
    assert not runner.is_alive()
    assert now is not None
    assert now.failure is None and now.status.state != "halted", now.status
    source = [r[0] for r in read_partition(local_stack.bootstrap(SOURCE), topic, 0)]
    assert source == list(range(FIRST + MORE))
    assert replayed(local_stack, topic, copy) == source

    if alone:
        # The worker that replayed the first records opened its writer again (it was
        # neither restarted nor failed): that reopening is what was checked.
        assert now is worker
        opens = service.metrics.registry.get_sample_value(
            "replicator_ingress_writer_opens_total",
            {"region": SOURCE, "topic": topic, "partition": "0"},
        )
        assert opens == 2, opens
        again = [r for r in caplog.records if r.name == "ingress.worker" and "again" in r.message]
        assert [(r.levelno, r.message) for r in again] == [
            (
                logging.WARNING,
                f"ingress-{topic}-0: destination topic {copy} partition 0 holds nothing of "
                f"{SOURCE}/{topic} partition 0 (deleted and created again?), though this "
                f"worker had replayed its offsets below {FIRST} into it; replaying again "
                "from source offset 0, where the export began",
            )
        ]

    # The checkpoint the reopened writer left is the new topic's: a restart adds nothing.
    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0
    assert replayed(local_stack, topic, copy) == source


# -- the same reopening without services ----------------------------------------------------


def idle_closing_worker(
    segments: MemorySegments,
    writer: MemoryWriter,
    export_start: Callable[[], ExportStart] | None = None,
) -> PartitionWorker:
    """A running worker of partition 0 whose caught-up writer closes after 0.1 s."""
    base = config("fail")
    assert base.ingress is not None
    cfg: Config = base.model_copy(
        update={"ingress": base.ingress.model_copy(update={"writer_idle_close": 0.1})}
    )
    assert cfg.ingress is not None
    worker = PartitionWorker(
        cfg,
        cfg.ingress.sources[0],
        0,
        IngressMetrics(),
        open_writer=lambda _target: writer,
        segments=segments,
        read_slots=threading.BoundedSemaphore(1),
        export_start=export_start,
        writer_slots=WriterSlots(1),
    )
    worker.start()
    return worker


def until(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def replayed_then_idle(writer: MemoryWriter) -> None:
    """Until offsets 0..9 are replayed and the caught-up writer closed."""
    until(lambda: writer.committed == list(range(10)), "the first segment")
    until(lambda: writer.closed, "the idle writer to close")
    assert writer.opened == 1


def arrives(worker: PartitionWorker, segments: MemorySegments) -> None:
    """A segment of offsets 10..24 and its event: work that opens the writer again."""
    segments.present.append((10, 24))
    s3_key = SegmentKey(REGION, TOPIC, 0, 0, 10, 24).to_s3_key(worker.config.s3.prefix)
    worker.notify(SegmentEvent(CREATED, s3_key, 1, "2026-01-01T00:00:00Z"))


def emptied(writer: MemoryWriter) -> None:
    """The destination topic deleted and created again: no records, no checkpoint of it."""
    writer.committed.clear()
    writer.checkpoints.clear()


def test_a_reopened_writer_on_an_emptied_destination_replays_from_the_export_start():
    segments, writer = MemorySegments([(0, 9)]), MemoryWriter()
    worker = idle_closing_worker(segments, writer)
    try:
        replayed_then_idle(writer)
        emptied(writer)
        arrives(worker, segments)
        until(lambda: 24 in writer.committed, "the new segment to be replayed")
    finally:
        worker.stop()
        worker.join(5)
    assert writer.opened == 2 and worker.failure is None
    assert writer.committed == list(range(25))


def test_a_halt_while_finding_the_export_start_again_records_no_position():
    """The descriptor is lost too: the reopened writer halts (``on_lost_segment =
    "fail"``) without leaving a checkpoint at the offset the worker had reached, which
    would claim offsets 0..9 the new topic does not hold."""
    segments, writer = MemorySegments([(0, 9)]), MemoryWriter()
    descriptor = [ExportStart(True, 0)]
    worker = idle_closing_worker(segments, writer, lambda: descriptor[0])
    try:
        replayed_then_idle(writer)
        emptied(writer)
        descriptor[0] = ExportStart(True, None, described=False)
        arrives(worker, segments)
        until(lambda: worker.status.state == "halted", "the partition to halt")
    finally:
        worker.stop()
        worker.join(5)
    assert "lost topic descriptor" in worker.status.reason, worker.status
    assert (writer.committed, writer.checkpoints, writer.halted) == ([], [], "")


def test_a_reopened_writer_resuming_beyond_the_bucket_halts_as_a_restart_does():
    """A checkpoint forged while the writer was closed claims offsets the bucket never
    held: as at a restart the partition halts instead of skipping to it."""
    segments, writer = MemorySegments([(0, 9)]), MemoryWriter()
    worker = idle_closing_worker(segments, writer)
    try:
        replayed_then_idle(writer)
        writer.checkpoints.append(1000)
        arrives(worker, segments)
        until(lambda: worker.status.state == "halted", "the partition to halt")
    finally:
        worker.stop()
        worker.join(5)
    assert "resumes at source offset 1000, beyond the last offset in the bucket (24)" in (
        worker.status.reason
    )
    assert writer.committed == list(range(10))
