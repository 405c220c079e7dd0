"""Consumer groups fail over exactly: committed in the source, exported with the segments
(or read from the upstream by the relay), translated against what the destination holds,
committed there, and a consumer of the same group reads on exactly where it stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer

from egress.job import EgressJob
from ingress.group_sync import group_sync
from ingress.metrics import IngressMetrics
from ingress.service import IngressService
from relay.groups import group_sync as relay_group_sync
from relay.service import RelayService
from replicator.core.config import load_config, required
from replicator.core.groups.admin import GroupAdmin
from replicator.core.kafka import provenance
from replicator.core.kafka.clients import client_config
from tests.fixtures.egress import create_topic
from tests.fixtures.failback import commit_group
from tests.fixtures.independent import read_partition, watermarks
from tests.fixtures.relay import create_topic as create_relay_topic
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 4
RECORDS = 30


def produce_with_a_transaction(bootstrap: str, topic: str, unique) -> int:
    """RECORDS plain records per partition; in partition 1 three of them are written in a
    transaction, whose commit marker takes an offset holding no record. Returns that
    offset."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(RECORDS):
        for partition in range(PARTITIONS):
            if partition == 1 and n == 10:
                continue
            producer.produce(
                topic, key=b"k%d" % n, value=b"v%d-%d" % (partition, n), partition=partition
            )
    producer.flush(30)
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx")})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for n in range(3):
        transactional.produce(topic, key=b"tx%d" % n, value=b"tx", partition=1)
    transactional.commit_transaction(30)
    # A record after the commit marker: a group committed at the marker's offset resumes
    # at a record, which the test checks. The coordinator writes the marker after the
    # commit returns: wait until the partition's committed end is past it.
    marker_at = (RECORDS - 1) + 3
    deadline = time.monotonic() + 30
    while watermarks(bootstrap, topic, 1)[1] <= marker_at:
        assert time.monotonic() < deadline, "the commit marker was not written"
        time.sleep(0.1)
    producer.produce(topic, key=b"after", value=b"after the marker", partition=1)
    producer.flush(30)
    offsets = [r[0] for r in read_partition(bootstrap, topic, 1)]
    holes = sorted(set(range(offsets[0], offsets[-1])) - set(offsets))
    assert holes, f"no offset without a record in {offsets}"
    return holes[0]


