"""Egress on a Spark standalone cluster: the tasks run in executor processes."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.fixtures.egress import PARTITIONS, create_topic, start_egress
from tests.fixtures.independent import assert_tiles, read_partition, s3_segments
from tests.fixtures.spark import kill_group
from tests.fixtures.stack import SOURCE


def test_egress_runs_on_a_standalone_cluster(
    local_stack, egress_config, unique, standalone_cluster, tmp_path
):
    topic = unique("cluster")
    create_topic(local_stack, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(400):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    producer.flush(30)
    config, config_path = egress_config({topic: {"max_segment_messages": 60}})
    log = tmp_path / "egress.log"
    process = start_egress(config_path, log, "--stop-at-end", "--master", standalone_cluster)
    try:
        assert process.wait(300) == 0, log.read_text()[-5000:]
    finally:
        kill_group(process)
    segments = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)
    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
        assert_tiles(segments[partition], 0, source[-1][0])
        assert [r for s in segments[partition] for r in s.records()] == source
    # The tasks ran in executor processes of the worker, not in the driver, importing the
    # project from the environment the job shipped (the worker's Python has none of it).
    assert list((tmp_path / "work").glob("app-*/*/stderr")), "no executor ran on the worker"
    shipped = list((tmp_path / "work").glob("app-*/*/replicator-env/egress/segment_sink.py"))
    assert shipped, "the executors did not unpack the shipped environment"


def test_executors_without_the_drivers_python_are_reported_as_such(
    local_stack, egress_config, unique, standalone_cluster, tmp_path
):
    topic = unique("nopython")
    create_topic(local_stack, topic, 1)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    producer.flush(30)
    _, config_path = egress_config({topic: {}})
    config_path.write_text(config_path.read_text() + '[spark]\nexecutor_python = "python3.99"\n')
    log = tmp_path / "egress.log"
    process = start_egress(config_path, log, "--stop-at-end", "--master", standalone_cluster)
    try:
        assert process.wait(300) == 1
    finally:
        kill_group(process)
    assert "the executors cannot start 'python3.99'" in log.read_text(), log.read_text()[-3000:]
