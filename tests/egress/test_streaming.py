"""Streaming egress as a process: topics created mid-run are picked up, metrics are
served, and SIGTERM stops it cleanly after the running batch."""

from __future__ import annotations

import signal
import time
import urllib.request

from confluent_kafka import Producer

from infra.ports import free_port
from tests.fixtures.egress import create_topic, segment_count, start_egress
from tests.fixtures.independent import assert_tiles, read_partition, s3_segments
from tests.fixtures.logs import json_lines
from tests.fixtures.probes import probe
from tests.fixtures.spark import kill_group
from tests.fixtures.stack import SOURCE


def test_streaming_picks_up_new_topics_serves_metrics_and_stops_cleanly_on_sigterm(
    local_stack, egress_config, unique, tmp_path
):
    # A topic created mid-run and matched by topic_pattern: partitions the checkpoint has
    # never seen start at their log start (partitions added to a topic mid-run:
    # tests/test_growth_end_to_end.py).
    family = unique("live")
    first, second = f"{family}.a", f"{family}.b"
    create_topic(local_stack, first, 1)
    port = free_port()
    config, config_path = egress_config(
        {}, topic_pattern=f"{family}\\\\..*", metrics_port=port, stall_timeout="4s"
    )
    config_path.write_text(config_path.read_text() + '[egress.defaults]\nmax_segment_age = "1s"\n')
    log = tmp_path / "egress.log"
    process = start_egress(config_path, log, log_format="json")
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    try:
        for i in range(20):
            producer.produce(first, value=b"a%d" % i, partition=0)
        producer.flush(30)
        deadline = time.monotonic() + 120
        while segment_count(local_stack, config, first) == 0:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.3)
        create_topic(local_stack, second, 1)
        for i in range(15):
            producer.produce(second, value=b"b%d" % i, partition=0)
        producer.flush(30)
        while segment_count(local_stack, config, second) == 0:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "a topic created mid-run was not picked up"
            time.sleep(0.3)
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            sample = f'partition="0",region="{SOURCE}",topic="{second}"}} 15.0'
            if f"replicator_egress_records_total{{{sample}" in text:
                break
            assert time.monotonic() < deadline, text[-3000:]
            time.sleep(1)
        assert "replicator_egress_lag_records" in text
        assert "replicator_egress_batch_duration_seconds_bucket" in text
        # Probes: live and ready while batches finish; a batch stuck on the bucket makes it
        # unready (not dead: the driver's loop still turns), and it is ready again after.
        assert probe(port, "/healthz")[0] == 200
        wait_until(lambda: probe(port, "/readyz")[0] == 200, "egress never ready")
        with local_stack.paused("s3"):
            for i in range(5):
                producer.produce(second, value=b"c%d" % i, partition=0)
            producer.flush(30)
            # One answer says both, and why: a trigger merely slow under load can be
            # unready for a moment too, and is ready again once it finishes.
            wait_until(lambda: stuck_batch_unready(port), "a stuck batch stayed ready")
        wait_until(lambda: probe(port, "/readyz")[0] == 200, "not ready after the bucket came back")
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0, log.read_text()[-3000:]
    finally:
        kill_group(process)
    # --log-format json: every line one JSON object, Spark's JVM's among them.
    loggers = {str(line["logger"]) for line in json_lines(log.read_text())}
    assert any(name.startswith("org.apache.spark") for name in loggers), sorted(loggers)
    segments = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, second)
    source = read_partition(local_stack.bootstrap(SOURCE), second, 0)
    assert len(source) == 20
    assert_tiles(segments[0], 0, source[-1][0])
    assert [r for s in segments[0] for r in s.records()] == source


def stuck_batch_unready(port: int) -> bool:
    """Whether one answer of ``/readyz`` is 503 because a trigger has made no progress."""
    status, body = probe(port, "/readyz")
    return status == 503 and body["checks"]["triggers"]["detail"].startswith("no progress for")


def wait_until(condition, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)
