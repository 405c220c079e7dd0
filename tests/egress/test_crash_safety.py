"""Egress killed with SIGKILL (driver, JVM and Python workers together) at three moments
of a run: each record ends up in exactly one segment."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from egress.job import EgressJob
from tests.fixtures.egress import (
    PARTITIONS,
    create_topic,
    segment_count,
    start_egress,
)
from tests.fixtures.independent import assert_tiles, read_partition, s3_segments
from tests.fixtures.spark import kill_group
from tests.fixtures.stack import SOURCE


def test_kill_9_at_three_moments_leaves_each_record_exactly_once(
    local_stack, egress_config, unique, spark, tmp_path
):
    topic = unique("crash")
    create_topic(local_stack, topic, PARTITIONS)
    config, config_path = egress_config(
        {topic: {"max_segment_messages": 150, "max_segment_age": "1s"}}
    )
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 2})
        i = 0
        while not stop.is_set():
            for _ in range(8):
                producer.produce(
                    topic,
                    key=b"%d" % i,
                    value=b"record-%d" % i,
                    partition=i % PARTITIONS,
                    headers=[("n", b"%d" % i)],
                )
                i += 1
            producer.poll(0)
            time.sleep(0.1)  # ~80 records/s
        producer.flush(30)

    producer_thread = threading.Thread(target=produce)
    producer_thread.start()
    log = tmp_path / "egress.log"
    try:
        for delay in (0.0, 0.7, 1.9):  # after new segments appear: three different moments
            before = segment_count(local_stack, config, topic)
            process = start_egress(config_path, log)
            deadline = time.monotonic() + 120
            while segment_count(local_stack, config, topic) <= before:
                assert process.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "egress wrote nothing in time"
                time.sleep(0.2)
            time.sleep(delay)
            kill_group(process)
    finally:
        stop.set()
        producer_thread.join(60)

    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()

    segments = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)
    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
        assert_tiles(segments[partition], 0, source[-1][0])
        exported = [r for s in segments[partition] for r in s.records()]
        assert exported == source, f"partition {partition}: records lost or duplicated"
