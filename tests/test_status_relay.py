"""The relay's rows of ``replicator status``, the pure parts: one row per relayed source
partition with the destination partition the relay writes it into, lag, and the state
column (halted, no checkpoint yet, behind, caught up, throttled while recent). On the
local stack: tests/relay/test_status.py."""

from __future__ import annotations

from replicator.core.config.relay import RelayConfig, RelayTopic
from replicator.core.kafka.checkpoints import Checkpoint, ResumePoint
from replicator.status import THROTTLE_RECENT
from replicator.status_relay import (
    RelayPartitionStatus,
    build_rows,
    fill_from_checkpoint,
    first_answer,
    relay_lag,
    relay_state,
    render_relay,
    upstreams_to_ask,
)

NOW = 1_700_000_000.0


def relay(**fields: object) -> RelayConfig:
    settings: dict[str, object] = {
        "sources": ["east", "east-b"],
        "destination": "west",
        "topics": [{"source_topic": "orders", "destination_topic": "orders.copy"}],
    }
    return RelayConfig.model_validate({**settings, **fields})


def row(**fields: object) -> RelayPartitionStatus:
    return RelayPartitionStatus("east", "orders", 0, "orders.copy", 0, **fields)  # type: ignore[arg-type]


def checkpoint(**fields: object) -> Checkpoint:
    return Checkpoint("orders.copy", 0, "east", "orders", 10, 9, NOW - 12, **fields)  # type: ignore[arg-type]


def test_lag_is_what_the_upstream_holds_past_the_relays_resume_point():
    assert relay_lag(15, 10) == 5
    assert relay_lag(10, 10) == 0
    assert relay_lag(9, 10) == 0  # a truncated upstream: nothing pending, never negative
    assert relay_lag(None, 10) is None
    assert relay_lag(15, None) is None


def test_a_row_per_upstream_partition_named_by_origin_into_the_destination_partition():
    config = relay(origin="primary")
    rows = build_rows(config, config.topics[0], "east", {1: 7, 0: 5}, ["east"])
    assert [(r.origin, r.topic, r.partition, r.upstream_end) for r in rows] == [
        ("primary", "orders", 0, 5),
        ("primary", "orders", 1, 7),
    ]
    assert [(r.destination_topic, r.destination_partition) for r in rows] == [
        ("orders.copy", 0),
        ("orders.copy", 1),
    ]
    into_one = RelayTopic(source_topic="orders", destination_partition=3)
    rows = build_rows(config, into_one, "east", {0: 5, 1: 7}, ["east"])
    assert [(r.destination_topic, r.destination_partition) for r in rows] == [
        ("orders", 3),
        ("orders", 3),
    ]


def test_no_upstream_answering_gives_one_row_saying_which_were_asked():
    config = relay(mode="failover")
    (only,) = build_rows(config, config.topics[0], None, None, ["east", "east-b"])
    assert only.partition is None and only.upstream_end is None
    assert only.unreachable == {"upstream end": "Kafka of east, east-b"}
    assert relay_state(only, NOW) == "not known: see unreachable"
    assert "unreachable: Kafka of east, east-b" in render_relay([only], NOW)


def test_the_first_upstream_in_order_that_answered_gives_the_log_ends():
    assert first_answer([("east", None), ("east-b", {0: 4})]) == ("east-b", {0: 4})
    assert first_answer([("east", {}), ("east-b", {0: 4})]) == ("east", {})
    assert first_answer([("east", None), ("east-b", None)]) == (None, None)


def test_single_mode_asks_only_the_upstream_it_relays_from():
    assert upstreams_to_ask(relay()) == ["east"]
    assert upstreams_to_ask(relay(mode="failover")) == ["east", "east-b"]


def test_the_state_says_behind_caught_up_or_no_checkpoint_yet():
    assert relay_state(row(upstream_end=15, relayed_end=10, has_checkpoint=True), NOW) == (
        "behind by 5"
    )
    assert relay_state(row(upstream_end=10, relayed_end=10, has_checkpoint=True), NOW) == (
        "caught up"
    )
    assert relay_state(row(upstream_end=10), NOW) == "no checkpoint yet"
    assert relay_state(row(upstream_end=10, halted="bad record"), NOW) == "HALTED: bad record"


def test_the_state_says_throttled_from_a_recent_checkpoint_that_records_it():
    throttled = row(upstream_end=15)
    fill_from_checkpoint(throttled, ResumePoint(10, 9, checkpoint(writer="relay", throttled=2.46)))
    assert (throttled.relayed_end, throttled.throttled, throttled.relayed_time) == (
        10,
        2.46,
        NOW - 12,
    )
    assert relay_state(throttled, NOW) == (
        "behind by 5; throttled: the broker held the relay back 2.5 s in its last "
        "transaction, 12 s ago (a client quota)"
    )
    assert throttled.to_dict(NOW)["state"] == relay_state(throttled, NOW)
    assert throttled.to_dict(NOW)["throttled"] == 2.46
    calm = row(upstream_end=10)
    fill_from_checkpoint(calm, ResumePoint(10, 9, checkpoint(writer="relay")))
    assert relay_state(calm, NOW) == "caught up"
    idle_since = row(upstream_end=10)
    fill_from_checkpoint(idle_since, ResumePoint(10, 9, checkpoint(throttled=2.46)))
    assert relay_state(idle_since, NOW + THROTTLE_RECENT) == "caught up"


def test_json_rows_say_they_are_the_relays_with_lag_and_state():
    data = row(upstream="east", upstream_end=15, relayed_end=10, has_checkpoint=True).to_dict(NOW)
    assert data["service"] == "relay"
    assert (data["upstream_end"], data["relayed_end"], data["lag_records"]) == (15, 10, 5)
    assert data["state"] == "behind by 5"


def test_the_table_escapes_names_and_reasons_from_outside():
    text = render_relay([row(upstream_end=1, halted="evil\x1b[2Jreason")], NOW)
    assert "\x1b" not in text
    header, line = text.splitlines()
    assert header.split() == [
        "relayed",
        "part",
        "into",
        "upstream",
        "upstream",
        "end",
        "relayed",
        "to",
        "lag",
        "state",
    ]
    assert line.startswith("east/orders  0     orders.copy/0")
