"""Which destination topics a service takes for deleted and created again (pure, with a
stand-in for the broker's topic ids: the end-to-end checks are in
tests/relay/test_operator_actions.py and tests/ingress/test_recreated_destination.py)."""

from __future__ import annotations

from collections.abc import Sequence

from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.recreation import RecreationWatch, changed_ids


def test_only_a_new_id_for_a_known_topic_is_a_re_creation():
    known = {"a": "id-1", "b": "id-2"}
    assert changed_ids(known, {"a": "id-1", "b": "id-2"}) == []
    assert changed_ids(known, {"a": "id-9", "b": "id-2"}) == ["a"]
    assert changed_ids(known, {"a": "", "b": "id-2"}) == []  # deleted, not created again yet
    assert changed_ids(known, {"c": "id-3"}) == []  # first seen


def test_the_watch_looks_when_due_and_remembers_across_a_deletion():
    ids = {"a": "id-1"}
    now = [0.0]
    watch = RecreationWatch(
        lambda topics: {t: ids[t] for t in topics}, interval=5.0, clock=lambda: now[0]
    )
    assert watch.recreated(["a"]) == []  # the first look records
    ids["a"] = ""
    now[0] = 5.0
    assert watch.recreated(["a"]) == []  # deleted
    ids["a"] = "id-2"
    now[0] = 7.0
    assert watch.recreated(["a"]) == []  # not due yet
    now[0] = 10.0
    assert watch.recreated(["a"]) == ["a"]
    now[0] = 15.0
    assert watch.recreated(["a"]) == []  # once


def test_a_topic_that_cannot_be_described_is_looked_at_again():
    calls = []

    def topic_ids(topics: Sequence[str]) -> dict[str, str]:
        calls.append(list(topics))
        if len(calls) == 2:
            raise BrokerError("describing topics a: broker away")
        return {"a": "id-1" if len(calls) == 1 else "id-2"}

    now = [0.0]
    watch = RecreationWatch(topic_ids, interval=1.0, clock=lambda: now[0])
    assert watch.recreated(["a"]) == []
    now[0] = 1.0
    assert watch.recreated(["a"]) == []
    now[0] = 2.0
    assert watch.recreated(["a"]) == ["a"]
