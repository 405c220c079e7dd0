"""``[[ingress.sources]] topic_pattern``: topics that start being exported while ingress
runs are followed end to end, into destinations named by a template."""

from __future__ import annotations

import threading

import pytest

from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.errors import ConfigError
from replicator.core.kafka import provenance
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import fast_refresh, segment_batch, wait_for
from tests.fixtures.stack import DESTINATION, SOURCE


def publish(setup, topic: str, records: int) -> None:
    """A topic as egress and replication leave it in the bucket: descriptor and segment."""
    setup.store.put_json(
        topic_descriptor_s3_key("data", SOURCE, topic),
        describe(topic, 1, {}, SOURCE, {0: 0}),
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


def test_topics_matching_a_pattern_are_followed_while_running(local_stack, ingress_setup, unique):
    setup = ingress_setup()
    family = unique("family")
    text = setup.path.read_text().replace(
        f'topic = "{setup.topic}"\ndestination_topic = "{setup.destination}"',
        f"topic_pattern = '{family}\\.[a-z]+'\ndestination_topic = \"{{topic}}.copy\"",
    )
    assert text != setup.path.read_text()
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    fast_refresh(setup)
    first, second, other = f"{family}.first", f"{family}.second", f"{family}.x1"
    publish(setup, first, 10)
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        wait_for(
            lambda: replayed(local_stack, first, f"{first}.copy") == list(range(10)),
            f"{first} was not replayed",
        )
        publish(setup, second, 7)  # exported after ingress started
        publish(setup, other, 3)  # does not match: digits
        wait_for(
            lambda: replayed(local_stack, second, f"{second}.copy") == list(range(7)),
            f"{second} was not followed",
        )
    finally:
        service.request_stop()
        runner.join(30)
    assert not runner.is_alive()
    topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert f"{other}.copy" not in topics and other not in topics


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('topic = "a"\ntopic_pattern = "a.*"', "name exactly one of topic and topic_pattern"),
        ("", "name exactly one of topic and topic_pattern"),
        ('topic_pattern = "a.*"\ndestination_topic = "all"', "must contain {topic}"),
        ('topic_pattern = "a("', "invalid regular expression"),
        ('topic = "a"\ndestination_topic = "{topic}/x"', "invalid Kafka topic name"),
    ],
)
def test_pattern_sources_are_checked_at_load(local_stack, tmp_path, source, message):
    regions = local_stack.config_path.read_text().split("[ingress]")[0]
    path = tmp_path / "c.toml"
    path.write_text(
        regions + f'[ingress]\nregion = "{DESTINATION}"\n[[ingress.sources]]\n'
        f'region = "{SOURCE}"\n{source}\n'
    )
    with pytest.raises(ConfigError, match=message):
        load_config(path)
