"""Log ends egress plans with, asked of a broker that has just restarted.

For a moment after a restart a broker answers a ListOffsets with UNKNOWN_LEADER_EPOCH
("Leader epoch is newer than broker epoch"): the planner's look-up failed on it, the
streaming query stopped, and egress with it (seen in a chaos run killing the source
broker). A leader on the move is asked again; anything else still fails the look-up."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from egress.catalog import SourceCatalog
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.shared_admin import SharedAdmin
from tests.fixtures.egress import unreachable_egress_config


class Admin:
    """Answers ListOffsets with ``failures`` first (one code a call), then offset 42."""

    def __init__(self, failures: list[int]) -> None:
        self.failures = failures
        self.calls = 0

    def list_offsets(self, requests: dict[TopicPartition, Any], **_: Any) -> dict:
        self.calls += 1
        futures = {}
        for tp in requests:
            future: Future = Future()
            if self.failures:
                future.set_exception(KafkaException(KafkaError(self.failures[0])))
            else:
                future.set_result(type("Offset", (), {"offset": 42})())
            futures[tp] = future
        if self.failures:
            self.failures.pop(0)
        return futures


def catalog(admin: Admin) -> SourceCatalog:
    found = SourceCatalog(unreachable_egress_config())
    found.admin = SharedAdmin({}, make=lambda: admin)
    return found


@pytest.mark.parametrize(
    "code", [KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION]
)
def test_a_leader_on_the_move_is_asked_again(code):
    admin = Admin([code, code])
    assert catalog(admin).watermarks([("orders", 0)]) == {("orders", 0): (42, 42)}
    assert admin.calls == 4  # two refused, then the low and the high


def test_any_other_answer_fails_the_look_up_naming_the_partition():
    admin = Admin([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(BrokerError, match="cannot read offsets of orders partition 0") as info:
        catalog(admin).watermarks([("orders", 0)])
    assert info.value.code == KafkaError.TOPIC_AUTHORIZATION_FAILED
