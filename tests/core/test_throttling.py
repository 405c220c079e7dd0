"""Broker throttling (client quotas) as the writers report it: the per-service counter,
the checkpoint's record of a throttled transaction, and what ``replicator status`` says.
The real quota on a real broker: tests/security/test_quotas.py."""

from __future__ import annotations

import json

from confluent_kafka import ThrottleEvent
from prometheus_client import CollectorRegistry, generate_latest

from replicator.core.kafka.checkpoints import Checkpoint
from replicator.core.kafka.throttling import ThrottleCollector, ThrottleTally, throttle_seconds
from replicator.status import THROTTLE_RECENT, PartitionStatus, render


def checkpoint(**fields: object) -> Checkpoint:
    return Checkpoint("copy", 0, "east", "orders", 10, 9, 1_700_000_000.0, **fields)  # type: ignore[arg-type]


def test_a_throttled_transaction_is_recorded_in_its_checkpoint_and_read_back():
    throttled = checkpoint(writer="ingress", throttled=2.5)
    assert json.loads(throttled.to_json())["throttled"] == 2.5
    assert Checkpoint.from_json(throttled.to_json()) == throttled


def test_an_unthrottled_checkpoint_is_written_byte_for_byte_as_before():
    unthrottled = checkpoint(writer="ingress")
    assert b"throttled" not in unthrottled.to_json()
    assert Checkpoint.from_json(unthrottled.to_json()).throttled == 0.0


def test_throttle_events_add_up_per_service_and_the_end_of_a_throttle_adds_nothing():
    tally = ThrottleTally()
    tally.add("ingress", throttle_seconds(ThrottleEvent("b", 1, 0.25)))
    tally.add("ingress", throttle_seconds(ThrottleEvent("b", 1, 0.5)))
    tally.add("ingress", throttle_seconds(ThrottleEvent("b", 1, 0.0)))  # throttle over
    tally.add("relay", throttle_seconds(ThrottleEvent("b", 1, 1.0)))
    assert tally.seconds("ingress") == 0.75
    assert tally.seconds("relay") == 1.0
    assert tally.seconds("restore") == 0.0


def test_each_service_exposes_its_own_throttle_counter():
    tally = ThrottleTally()
    tally.add("relay", 1.5)
    registry = CollectorRegistry()
    registry.register(ThrottleCollector("relay", tally))
    exposed = generate_latest(registry).decode()
    assert "replicator_relay_throttled_seconds_total 1.5" in exposed, exposed


def test_status_says_when_ingress_is_throttled_and_not_when_it_is_not():
    now = 1_700_000_000.0
    throttled = PartitionStatus("east", "orders", 0, replayed_time=now - 12, throttled=2.46)
    calm = PartitionStatus("east", "orders", 1, replayed_time=now - 12)
    long_ago = PartitionStatus(
        "east", "orders", 2, replayed_time=now - THROTTLE_RECENT - 1, throttled=2.46
    )
    lines = render([throttled, calm, long_ago], now).splitlines()
    assert lines[1].endswith(
        "throttled: the broker held ingress back 2.5 s in its last transaction, 12 s ago "
        "(a client quota)"
    ), lines[1]
    assert lines[2].endswith("ok"), lines[2]
    assert lines[3].endswith("ok"), lines[3]  # idle since: not being throttled
    assert throttled.to_dict(now)["throttled"] == 2.46
