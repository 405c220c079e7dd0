"""The peers' pure parts: MirrorMaker 2's configuration and offsets, the limit's summary."""

import json

import pytest

from bench.compiled_limit import summary
from bench.mirror_maker import copied_offset, mm2_properties, offsets_topic


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
