"""Active-active: two regions export and replay the same topic name into each other.

With ``skip_replicated`` egress leaves the records the other region's ingress wrote out of
its segments, so nothing travels back: without it every record would return to the
region it came from, a second time (and forever after).
"""

from __future__ import annotations

from collections import Counter

from confluent_kafka import Producer

from egress.job import EgressJob
from infra.replication import BucketReplicator
from ingress.service import IngressService
from replicator.core.config import Config, load_config
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 2


def region_config(local_stack, tmp_path, unique, topic: str, home: str, other: str) -> Config:
    """Egress of ``home``'s ``topic``; ingress in ``home`` of ``other``'s, into ``topic``."""
    regions = local_stack.config_path.read_text().split("[ingress]")[0]
    if "sqs_queue" not in regions.split(f"[regions.{DESTINATION}]")[0]:
        queue = unique("queue")
        local_stack.sqs(SOURCE).create_queue(QueueName=queue)
        regions = regions.replace(
            f"[regions.{SOURCE}]\n", f'[regions.{SOURCE}]\nsqs_queue = "{queue}"\n'
        )
    path = tmp_path / f"{home}.toml"
    path.write_text(
        regions
        + f"""
[egress]
region = "{home}"
checkpoint_location = "{tmp_path / home / "checkpoint"}"
state_dir = "{tmp_path / home / "state"}"
group_id = "{unique("egress")}"
skip_replicated = true
[egress.topics."{topic}"]
max_segment_messages = 5

[ingress]
region = "{home}"
group_id = "{unique("ingress")}"
segment_events_topic = "{unique("events")}"
segment_events_partitions = 2
checkpoint_topic = "{unique("checkpoints")}"
relist_interval = "1s"
sync_group_offsets = false
[[ingress.sources]]
region = "{other}"
topic = "{topic}"
first_segment_delay = "0s"
"""
    )
    return load_config(path)


def produce(bootstrap: str, topic: str, tag: bytes, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        producer.produce(topic, key=tag + b"%d" % n, value=tag, partition=n % PARTITIONS)
    producer.flush(30)


def values(bootstrap: str, topic: str) -> Counter:
    return Counter(r[3] for p in range(PARTITIONS) for r in read_partition(bootstrap, topic, p))


def test_two_regions_mirror_each_other_and_each_record_lands_once(
    local_stack, unique, spark, tmp_path
):
    topic = unique("orders")
    east = region_config(local_stack, tmp_path, unique, topic, SOURCE, DESTINATION)
    west = region_config(local_stack, tmp_path, unique, topic, DESTINATION, SOURCE)
    # The stack replicates east -> west; this direction is the test's own.
    west_to_east = BucketReplicator(local_stack.s3(), west.bucket(DESTINATION), east.bucket(SOURCE))
    bootstrap = {
        SOURCE: local_stack.bootstrap(SOURCE),
        DESTINATION: local_stack.bootstrap(DESTINATION),
    }
    for region in bootstrap.values():
        create_topic(region, topic, PARTITIONS)

    for round_ in (1, 2):
        produce(bootstrap[SOURCE], topic, b"east%d-" % round_, 20)
        produce(bootstrap[DESTINATION], topic, b"west%d-" % round_, 20)
        for config in (east, west):
            EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
        west_to_east.sync_once()
        expected_ends = [
            local_stack.store(SOURCE).exported_end(SOURCE, topic, p) for p in range(PARTITIONS)
        ]
        wait_replicated(local_stack, topic, expected_ends)
        for config in (east, west):
            assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0

    for region, cluster in bootstrap.items():
        counts = values(cluster, topic)
        keys = [k for k in counts if not k.startswith(b"end")]
        assert len(keys) == 4 * 20, f"{region}: {len(keys)} distinct records"
        assert {k: n for k, n in counts.items() if n != 1 and k != b"end"} == {}, region


def wait_replicated(local_stack, topic: str, ends: list[int | None]) -> None:
    import time

    deadline = time.monotonic() + 60
    while [
        local_stack.store(DESTINATION).exported_end(SOURCE, topic, p) for p in range(PARTITIONS)
    ] != ends:
        assert time.monotonic() < deadline, "segments were not replicated to us-west-1"
        time.sleep(0.3)
