"""A signal to egress's whole process group (Ctrl-C in a terminal, systemd's default
stop, container runtimes) stops it as a signal to its pid does: the running batch
finished, exit status 0, no traceback — the JVM in the group must not stop the
SparkContext under the graceful stop."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Producer

from tests.fixtures.egress import create_topic, segment_count, start_egress
from tests.fixtures.spark import kill_group
from tests.fixtures.stack import SOURCE


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_process_group_stops_egress_cleanly(
    local_stack, egress_config, unique, tmp_path, signum
):
    topic = unique("grouped")
    create_topic(local_stack, topic, 1)
    config, config_path = egress_config({topic: {"max_segment_age": "1s"}})
    log = tmp_path / "egress.log"
    process = start_egress(config_path, log)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    try:
        for i in range(50):
            producer.produce(topic, value=b"v%d" % i, partition=0)
        producer.flush(30)
        deadline = time.monotonic() + 120
        while segment_count(local_stack, config, topic) == 0:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.3)
        os.killpg(process.pid, signum)
        code = process.wait(120)
    finally:
        kill_group(process)
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert "Traceback" not in text and "Py4JJavaError" not in text, text[-3000:]
