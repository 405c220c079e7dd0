"""Egress as separate processes: killed with SIGKILL mid-run, and on a Spark standalone
cluster (separate executor processes catch pickling mistakes that local mode hides)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest
from confluent_kafka import Producer

from egress.job import EgressJob
from infra.stack import free_port
from tests.conftest import SOURCE
from tests.egress.conftest import create_topic, finish_bursts
from tests.independent import assert_tiles, read_partition, s3_segments

PARTITIONS = 4


def start_egress(config_path: Path, log: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.Popen(
        [sys.executable, "-m", "replicator", "egress", "--config", str(config_path), *args],
        cwd=config_path.parent,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the driver and everything it started (its Spark JVM, Python workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def segment_count(local_stack, config, topic) -> int:
    """How many objects egress wrote for ``topic`` (a listing only)."""
    listing = local_stack.s3().list_objects_v2(
        Bucket=config.region(SOURCE).bucket, Prefix=f"data/{SOURCE}/{topic}/"
    )
    return sum(1 for item in listing.get("Contents", []) if not item["Key"].endswith(".json"))


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
        finish_bursts(producer, topic, range(PARTITIONS))

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

    segments = s3_segments(local_stack.s3(), config.region(SOURCE).bucket, "data", SOURCE, topic)
    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
        assert_tiles(segments[partition], 0, source[-1][0])
        exported = [r for s in segments[partition] for r in s.records()]
        assert exported == source, f"partition {partition}: records lost or duplicated"


@pytest.fixture
def standalone_cluster(tmp_path):
    """A Spark master and one worker from the pyspark distribution, on loopback."""
    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
    }
    logs = tmp_path / "cluster.log"
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
        ],
        env=env,
        stdout=logs.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    worker = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            "2g",
            "--webui-port",
            str(worker_ui),
            "--work-dir",
            str(tmp_path / "work"),
            f"spark://127.0.0.1:{port}",
        ],
        env=env,
        stdout=logs.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
                    if json.load(r).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, logs.read_text()[-3000:]
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in (worker, master):
            kill_group(process)


def test_egress_runs_on_a_standalone_cluster(
    local_stack, egress_config, unique, standalone_cluster, tmp_path
):
    topic = unique("cluster")
    create_topic(local_stack, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(400):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    finish_bursts(producer, topic, range(PARTITIONS))
    config, config_path = egress_config({topic: {"max_segment_messages": 60}})
    log = tmp_path / "egress.log"
    process = start_egress(config_path, log, "--stop-at-end", "--master", standalone_cluster)
    try:
        assert process.wait(300) == 0, log.read_text()[-5000:]
    finally:
        kill_group(process)
    segments = s3_segments(local_stack.s3(), config.region(SOURCE).bucket, "data", SOURCE, topic)
    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
        assert_tiles(segments[partition], 0, source[-1][0])
        assert [r for s in segments[partition] for r in s.records()] == source
    # The tasks ran in executor processes of the worker, not in the driver.
    assert list((tmp_path / "work").glob("app-*/*/stderr")), "no executor ran on the worker"


def test_streaming_picks_up_new_topics_serves_metrics_and_stops_cleanly_on_sigterm(
    local_stack, egress_config, unique, tmp_path
):
    # The local broker cannot add partitions to a topic (no CreatePartitions), so a topic
    # created mid-run and matched by topic_pattern exercises the same path: partitions the
    # checkpoint has never seen start at their log start.
    family = unique("live")
    first, second = f"{family}.a", f"{family}.b"
    create_topic(local_stack, first, 1)
    port = free_port()
    config, config_path = egress_config({}, topic_pattern=f"{family}\\\\..*", metrics_port=port)
    config_path.write_text(config_path.read_text() + '[egress.defaults]\nmax_segment_age = "1s"\n')
    log = tmp_path / "egress.log"
    process = start_egress(config_path, log)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    try:
        for i in range(20):
            producer.produce(first, value=b"a%d" % i, partition=0)
        finish_bursts(producer, first, [0])
        deadline = time.monotonic() + 120
        while segment_count(local_stack, config, first) == 0:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.3)
        create_topic(local_stack, second, 1)
        for i in range(15):
            producer.produce(second, value=b"b%d" % i, partition=0)
        finish_bursts(producer, second, [0])
        while segment_count(local_stack, config, second) == 0:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "a topic created mid-run was not picked up"
            time.sleep(0.3)
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            sample = f'partition="0",region="{SOURCE}",topic="{second}"}} 16.0'
            if f"replicator_egress_records_total{{{sample}" in text:
                break
            assert time.monotonic() < deadline, text[-3000:]
            time.sleep(1)
        assert "replicator_egress_lag_records" in text
        assert "replicator_egress_batch_duration_seconds_bucket" in text
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0, log.read_text()[-3000:]
    finally:
        kill_group(process)
    segments = s3_segments(local_stack.s3(), config.region(SOURCE).bucket, "data", SOURCE, second)
    assert_tiles(segments[0], 0, 15)
    assert [r for s in segments[0] for r in s.records()] == read_partition(
        local_stack.bootstrap(SOURCE), second, 0
    )
