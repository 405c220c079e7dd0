"""Forged S3 notifications on the real path: SQS → the reader → the segment-events topic →
the worker. Whoever can send to the queue can announce any key; an announced segment past
the end of the data that no object holds must not become a lost segment: the partition
neither halts nor skips, and the records exported next arrive."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.segments.key import SegmentKey
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import provenance_offsets, segment_batch, wait_for
from tests.fixtures.stack import DESTINATION, SOURCE

REPLAYED, EXPORTED_LATER = 101, 50
LOST_SEGMENT_TIMEOUT, WRITER_IDLE_CLOSE = 2.0, 1.0


def forged_notification(s3_key: str) -> str:
    record = {
        "eventName": "ObjectCreated:Put",
        "eventTime": "2026-01-01T00:00:00.000Z",
        "s3": {"object": {"key": s3_key, "size": 1024}},
    }
    return json.dumps({"Records": [record]})


def events_naming(local_stack, setup, s3_key: str) -> int:
    """Segment events on the events topic that name ``s3_key``."""
    ingress = setup.config.ingress
    return sum(
        1
        for partition in range(ingress.segment_events_partitions)
        for record in read_partition(
            local_stack.bootstrap(DESTINATION), ingress.segment_events_topic, partition
        )
        if json.loads(record[4])["key"] == s3_key
    )


@pytest.mark.parametrize("on_lost_segment", ["skip", "fail"])
def test_forged_notifications_of_a_missing_segment_neither_halt_nor_skip(
    local_stack, ingress_setup, on_lost_segment
):
    setup = ingress_setup(lost_segment_timeout=f"{LOST_SEGMENT_TIMEOUT}s")
    text = setup.path.read_text().replace(
        'relist_interval = "1s"',
        f'relist_interval = "1s"\nwriter_idle_close = "{WRITER_IDLE_CLOSE}s"\n'
        f'on_lost_segment = "{on_lost_segment}"',
    )
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, REPLAYED - 1, segment_batch(0, REPLAYED))
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        wait_for(
            lambda: provenance_offsets(local_stack, setup, 0) == list(range(REPLAYED)),
            "the first records were not replayed",
        )
        forged = SegmentKey(SOURCE, setup.topic, 0, 0, 500, 999_999).to_s3_key("data")
        sqs = local_stack.sqs()
        url = sqs.get_queue_url(QueueName=setup.config.region(DESTINATION).sqs_queue)["QueueUrl"]
        sent = 0
        deadline = time.monotonic() + 2 * LOST_SEGMENT_TIMEOUT
        while time.monotonic() < deadline:  # more often than writer_idle_close
            sqs.send_message(QueueUrl=url, MessageBody=forged_notification(forged))
            sent += 1
            time.sleep(WRITER_IDLE_CLOSE / 4)
        wait_for(
            lambda: events_naming(local_stack, setup, forged) == sent,
            "the forged notifications did not all reach the events topic",
        )
        setup.put_segment(
            0, REPLAYED, REPLAYED + EXPORTED_LATER - 1, segment_batch(REPLAYED, EXPORTED_LATER)
        )
        everything = list(range(REPLAYED + EXPORTED_LATER))
        worker = next(iter(service.workers.workers.values()))
        wait_for(
            lambda: (
                provenance_offsets(local_stack, setup, 0) == everything
                or worker.status.state == "halted"
            ),
            "the records exported after the forged notifications did not arrive",
            timeout=20,
        )
        assert worker.status.state != "halted", worker.status
        assert provenance_offsets(local_stack, setup, 0) == everything
    finally:
        service.request_stop()
        runner.join(60)
