"""A topic deleted and created again (a new generation, offsets from 0) is noticed: its
export stops with an ERROR instead of appending the new topic's records after the old
ones'; the descriptor keeps naming the exported generation."""

from __future__ import annotations

import logging
import time
from typing import cast

from confluent_kafka import Producer

from egress.catalog import SourceCatalog
from egress.generations import TopicGenerations
from egress.job import EgressJob
from replicator.core.segments.descriptor import recorded_topic_id, recreated
from replicator.core.segments.key import topic_descriptor_s3_key
from tests.fixtures.egress import create_topic
from tests.fixtures.stack import SOURCE


def produce(local_stack, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    producer.flush(30)


def covered(local_stack, config, topic) -> list[tuple[int, int]]:
    store = local_stack.store(SOURCE, config.bucket(SOURCE))
    return [(s.segment_key.start, s.segment_key.end) for s in store.list_segments(SOURCE, topic, 0)]


def test_generations_differ_only_when_the_broker_names_both():
    assert recreated("a", "b")
    assert not recreated("a", "a")
    assert not recreated(None, "b") and not recreated("a", None)
    assert recorded_topic_id({"topic_id": "AaIF"}) == "AaIF"
    assert recorded_topic_id({"topic_id": 5}) is None and recorded_topic_id([]) is None


def test_a_recreated_topic_is_held_with_an_error(local_stack, egress_config, unique, spark, caplog):
    topic = unique("regen")
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, 10)
    config, _ = egress_config({topic: {}})
    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
    first = covered(local_stack, config, topic)
    assert first and first[-1][1] == 9
    store = local_stack.store(SOURCE, config.bucket(SOURCE))
    descriptor_key = topic_descriptor_s3_key("data", SOURCE, topic)
    exported_id = recorded_topic_id(store.get_json(descriptor_key))
    assert exported_id is not None
    # Each segment the Spark job wrote names that generation in its footer.
    segments = store.list_segments(SOURCE, topic, 0)
    assert segments and {store.footer(s).topic_id for s in segments} == {exported_id}

    admin = local_stack.admin(SOURCE)
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:  # gone before it is created again
        assert time.monotonic() < deadline, f"{topic} still listed after its deletion"
        time.sleep(0.2)
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, 30)  # more offsets than were exported

    with caplog.at_level(logging.ERROR):
        EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(f"topic {topic} was deleted and created again" in m for m in errors), errors
    assert covered(local_stack, config, topic) == first  # nothing of the new topic exported
    assert recorded_topic_id(store.get_json(descriptor_key)) == exported_id


class _Ids:
    """The catalog's topic-id look-up, answering what the test sets."""

    def __init__(self) -> None:
        self.ids: dict[str, str | None] = {}

    def topic_ids(self, topics: list[str]) -> dict[str, str | None]:
        return {t: self.ids.get(t) for t in topics}


def test_a_topic_recreated_while_egress_runs_is_noticed_without_a_descriptor(
    local_stack, egress_config, unique, caplog
):
    topic = unique("midrun")
    config, _ = egress_config({topic: {}})
    ids = _Ids()
    generations = TopicGenerations(
        config, cast(SourceCatalog, ids), local_stack.store(SOURCE, config.bucket(SOURCE))
    )
    ids.ids[topic] = "first"
    assert generations.check([topic], force=True) == set()
    ids.ids[topic] = "second"
    with caplog.at_level(logging.ERROR):
        assert generations.check([topic], force=True) == {topic}
    assert any("deleted and created again" in r.getMessage() for r in caplog.records)
    assert generations.topic_id(topic) == "second"
