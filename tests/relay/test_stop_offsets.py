"""``relay --stop-at-end`` relays up to the log ends seen at start, so it must know the end
of every relayed partition before it starts: a partition without a stop offset is never
done, and the run would never end. While no upstream gives them all the relay asks again;
after ``stall_timeout`` it fails, naming why, without relaying anything."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from relay import health as relay_health
from relay.errors import StopOffsetsError
from relay.failover import UpstreamState, stop_offsets
from relay.service import RelayService
from tests.fixtures.relay import create_topic, record_counts, run_until_it_ends
from tests.fixtures.stack import DESTINATION, SOURCE


def test_stop_offsets_come_from_the_first_upstream_that_gives_every_partition():
    partitions = {"a": 2}
    every = UpstreamState(True, {("a", 0): 5, ("a", 1): 7})
    some = UpstreamState(True, {("a", 0): 9})
    down = UpstreamState(False, {("a", 0): 1, ("a", 1): 1})
    assert stop_offsets(partitions, ["x", "y"], {"x": some, "y": every}) == (
        "y",
        {("a", 0): 5, ("a", 1): 7},
    )
    assert stop_offsets(partitions, ["x", "y"], {"x": down, "y": some}) is None
    assert stop_offsets(partitions, ["x"], {}) is None


def _answers_metadata_but_not_end_offsets(times: int, monkeypatch: pytest.MonkeyPatch) -> None:
    real = relay_health.UpstreamHealth._check
    calls = {"n": 0}

    def check(self: relay_health.UpstreamHealth, name: str) -> UpstreamState:
        calls["n"] += 1
        if calls["n"] <= times:
            return UpstreamState(False, problem="end offsets: KafkaError{REQUEST_TIMED_OUT}")
        return real(self, name)

    monkeypatch.setattr(relay_health.UpstreamHealth, "_check", check)


def test_a_stop_at_end_run_waits_for_every_end_offset_then_ends(
    local_stack, relay_setup, monkeypatch
):
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(100):
        producer.produce(setup.source, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    _answers_metadata_but_not_end_offsets(4, monkeypatch)
    outcome = run_until_it_ends(RelayService(setup.config, stop_at_end=True, handle_signals=False))
    assert outcome == [0]
    assert record_counts(local_stack.bootstrap(DESTINATION), setup.destination, 2) == [50, 50]


def test_a_stop_at_end_run_without_end_offsets_fails_naming_why(
    local_stack, relay_setup, monkeypatch
):
    setup = relay_setup(relay_options='stall_timeout = "3s"')
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 2)
    _answers_metadata_but_not_end_offsets(10_000, monkeypatch)
    outcome = run_until_it_ends(RelayService(setup.config, stop_at_end=True, handle_signals=False))
    assert len(outcome) == 1 and isinstance(outcome[0], StopOffsetsError), outcome
    assert "end offset of every relayed partition" in str(outcome[0])
