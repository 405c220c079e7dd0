"""What a bucket writer's forged topic descriptors can no longer do to ingress: crash every
source with a deeply nested ``_topic.json``, decide how a new destination topic is
created (retention, compaction), or start any number of topics through a pattern."""

from __future__ import annotations

import logging
import threading

from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.kafka import provenance
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import (
    destination_configs_now,
    fast_refresh,
    provenance_offsets,
    segment_batch,
    wait_for,
)
from tests.fixtures.stack import DESTINATION, SOURCE

DEEP = b"[" * 100_000 + b"]" * 100_000
"""200 kB of nesting: what once ended ingress with a RecursionError at every start."""


def publish(setup, topic: str, records: int) -> None:
    setup.store.put_json(
        topic_descriptor_s3_key("data", SOURCE, topic), describe(topic, 1, {}, SOURCE, {0: 0})
    )
    setup.store.write_segment(
        SegmentKey(SOURCE, topic, 0, 0, 0, records - 1), segment_batch(0, records)
    )


def replayed(local_stack, topic: str, copy: str) -> list[int | None]:
    named = provenance.SourcePartition(SOURCE, topic, 0)
    return [
        provenance.source_offset(list(r[5]), named)
        for r in read_partition(local_stack.bootstrap(DESTINATION), copy, 0)
    ]


def pattern_setup(ingress_setup, family: str, extra: str = ""):
    """An ingress whose one source is the pattern ``{family}.[a-z]+`` into ``{topic}.copy``."""
    setup = ingress_setup()
    text = setup.path.read_text().replace(
        f'topic = "{setup.topic}"\ndestination_topic = "{setup.destination}"',
        f"topic_pattern = '{family}\\.[a-z]+'\ndestination_topic = \"{{topic}}.copy\"{extra}",
    )
    assert text != setup.path.read_text()
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    fast_refresh(setup)
    return setup


def test_a_deeply_nested_descriptor_stops_only_its_topic(
    local_stack, ingress_setup, unique, caplog
):
    family = unique("nested")
    setup = pattern_setup(ingress_setup, family)
    good, bad = f"{family}.good", f"{family}.bad"
    bad_key = topic_descriptor_s3_key("data", SOURCE, bad)
    setup.store.client.put_object(Bucket=setup.store.bucket, Key=bad_key, Body=DEEP)
    setup.store.write_segment(SegmentKey(SOURCE, bad, 0, 0, 0, 9), segment_batch(0, 10))
    publish(setup, good, 10)
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    with caplog.at_level(logging.ERROR):
        runner.start()
        try:
            wait_for(
                lambda: (
                    not runner.is_alive()
                    or replayed(local_stack, good, f"{good}.copy") == list(range(10))
                ),
                f"{good} was not replayed",
            )
            assert runner.is_alive(), "ingress ended"
            refreshed = service._refresh_topics  # the refresh reads the descriptor again
            refreshed()
            assert runner.is_alive(), "ingress ended at a refresh"
        finally:
            service.request_stop()
            runner.join(30)
    assert replayed(local_stack, good, f"{good}.copy") == list(range(10))
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(bad_key in m and "nested too deep" in m for m in errors), errors
    topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert f"{bad}.copy" not in topics


def test_a_new_destination_is_created_no_weaker_than_the_floors(local_stack, ingress_setup, caplog):
    """A descriptor asking a new destination for retention that deletes at once, or for
    compaction: the topic is created as if it existed with Kafka's defaults, which a
    descriptor may raise but not lower; compaction refused means unlimited retention
    (everything compaction would keep is kept)."""
    setup = ingress_setup()
    forged = {
        "retention.ms": "1",
        "retention.bytes": "0",
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0",
        "delete.retention.ms": "0",
        "segment.ms": "1",  # never copied: outside the allow-list
    }
    setup.put_descriptor(1, forged, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    service = IngressService(setup.config, stop_at_end=True, handle_signals=False)
    with caplog.at_level(logging.WARNING):
        assert service.run() == 0
    now = destination_configs_now(local_stack, setup.destination)
    assert {name: now[name] for name in forged} == {
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "cleanup.policy": "delete",
        "min.cleanable.dirty.ratio": "0.5",
        "delete.retention.ms": "86400000",
        "segment.ms": "604800000",
    }
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    for name in ("retention.ms", "retention.bytes", "cleanup.policy", "delete.retention.ms"):
        assert f"{setup.destination} is created without {name} = " in warned, warned
    assert " keeps " not in warned  # refused once, when created: not again by the sync
    assert provenance_offsets(local_stack, setup, 0) == list(range(10))


def test_a_pattern_replays_at_most_max_topics_topics(local_stack, ingress_setup, unique, caplog):
    family = unique("many")
    setup = pattern_setup(ingress_setup, family, "\nmax_topics = 2")
    first, second, third = f"{family}.aa", f"{family}.bb", f"{family}.cc"
    for topic in (first, second, third):
        publish(setup, topic, 5)
    service = IngressService(setup.config, stop_at_end=True, handle_signals=False)
    with caplog.at_level(logging.ERROR):
        assert service.run() == 1  # the refused topic counts as halted
    for topic in (first, second):
        assert replayed(local_stack, topic, f"{topic}.copy") == list(range(5))
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(third in m and "max_topics = 2" in m for m in errors), errors
    topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert f"{third}.copy" not in topics
