"""Source Kafka -> egress -> S3 replication -> SQS -> ingress -> destination Kafka."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from confluent_kafka import Producer

from egress.job import EgressJob
from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.kafka import provenance
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import read_partition
from tests.fixtures.pipeline import pipeline_toml, wait_for_replication
from tests.fixtures.records import produce_every_shape
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 3


def test_records_cross_regions_exactly_once_with_every_shape(local_stack, unique, spark, tmp_path):
    topic, copy = unique("orders"), unique("orders.copy")
    config_text = pipeline_toml(local_stack, unique, tmp_path, topic, copy)
    path = tmp_path / "replicator.toml"
    path.write_text(config_text)
    config = load_config(path)
    create_topic(local_stack, topic, PARTITIONS)  # not compacted: some shapes have no key
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    produce_every_shape(producer, topic, PARTITIONS, 12, lambda _r, n: 1_700_000_000_000 + n)
    producer.flush(30)

    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()

    wait_for_replication(local_stack, topic)

    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0

    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), topic, partition)
        copied = read_partition(local_stack.bootstrap(DESTINATION), copy, partition)
        assert [
            provenance.source_offset(
                list(r[5]), provenance.SourcePartition(SOURCE, topic, partition)
            )
            for r in copied
        ] == [r[0] for r in source]
        strip = lambda headers: tuple(h for h in headers if h[0] != provenance.HEADER)  # noqa: E731
        assert [(r[1], r[3], r[4], strip(r[5])) for r in copied] == [
            (r[1], r[3], r[4], r[5]) for r in source
        ]
    topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert len(topics[copy].partitions) == PARTITIONS

    # `replicator status` agrees with the stack: nothing left to export or replay.
    from tests.fixtures.independent import watermarks

    result = subprocess.run(
        [sys.executable, "-m", "replicator", "status", "--config", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = [r for r in json.loads(result.stdout) if r["topic"] == topic]
    assert [r["partition"] for r in rows] == list(range(PARTITIONS))
    for row in rows:
        _, high = watermarks(local_stack.bootstrap(SOURCE), topic, row["partition"])
        assert row["source_end"] == high
        assert row["exported_end"] == high
        assert row["replayed_end"] == high
        assert (row["egress_lag_records"], row["ingress_lag_records"]) == (0, 0)
        assert row["segments"] and not row["halted"]

    # With both clusters unreachable it still reports what S3 says.
    down = tmp_path / "down.toml"
    down.write_text(
        re.sub(
            r'bootstrap_servers = "127\.0\.0\.1:\d+"',
            'bootstrap_servers = "127.0.0.1:9"',
            config_text,
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "replicator", "status", "--config", str(down)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if f"{SOURCE}/{topic}  0 " in x)
    assert "unreachable" in line and str(rows[0]["exported_end"]) in line