def failover(config_path: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``replicator failover --config CONFIG_PATH ARGS`` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "replicator", "failover", "--config", config_path, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def read_as_group(bootstrap: str, group: str, topic: str, expected: dict[int, int]) -> dict:
    """What a consumer of ``group`` reads from its committed offsets on, per partition,
    until it has ``expected[p]`` records of every partition (and a little more)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got[message.partition() or 0].append(message)
            done = all(len(got[p]) >= n for p, n in expected.items())
            if done and quiet_until is None:
                quiet_until = time.monotonic() + 2
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
    finally:
        consumer.close()
    return got


def source_offsets(messages: list, origin: str, topic: str, partition: int) -> list[int | None]:
    named = provenance.SourcePartition(origin, topic, partition)
    return [provenance.source_offset(m.headers(), named) for m in messages]


def expected_after(bootstrap: str, topic: str, committed: dict[int, int]) -> dict[int, list[int]]:
    """The source offsets a consumer resuming at ``committed`` reads, per partition."""
    return {
        p: [r[0] for r in read_partition(bootstrap, topic, p) if r[0] >= x]
        for p, x in committed.items()
    }


def test_groups_fail_over_through_s3_exactly(local_stack, unique, spark, tmp_path):
    topic, copy = unique("payments"), unique("payments.copy")
    group, synced, busy = unique("payments-app"), unique("payments-sync"), unique("payments-busy")
    text = (
        local_stack.config_path.read_text().split("[ingress]")[0]
        + f"""
[egress]
region = "{SOURCE}"
checkpoint_location = "{tmp_path / "checkpoint"}"
state_dir = "{tmp_path / "state"}"
group_id = "{unique("egress")}"
consumer_groups = ["{group}", "{synced[:-4]}.*", "{busy}"]
[egress.topics."{topic}"]
max_segment_messages = 7

[ingress]
region = "{DESTINATION}"
group_id = "{unique("ingress")}"
segment_events_topic = "{unique("events")}"
segment_events_partitions = 4
checkpoint_topic = "{unique("checkpoints")}"
relist_interval = "1s"
# Synced by ingress; `group` is not: failover --group --apply moves it (an operator may
# name any group). The run below never syncs (it would race the sync asserted on later).
consumer_groups = ["{synced[:-4]}.*", "{busy}"]
group_sync_interval = "1h"
[[ingress.sources]]
region = "{SOURCE}"
topic = "{topic}"
destination_topic = "{copy}"
first_segment_delay = "0s"
"""
    )
    path = tmp_path / "replicator.toml"
    path.write_text(text)
    config = load_config(path)
    source = local_stack.bootstrap(SOURCE)
    create_topic(local_stack, topic, PARTITIONS)
    marker = produce_with_a_transaction(source, topic, unique)
    ends = {p: watermarks(source, topic, p)[1] for p in range(PARTITIONS)}
    # One group at 0, one on the offset of the commit marker (no record there), one
    # mid-topic, one at the end.
    committed = {0: 0, 1: marker, 2: 17, 3: ends[3]}
    commit_group(source, group, topic, committed)
    commit_group(source, synced, topic, {0: 5, 1: 6, 2: 7, 3: 8})
    commit_group(source, busy, topic, {0: 3})

    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
    s3 = local_stack.s3()
    groups_prefix = f"data/{SOURCE}/{topic}/_groups/"
    deadline = time.monotonic() + 60
    while (
        len(
            s3.list_objects_v2(Bucket=config.bucket(DESTINATION), Prefix=groups_prefix).get(
                "Contents", []
            )
        )
        < 3
    ):
        assert time.monotonic() < deadline, "group offsets were not replicated"
        time.sleep(0.3)
    exported = json.loads(
        s3.get_object(Bucket=config.bucket(SOURCE), Key=f"{groups_prefix}{group}.json")[
            "Body"
        ].read()
    )
    assert exported["offsets"] == {str(p): o for p, o in committed.items()}
    history = s3.list_objects_v2(
        Bucket=config.bucket(SOURCE), Prefix=f"data/{SOURCE}/{topic}/_group_history/{group}/"
    ).get("Contents", [])
    assert len(history) == 1, "each change is kept in the group's history"
    while True:  # every segment replicated
        replicated = [
            local_stack.store(DESTINATION).exported_end(SOURCE, topic, p) for p in range(PARTITIONS)
        ]
        if replicated == [ends[p] for p in range(PARTITIONS)]:
            break
        assert time.monotonic() < deadline, f"segments not replicated: {replicated} vs {ends}"
        time.sleep(0.3)
    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0

    # A destination consumer of `busy` is running: its offsets must not be moved.
    destination = local_stack.bootstrap(DESTINATION)
    running = Consumer(
        {"bootstrap.servers": destination, "group.id": busy, "session.timeout.ms": 6000}
    )
    running.subscribe([copy])
    for _ in range(40):
        running.poll(0.25)
        if running.assignment():
            break
    try:
        result = failover(str(path), "--group", group, "--group", busy, "--apply")
        # The busy group is not ready (it has members): exit status 1, nothing moved.
        assert result.returncode == 1, result.stdout + result.stderr
        assert "active in the destination: not moved" in result.stdout
        assert f"committed ({PARTITIONS} partitions moved)" in result.stdout, result.stdout
        # The offset sync of ingress moves groups without members, and not `busy`.
        kafka = client_config(config.region(DESTINATION).kafka)
        sync = group_sync(
            config,
            kafka,
            IngressMetrics(),
            partitions=lambda: {(SOURCE, topic): PARTITIONS},
            sources=lambda: list(required(config, "ingress").sources),
            leading=lambda: True,
        )
        outcome = sync.sync_once()
        assert outcome[busy] == (None, 0)
        assert outcome[synced] == (PARTITIONS, 0)
        assert GroupAdmin(kafka, DESTINATION).committed(busy) == {}
    finally:
        running.close()

    # Only the named group alone: ready, exit 0, and a second --apply moves nothing.
    again = failover(str(path), "--group", group, "--apply", "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    assert report["ready"] and report["groups"][0]["moved"] == 0
    rows = {p["partition"]: p for p in report["partitions"]}
    assert all(rows[p]["replayed_until"] == ends[p] and rows[p]["rpo_records"] == 0 for p in rows)

    # An unknown group is not ready.
    unknown = failover(str(path), "--group", unique("nobody"))
    assert unknown.returncode == 1 and "no exported offsets found" in unknown.stdout

    for name, offsets in ((group, committed), (synced, {0: 5, 1: 6, 2: 7, 3: 8})):
        wanted = expected_after(source, topic, offsets)
        got = read_as_group(destination, name, copy, {p: len(v) for p, v in wanted.items()})
        for p in range(PARTITIONS):
            assert source_offsets(got[p], SOURCE, topic, p) == wanted[p], f"{name} partition {p}"
    # The group that committed the marker's offset starts at the record after it.
    assert expected_after(source, topic, {1: marker})[1][0] == marker + 1


def test_groups_fail_over_through_the_relay_exactly(local_stack, relay_setup, unique):
    group = unique("relay-app")
    setup = relay_setup(
        relay_options=f'consumer_groups = ["{group}"]\ngroup_sync_interval = "200ms"'
    )
    source = local_stack.bootstrap(SOURCE)
    create_relay_topic(source, setup.source, PARTITIONS)
    marker = produce_with_a_transaction(source, setup.source, unique)
    ends = {p: watermarks(source, setup.source, p)[1] for p in range(PARTITIONS)}
    committed = {0: 0, 1: marker, 2: 17, 3: ends[3]}
    commit_group(source, group, setup.source, committed)
    assert RelayService(setup.config, stop_at_end=True, handle_signals=False).run() == 0

    # The relay's own sync (its thread ran during the relay too) moves the groups that
    # [relay] consumer_groups names to their translated offsets, forward only.
    kafka = client_config(setup.config.region(DESTINATION).kafka)
    sync = relay_group_sync(setup.config, kafka, leading=lambda: True)
    assert sync is not None
    moved, behind = sync.sync_once()[group]
    assert behind == 0 and moved is not None
    assert sync.sync_once() == {group: (0, 0)}
    assert len(GroupAdmin(kafka, DESTINATION).committed(group)) == PARTITIONS

    result = failover(str(setup.path), "--group", group, "--apply")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 of 1 groups ready (offsets committed)" in result.stdout
    assert "committed (0 partitions moved)" in result.stdout  # the sync did it already
    wanted = expected_after(source, setup.source, committed)
    got = read_as_group(
        local_stack.bootstrap(DESTINATION),
        group,
        setup.destination,
        {p: len(v) for p, v in wanted.items()},
    )
    for p in range(PARTITIONS):
        assert source_offsets(got[p], SOURCE, setup.source, p) == wanted[p], f"partition {p}"
