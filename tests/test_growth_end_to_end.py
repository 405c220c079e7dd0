"""A source topic grows from 4 to 6 partitions (CreatePartitions) while egress and ingress
stream: egress exports the new partitions from their first offset, ingress grows the
destination and replays them, every record arrives exactly once; a restart of both
afterwards goes on without repeating anything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import NewPartitions

from replicator.core.kafka import provenance
from replicator.core.kafka.clients import await_leaders
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import read_partition
from tests.fixtures.pipeline import pipeline_toml, wait_for_replication
from tests.fixtures.stack import DESTINATION, SOURCE


def config_text(local_stack, unique, tmp_path: Path, topic: str, copy: str) -> str:
    return pipeline_toml(
        local_stack,
        unique,
        tmp_path,
        topic,
        copy,
        egress='trigger_interval = "250ms"\n[egress.defaults]\nmax_segment_age = "1s"',
        topic_limits="max_segment_messages = 200",
        ingress='descriptor_interval = "500ms"',
    )


def start(service: str, config: Path, log: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "replicator", service, "--config", str(config), *args],
        cwd=config.parent,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )


def stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    return process.returncode


def produce(local_stack, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 5})
    for i in range(partitions * per_partition):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    producer.flush(30)


def exact(local_stack, topic: str, copy: str, partitions: int) -> bool:
    try:
        for partition in range(partitions):
            source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
            copied = read_partition(local_stack.bootstrap(DESTINATION), copy, partition)
            named = provenance.SourcePartition(SOURCE, topic, partition)
            if [provenance.source_offset(list(r[5]), named) for r in copied] != [
                r[0] for r in source
            ]:
                return False
        return True
    except Exception:  # a destination partition not there yet
        return False


def wait_exact(local_stack, topic, copy, partitions, processes, logs) -> None:
    deadline = time.monotonic() + 150
    while not exact(local_stack, topic, copy, partitions):
        for process, log in zip(processes, logs, strict=True):
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, "\n".join(
            log.read_text(errors="replace")[-2000:] for log in logs
        )
        time.sleep(1)


def test_a_source_that_grows_while_egress_and_ingress_stream_arrives_exactly(
    local_stack, unique, tmp_path
):
    topic, copy = unique("growing"), unique("growing.copy")
    path = tmp_path / "replicator.toml"
    path.write_text(config_text(local_stack, unique, tmp_path, topic, copy))
    create_topic(local_stack, topic, 4)
    produce(local_stack, topic, 4, 300)
    logs = [tmp_path / "egress.log", tmp_path / "ingress.log"]
    processes = [start("egress", path, logs[0]), start("ingress", path, logs[1])]
    try:
        wait_exact(local_stack, topic, copy, 4, processes, logs)
        admin = local_stack.admin(SOURCE)
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(timeout=30)
        await_leaders(admin, topic, 6)
        produce(local_stack, topic, 6, 300)
        wait_exact(local_stack, topic, copy, 6, processes, logs)
    finally:
        codes = [stop(p) for p in processes]
    assert codes == [0, 0], "\n".join(log.read_text(errors="replace")[-3000:] for log in logs)
    topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert len(topics[copy].partitions) == 6

    # A restart of both after the growth: the records added since, nothing twice.
    produce(local_stack, topic, 6, 50)
    egress = start("egress", path, logs[0], "--stop-at-end")
    assert egress.wait(300) == 0, logs[0].read_text(errors="replace")[-3000:]
    wait_for_replication(local_stack, topic)
    ingress = start("ingress", path, logs[1], "--stop-at-end")
    try:
        assert ingress.wait(300) == 0, logs[1].read_text(errors="replace")[-3000:]
    finally:
        stop(ingress)
    assert exact(local_stack, topic, copy, 6)
