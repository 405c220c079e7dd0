"""The notification path on its own: S3 → SQS → the reader → the segment-events topic → the
worker. Re-listing is set to ten minutes, so a segment reaches the destination within the
test only if its notification does.

Poison messages on the queue are counted and left for the dead-letter queue with the reader
alive; a reader that dies anyway is started again and reported."""

from __future__ import annotations

import threading

import pytest

from ingress.service import IngressService
from ingress.sqs_bridge import SqsBridge
from replicator.core.config import load_config
from tests.fixtures.ingress import provenance_offsets, segment_batch, wait_for
from tests.fixtures.stack import DESTINATION
from tests.ingress.test_segment_events import POISON_NOTIFICATIONS

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
