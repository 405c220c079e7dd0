"""``replicator status`` on a relay of the local stack: its rows before anything was
relayed, after it relayed every record (lag 0), and with records it has not relayed yet
(lag > 0), from the relay's own checkpoint topic; the same rows through the CLI, as a
table and in ``--json``; and what they say when the destination or every upstream does
not answer. The pure parts: tests/test_status_relay.py."""

from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka import Producer

from relay.service import RelayService
from replicator.core.config import load_config
from replicator.status_relay import collect_relay, relay_state
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 2


CLOSED = "127.0.0.1:9"
"""A port nothing listens on."""


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
    producer.flush(30)


def test_status_shows_the_relays_partitions_caught_up_and_behind(local_stack, relay_setup):
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, PARTITIONS)
    produce(local_stack.bootstrap(SOURCE), setup.source, {0: 10, 1: 10})

    before = collect_relay(setup.config)
    assert [(r.partition, r.upstream, r.upstream_end, r.relayed_end) for r in before] == [
        (0, SOURCE, 10, None),
        (1, SOURCE, 10, None),
    ]
    assert [relay_state(r, 0) for r in before] == ["no checkpoint yet"] * PARTITIONS, before

    assert RelayService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    relayed = collect_relay(setup.config)
    assert [(r.partition, r.upstream_end, r.relayed_end, r.lag_records) for r in relayed] == [
        (0, 10, 10, 0),
        (1, 10, 10, 0),
    ]
    assert all(r.has_checkpoint and r.relayed_time for r in relayed), relayed
    assert [(r.destination_topic, r.destination_partition) for r in relayed] == [
        (setup.destination, 0),
        (setup.destination, 1),
    ]

    produce(local_stack.bootstrap(SOURCE), setup.source, {0: 5})
    status = subprocess.run(
        [sys.executable, "-m", "replicator", "status", "--config", str(setup.path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr[-3000:]
    rows = [r for r in json.loads(status.stdout) if r.get("service") == "relay"]
    assert [
        (r["partition"], r["upstream_end"], r["relayed_end"], r["lag_records"]) for r in rows
    ] == [
        (0, 15, 10, 5),
        (1, 10, 10, 0),
    ]
    assert [r["state"] for r in rows] == ["behind by 5", "caught up"]

    table = subprocess.run(
        [sys.executable, "-m", "replicator", "status", "--config", str(setup.path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert table.returncode == 0, table.stderr[-3000:]
    lines = [line for line in table.stdout.splitlines() if f"{SOURCE}/{setup.source}" in line]
    assert len(lines) == PARTITIONS, table.stdout
    assert lines[0].split()[:7] == [
        f"{SOURCE}/{setup.source}",
        "0",
        f"{setup.destination}/0",
        SOURCE,
        "15",
        "10",
        "5",
    ], table.stdout
    assert lines[0].endswith("behind by 5") and lines[1].endswith("caught up"), table.stdout


def test_the_relays_rows_say_what_did_not_answer(local_stack, relay_setup, tmp_path):
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, PARTITIONS)
    text = setup.path.read_text()

    destination_down = tmp_path / "destination-down.toml"
    destination_down.write_text(text.replace(local_stack.bootstrap(DESTINATION), CLOSED))
    rows = collect_relay(load_config(destination_down))
    assert [(r.partition, r.upstream_end) for r in rows] == [(0, 0), (1, 0)]
    assert all(r.unreachable == {"relayed": f"Kafka of {DESTINATION}"} for r in rows), rows
    assert [relay_state(r, 0) for r in rows] == ["not known: see unreachable"] * PARTITIONS

    all_down = tmp_path / "all-down.toml"
    all_down.write_text(
        text.replace(local_stack.bootstrap(DESTINATION), CLOSED).replace(
            local_stack.bootstrap(SOURCE), CLOSED
        )
    )
    (only,) = collect_relay(load_config(all_down))
    assert (only.topic, only.partition, only.upstream) == (setup.source, None, None)
    assert only.unreachable == {"upstream end": f"Kafka of {SOURCE}"}
    assert relay_state(only, 0) == "not known: see unreachable"
