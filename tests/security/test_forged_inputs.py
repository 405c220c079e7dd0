"""A signing deployment under a bucket writer and a queue sender at once, on the real path
(S3 → SQS → the segment-events topic → ingress → Kafka): forged notifications of a
segment that never existed, a forged consumer-group offsets object and a deeply nested
topic descriptor, beside a good topic with a good group. Each forgery is refused with a
line naming it; the good topic arrives exactly (every source offset once, in order, the
records exported after the forgeries too) and the good group is moved."""

from __future__ import annotations

import json
import logging
import threading
import time

from ingress.service import IngressService
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.offsets_file import GroupOffsets, group_offsets_s3_key, signed_json
from replicator.core.kafka import provenance
from replicator.core.kafka.clients import client_config
from replicator.core.segments.descriptor import describe, write_descriptor
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.signing import UNSIGNED
from replicator.core.segments.store import SegmentStore
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import segment_batch, wait_for
from tests.fixtures.signing import signed_config, store_with
from tests.fixtures.stack import DESTINATION, SOURCE

DEEP = b"[" * 100_000 + b"]" * 100_000
FIRST, LATER = 100, 50
LOST_SEGMENT_TIMEOUT, WRITER_IDLE_CLOSE = 2.0, 1.0


def replayed(local_stack, topic: str) -> list[int | None]:
    named = provenance.SourcePartition(SOURCE, topic, 0)
    return [
        provenance.source_offset(list(r[5]), named)
        for r in read_partition(local_stack.bootstrap(DESTINATION), f"{topic}.copy", 0)
    ]


def notification(s3_key: str) -> str:
    record = {
        "eventName": "ObjectCreated:Put",
        "eventTime": "2026-01-01T00:00:00.000Z",
        "s3": {"object": {"key": s3_key, "size": 1024}},
    }
    return json.dumps({"Records": [record]})


def test_forgeries_beside_a_good_topic_are_each_refused_and_named(
    local_stack, ingress_setup, unique, monkeypatch, caplog
):
    family = unique("forged")
    good, bad = f"{family}.good", f"{family}.bad"
    app, forged_app = unique("app"), unique("app")
    setup = ingress_setup(lost_segment_timeout=f"{LOST_SEGMENT_TIMEOUT}s")
    text = (
        setup.path.read_text()
        .replace(
            f'topic = "{setup.topic}"\ndestination_topic = "{setup.destination}"',
            f"topic_pattern = '{family}\\.[a-z]+'\ndestination_topic = \"{{topic}}.copy\"",
        )
        .replace(
            'relist_interval = "1s"',
            'relist_interval = "1s"\ndescriptor_interval = "500ms"\n'
            f'writer_idle_close = "{WRITER_IDLE_CLOSE}s"\non_lost_segment = "skip"\n'
            'group_sync_interval = "500ms"\nconsumer_groups = ["app-.*"]',
        )
    )
    setup.path.write_text(text)
    config = signed_config(setup.path, monkeypatch)
    signed = SegmentStore.for_region(config, DESTINATION)
    assert signed.keys.signs
    forger = store_with(signed, UNSIGNED)  # writes to the bucket, holds no key

    write_descriptor(signed, SOURCE, good, describe(good, 1, {}, SOURCE, {0: 0}))
    signed.write_segment(SegmentKey(SOURCE, good, 0, 0, 0, FIRST - 1), segment_batch(0, FIRST))
    bad_key = topic_descriptor_s3_key("data", SOURCE, bad)
    forger.client.put_object(Bucket=forger.bucket, Key=bad_key, Body=DEEP)
    signed.write_segment(SegmentKey(SOURCE, bad, 0, 0, 0, 9), segment_batch(0, 10))
    good_group_key = group_offsets_s3_key("data", SOURCE, good, app)
    signed.put_json(
        good_group_key,
        signed_json(GroupOffsets(SOURCE, good, app, {0: 40}, 1.0), good_group_key, signed.keys),
    )
    forged_group_key = group_offsets_s3_key("data", SOURCE, good, forged_app)
    forger.put_json(  # unsigned offsets at the end of everything: the application would skip
        forged_group_key, GroupOffsets(SOURCE, good, forged_app, {0: 2**62}, 1.0).to_json()
    )

    service = IngressService(config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    with caplog.at_level(logging.WARNING):
        runner.start()
        try:
            wait_for(
                lambda: not runner.is_alive() or replayed(local_stack, good) == list(range(FIRST)),
                f"{good} was not replayed",
            )
            assert runner.is_alive(), "ingress ended"
            phantom = SegmentKey(SOURCE, good, 0, 0, 500, 999_999).to_s3_key("data")
            sqs = local_stack.sqs()
            url = sqs.get_queue_url(QueueName=config.region(DESTINATION).sqs_queue)["QueueUrl"]
            deadline = time.monotonic() + 2 * LOST_SEGMENT_TIMEOUT
            while time.monotonic() < deadline:  # more often than writer_idle_close
                sqs.send_message(QueueUrl=url, MessageBody=notification(phantom))
                time.sleep(WRITER_IDLE_CLOSE / 4)
            signed.write_segment(
                SegmentKey(SOURCE, good, 0, 0, FIRST, FIRST + LATER - 1),
                segment_batch(FIRST, LATER),
            )
            admin = GroupAdmin(client_config(config.region(DESTINATION).kafka), DESTINATION)
            everything = list(range(FIRST + LATER))
            wait_for(
                lambda: (
                    not runner.is_alive()
                    or (
                        replayed(local_stack, good) == everything
                        and admin.committed(app) == {(f"{good}.copy", 0): 40}
                    )
                ),
                f"{good} or its group did not arrive",
            )
            assert runner.is_alive(), "ingress ended"
            halted = [
                w.status for w in service.workers.workers.values() if w.status.state == "halted"
            ]
            assert halted == [], halted
        finally:
            service.request_stop()
            runner.join(60)

    assert replayed(local_stack, good) == everything
    assert admin.committed(forged_app) == {}
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(bad_key in m and "nested too deep" in m for m in errors), errors
    assert any(forged_group_key in m and "unsigned" in m for m in errors), errors
    lines = [r.getMessage() for r in caplog.records]
    assert not any("did not appear" in m for m in lines), "a phantom segment was given up"
    destination_topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert f"{bad}.copy" not in destination_topics
