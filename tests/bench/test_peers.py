"""The peers' pure parts: MirrorMaker 2's configuration, offsets and failures, the limit's
summary."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compiled_limit import summary
from bench.mirror_maker import (
    MirrorMaker,
    PeerFailedError,
    copied_offset,
    dead_task,
    mm2_properties,
    offsets_topic,
)


def parse(properties: str) -> dict[str, str]:
    pairs = (line.split(" = ", 1) for line in properties.splitlines() if line)
    return {name: value for name, value in pairs}


def test_mirror_maker_copies_one_topic_one_way_exactly_once_keeping_its_name():
    settings = parse(mm2_properties("127.0.0.1:1", "127.0.0.1:2", "bench", 8))
    assert settings["clusters"] == "east, west"
    assert settings["east.bootstrap.servers"] == "127.0.0.1:1"
    assert settings["west.bootstrap.servers"] == "127.0.0.1:2"
    assert (settings["east->west.enabled"], settings["east->west.topics"]) == ("true", "bench")
    assert settings["west->east.enabled"] == "false"
    assert settings["replication.policy.class"].endswith(".IdentityReplicationPolicy")
    # A worker setting: only the target cluster's prefixed form reaches its worker.
    assert settings["west.exactly.once.source.support"] == "enabled"
    assert "exactly.once.source.support" not in settings
    assert settings["tasks.max"] == "8"
    assert all(v == "1" for k, v in settings.items() if k.endswith("replication.factor"))


def test_only_the_flows_own_source_offsets_are_read_from_the_offsets_topic():
    assert offsets_topic() == "mm2-offsets.east.internal"

    def key(connector: str, cluster: str, topic: str, partition: int) -> bytes:
        source = {"cluster": cluster, "partition": partition, "topic": topic}
        return json.dumps([connector, source]).encode()

    value = json.dumps({"offset": 41}).encode()
    assert copied_offset(key("MirrorSourceConnector", "east", "bench", 3), value, "bench") == (
        3,
        41,
    )
    assert copied_offset(key("MirrorSourceConnector", "east", "other", 3), value, "bench") is None
    assert copied_offset(key("MirrorSourceConnector", "west", "bench", 3), value, "bench") is None
    assert (
        copied_offset(key("MirrorCheckpointConnector", "east", "bench", 3), value, "bench") is None
    )
    assert copied_offset(key("MirrorSourceConnector", "east", "bench", 3), None, "bench") is None


DIED = """\
2026-11-29T17:00:56,914 ERROR [task-thread-MirrorSourceConnector-7] org.apache.kafka.connect.storage.OffsetStorageWriter - Invalid call to OffsetStorageWriter beginFlush() while already flushing, the framework should not allow this
2026-11-29T17:00:56,933 ERROR [task-thread-MirrorSourceConnector-7] org.apache.kafka.connect.runtime.WorkerTask - ExactlyOnceWorkerSourceTask{id=MirrorSourceConnector-7} Task threw an uncaught and unrecoverable exception. Task is being killed and will not recover until manually restarted
org.apache.kafka.connect.errors.ConnectException: Failed to flush offsets and/or records for task MirrorSourceConnector-7
\tat org.apache.kafka.connect.runtime.ExactlyOnceWorkerSourceTask.maybeWrapProducerSendException(ExactlyOnceWorkerSourceTask.java:355)
Caused by: org.apache.kafka.connect.errors.ConnectException: OffsetStorageWriter is already flushing
\tat org.apache.kafka.connect.storage.OffsetStorageWriter.beginFlush(OffsetStorageWriter.java:120)
2026-11-29T17:00:57,111 INFO  [task-thread-MirrorSourceConnector-7] org.apache.kafka.clients.FetchSessionHandler - done
"""  # noqa: E501 (MirrorMaker 2 4.1.1's own lines)


def test_a_task_that_died_is_named_with_its_cause():
    assert dead_task(DIED) == (
        "ExactlyOnceWorkerSourceTask{id=MirrorSourceConnector-7} Task threw an uncaught and "
        "unrecoverable exception. Task is being killed and will not recover until manually "
        "restarted; Caused by: org.apache.kafka.connect.errors.ConnectException: "
        "OffsetStorageWriter is already flushing"
    )
    assert dead_task(DIED.replace("Caused by", "Then")) is not None
    assert dead_task(DIED.replace("Task threw", "Task did not throw")) is None
    # The cause is the dead task's own, not a later record's.
    later = DIED.replace("Caused by: ", "").replace("done", "x\nCaused by: another")
    assert dead_task(later).endswith("manually restarted")  # type: ignore[union-attr]


def test_a_running_mirror_maker_whose_task_died_fails_the_measurement(tmp_path: Path):
    mirror = MirrorMaker(tmp_path, "")
    mirror.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        first_line, rest = DIED.split("\n", 1)
        mirror.log.write_text(first_line + "\n")
        mirror.running()  # nothing died yet
        with mirror.log.open("a") as log:
            log.write(rest)
        with pytest.raises(PeerFailedError, match=r"MirrorSourceConnector-7.*already flushing"):
            mirror.running()
    finally:
        mirror.process.kill()
        mirror.process.wait()
    with pytest.raises(PeerFailedError, match="exited"):
        mirror.running()


def run(records: int, seconds: float) -> dict[str, float]:
    return {
        "records": records,
        "bytes": records * 227,
        "objects": 8,
        "seconds": seconds,
        "process_seconds": seconds + 1,
        "cpu_seconds": seconds * 1.5,
    }


def test_the_limit_summary_gives_each_directions_rate():
    figures = summary(run(1_000_000, 2.0), run(1_000_000, 4.0), 1_000_000)
    assert figures["to_s3_records_per_s"] == 500_000
    assert figures["from_s3_records_per_s"] == 250_000
    assert figures["to_s3_mb_per_s"] == pytest.approx(113.5)
    assert figures["from_s3_cpu_seconds_per_million_records"] == 6.0


def test_a_limit_run_that_moved_another_number_of_records_is_refused():
    with pytest.raises(ValueError, match=r"S3 -> Kafka moved 999999 of 1000000 records"):
        summary(run(1_000_000, 2.0), run(999_999, 4.0), 1_000_000)
