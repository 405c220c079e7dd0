"""kill -9 of the whole egress job (driver, JVM, Python workers) at each moment of a
micro-batch: mid multipart upload (in a worker), all segments uploaded before any commit,
and the consumer group committed before Spark's commit log. Each test shows the kill hit
its moment (the marker, and the bucket, the group and Spark's checkpoint as that moment
leaves them), then that a second run exports every record exactly once.

Spark calls the sink's commit (which commits the consumer group) before it writes the
batch to its commit log, so those are the two windows a batch has after its uploads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from replicator.core.faults import (
    EGRESS_AFTER_GROUP_COMMIT_BEFORE_SPARK_COMMIT,
    EGRESS_AFTER_UPLOAD_BEFORE_COMMITS,
    S3_MID_MULTIPART_UPLOAD,
    marker,
)
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import assert_tiles, read_partition, s3_segments
from tests.fixtures.spark import kill_group
from tests.fixtures.stack import SOURCE

PARTITIONS = 2


def run_egress(config_path: Path, log: Path, crash: str | None, crash_dir: Path) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLICATOR_CRASH_")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    if crash:
        env |= {"REPLICATOR_CRASH_POINT": crash, "REPLICATOR_CRASH_DIR": str(crash_dir)}
    process = subprocess.Popen(
        [sys.executable, "-m", "replicator", "egress", "--config", str(config_path),
         "--stop-at-end"],
        cwd=config_path.parent,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )  # fmt: skip
    try:
        return process.wait(300)
    finally:
        kill_group(process)


def committed(bootstrap: str, group: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        asked = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return [tp.offset for tp in consumer.committed(asked, timeout=10)]
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, count: int, value_size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        producer.produce(topic, key=b"%d" % i, value=os.urandom(value_size), partition=i % 2)
    producer.flush(30)


def assert_exported_exactly(local_stack, config, topic: str) -> None:
    found = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)
    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
        assert_tiles(found[partition], 0, source[-1][0])
        assert [r for s in found[partition] for r in s.records()] == source


@pytest.mark.parametrize(
    "point", [EGRESS_AFTER_UPLOAD_BEFORE_COMMITS, EGRESS_AFTER_GROUP_COMMIT_BEFORE_SPARK_COMMIT]
)
def test_a_kill_between_the_uploads_and_the_commits_loses_and_repeats_nothing(
    local_stack, egress_config, unique, tmp_path, point
):
    topic = unique("crash")
    create_topic(local_stack, topic, PARTITIONS)
    produce(local_stack.bootstrap(SOURCE), topic, 400, 100)
    config, path = egress_config({topic: {"max_segment_messages": 150}})
    log, crash_dir = tmp_path / "egress.log", tmp_path / "crash"

    assert run_egress(path, log, f"{point}:1", crash_dir) == -9, log.read_text()[-3000:]
    hit = marker(crash_dir, point)
    assert hit is not None and hit["arrival"] == 1, hit
    # The moment: the first batch's segments are all in the bucket, Spark's commit log
    # does not have the batch; the group has committed it only after the group commit.
    listed = s3_segments(local_stack.s3(), config.bucket(SOURCE), "data", SOURCE, topic)
    assert all(listed[p] for p in range(PARTITIONS)), listed
    checkpoint = Path(config.egress.checkpoint_location)
    assert (checkpoint / "offsets" / "0").exists()
    assert not (checkpoint / "commits" / "0").exists()
    group = committed(local_stack.bootstrap(SOURCE), config.egress.group_id, topic)
    ends = [max(s.end for s in listed[p]) + 1 for p in range(PARTITIONS)]
    if point == EGRESS_AFTER_UPLOAD_BEFORE_COMMITS:
        assert all(offset < 0 for offset in group), group  # nothing committed yet
    else:
        assert group == ends, (group, ends)

    assert run_egress(path, log, None, crash_dir) == 0, log.read_text()[-3000:]
    assert (checkpoint / "commits" / "0").exists()
    assert_exported_exactly(local_stack, config, topic)


def test_a_kill_mid_multipart_upload_leaves_no_object_and_the_rerun_completes(
    local_stack, egress_config, unique, tmp_path
):
    topic = unique("multipart")
    create_topic(local_stack, topic, PARTITIONS)
    produce(local_stack.bootstrap(SOURCE), topic, 14_000, 1000)  # ~7 MB a partition
    config, path = egress_config({topic: {"max_segment_bytes": "64MiB"}})
    path.write_text(path.read_text().replace("[s3]\n", '[s3]\nmultipart_part_size = "5MiB"\n'))
    log, crash_dir = tmp_path / "egress.log", tmp_path / "crash"

    point = S3_MID_MULTIPART_UPLOAD
    assert run_egress(path, log, f"{point}:1", crash_dir) == -9, log.read_text()[-3000:]
    hit = marker(crash_dir, point)
    assert hit is not None and hit["arrival"] == 1, hit
    s3, bucket = local_stack.s3(), config.bucket(SOURCE)
    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=f"data/{SOURCE}/{topic}/")
    in_progress = [u["Key"] for u in uploads.get("Uploads", [])]
    assert in_progress, "no multipart upload in progress at the kill"
    objects = s3.list_objects_v2(Bucket=bucket, Prefix=f"data/{SOURCE}/{topic}/")
    present = {o["Key"] for o in objects.get("Contents", [])}
    assert not present & set(in_progress)  # an unfinished segment is no object

    assert run_egress(path, log, None, crash_dir) == 0, log.read_text()[-3000:]
    assert_exported_exactly(local_stack, config, topic)
