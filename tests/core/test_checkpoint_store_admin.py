"""The checkpoint store's shared admin client (the writers ask it for destination topic
ids): a client whose request failed is not asked again. librdkafka's admin client can
stay stuck after its cluster was paused, failing every request with "Failed while waiting
for controller" long after the brokers answer again; a chaos run saw a relay's four
partitions fail so for five minutes and never catch up."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from replicator.core.kafka import shared_admin
from replicator.core.kafka.checkpoints import CheckpointStore
from replicator.core.kafka.errors import BrokerError

STUCK = KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for controller: Local: Timed out")


class Admin:
    """An admin client that answers ``describe_topics`` with ``topic_id``, or that is
    stuck (``topic_id`` None) and fails every request as librdkafka's did."""

    def __init__(self, topic_id: str | None) -> None:
        self.topic_id = topic_id
        self.requests = 0

    def describe_topics(self, topics: Any, request_timeout: float) -> dict[str, Future[Any]]:
        self.requests += 1
        futures: dict[str, Future[Any]] = {}
        for name in topics.topic_names:
            future: Future[Any] = Future()
            if self.topic_id is None:
                future.set_exception(KafkaException(STUCK))
            else:
                future.set_result(SimpleNamespace(topic_id=self.topic_id))
            futures[name] = future
        return futures


def test_an_admin_client_that_failed_is_replaced_by_the_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stuck, fresh = Admin(None), Admin("oZ9p3cTqQ2OSmxD4cK2kqA")
    made = iter([stuck, fresh])
    monkeypatch.setattr(shared_admin, "AdminClient", lambda _kafka: next(made))
    store = CheckpointStore({"bootstrap.servers": "unused:9092"}, "checkpoints", 1)

    with pytest.raises(BrokerError, match="Failed while waiting for controller"):
        store.topic_ids(["orders"])
    assert store.topic_ids(["orders"]) == {"orders": "oZ9p3cTqQ2OSmxD4cK2kqA"}
    assert stuck.requests == 1 and fresh.requests == 1
    # A client that answers is kept: one client for all the writers.
    assert store.topic_id("orders") == "oZ9p3cTqQ2OSmxD4cK2kqA"
    assert fresh.requests == 2
