"""The notification path on its own: S3 → SQS → the reader → the segment-events topic → the
worker. Re-listing is set to ten minutes, so a segment reaches the destination within the
test only if its notification does.

Poison messages on the queue are counted and left for the dead-letter queue with the reader
alive; a reader that dies anyway is started again and reported."""

from __future__ import annotations

import json
import threading

import pytest

from ingress.service import IngressService
from ingress.sqs_bridge import SqsBridge
from replicator.core.config import load_config
from replicator.core.faults import SQS_AFTER_ACK_BEFORE_DELETE, marker
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import provenance_offsets, segment_batch, start_ingress, wait_for
from tests.fixtures.notifications import POISON_NOTIFICATIONS
from tests.fixtures.stack import DESTINATION

RECORDS = 100
SENDABLE = [b for b in POISON_NOTIFICATIONS if len(b) < 1024 * 1024]
"""The queue itself refuses bodies of 1 MiB or more (the parser's cap is tested alone)."""


def notified_only(setup) -> None:
    """No periodic re-listing within the test: only notifications move the worker."""
    text = setup.path.read_text().replace('relist_interval = "1s"', 'relist_interval = "600s"')
    setup.path.write_text(text)
    setup.config = load_config(setup.path)


def counter(metric) -> float:
    return float(metric.labels(DESTINATION)._value.get())


def queue_depth(local_stack, setup) -> int:
    sqs = local_stack.sqs()
    name = setup.config.region(DESTINATION).sqs_queue
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def start(setup) -> tuple[IngressService, threading.Thread]:
    setup.put_descriptor(1, export_start={0: 0})
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    wait_for(
        lambda: [w.status.state for w in service.workers.workers.values()] == ["caught-up"],
        "the worker did not start",
    )
    return service, runner


def replay_by_notification(local_stack, setup) -> None:
    setup.put_segment(0, 0, RECORDS - 1, segment_batch(0, RECORDS))
    wait_for(
        lambda: provenance_offsets(local_stack, setup, 0) == list(range(RECORDS)),
        "the segment's notification did not reach the worker",
    )


def test_poison_notifications_are_left_for_the_dead_letter_queue_and_the_reader_lives(
    local_stack, ingress_setup
):
    setup = ingress_setup()
    notified_only(setup)
    service, runner = start(setup)
    try:
        sqs = local_stack.sqs()
        url = sqs.get_queue_url(QueueName=setup.config.region(DESTINATION).sqs_queue)["QueueUrl"]
        for body in SENDABLE:
            sqs.send_message(QueueUrl=url, MessageBody=body)
        wait_for(
            lambda: counter(service.metrics.sqs_invalid) == len(SENDABLE),
            "the poison messages were not all counted as invalid",
        )
        replay_by_notification(local_stack, setup)
        assert counter(service.metrics.sqs_reader_restarts) == 0
        # Not deleted: still on the queue (invisible until their visibility timeout).
        assert queue_depth(local_stack, setup) >= len(SENDABLE)
    finally:
        service.request_stop()
        runner.join(60)


def test_a_reader_that_dies_is_started_again_and_reported(
    local_stack, ingress_setup, monkeypatch: pytest.MonkeyPatch
):
    setup = ingress_setup()
    notified_only(setup)
    real_pump = SqsBridge.pump_once
    calls = {"n": 0}

    def dies_once(self: SqsBridge, wait_seconds: int = 1) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("an unforeseen fault in the reader")
        return real_pump(self, wait_seconds)

    monkeypatch.setattr(SqsBridge, "pump_once", dies_once)
    service, runner = start(setup)
    try:
        wait_for(
            lambda: counter(service.metrics.sqs_reader_restarts) == 1,
            "the dead reader was not replaced",
        )
        replay_by_notification(local_stack, setup)
    finally:
        service.request_stop()
        runner.join(60)


def test_a_kill_after_kafka_acknowledged_and_before_the_sqs_delete_loses_nothing(
    local_stack, ingress_setup, tmp_path
):
    """The bridge deletes a message only after Kafka acknowledged its events: killed in
    between, the event is in the events topic *and* the message still on the queue, which
    redelivers it to the next instance; the duplicate event replays nothing twice."""
    setup = ingress_setup()
    notified_only(setup)
    setup.put_descriptor(1, export_start={0: 0})
    sqs = local_stack.sqs()
    url = sqs.get_queue_url(QueueName=setup.config.region(DESTINATION).sqs_queue)["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "3"})
    sqs.purge_queue(QueueUrl=url)  # the bucket's s3:TestEvent: the next message is ours
    crash_dir, logs = tmp_path / "crash", [tmp_path / "a.log", tmp_path / "b.log"]
    a = start_ingress(setup, logs[0], f"{SQS_AFTER_ACK_BEFORE_DELETE}:1", crash_dir)
    b = None
    try:
        wait_for(lambda: "owning 1 source partitions" in logs[0].read_text(), "a never started")
        key = setup.put_segment(0, 0, RECORDS - 1, segment_batch(0, RECORDS))
        assert a.wait(60) == -9, logs[0].read_text()[-3000:]
        hit = marker(crash_dir, SQS_AFTER_ACK_BEFORE_DELETE)
        assert hit is not None and hit["arrival"] == 1, hit
        s3_key = key.to_s3_key(setup.config.s3.prefix)
        assert events_naming(local_stack, setup, s3_key) == 1  # acknowledged by Kafka
        assert queue_depth(local_stack, setup) == 1  # and not deleted from the queue
        b = start_ingress(setup, logs[1])
        wait_for(
            lambda: events_naming(local_stack, setup, s3_key) == 2,
            "the message was not delivered again",
        )
        wait_for(lambda: queue_depth(local_stack, setup) == 0, "the message was not deleted")
        wait_for(
            lambda: provenance_offsets(local_stack, setup, 0) == list(range(RECORDS)),
            "the segment was not replayed exactly once",
        )
    finally:
        for process in (a, b):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(60)


def events_naming(local_stack, setup, s3_key: str) -> int:
    """Segment events on the events topic that name ``s3_key``."""
    ingress = setup.config.ingress
    values = [
        record[4]
        for partition in range(ingress.segment_events_partitions)
        for record in read_partition(
            local_stack.bootstrap(DESTINATION), ingress.segment_events_topic, partition
        )
    ]
    return sum(1 for value in values if json.loads(value)["key"] == s3_key)
