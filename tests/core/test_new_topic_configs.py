"""A forged descriptor no longer decides how a new destination topic is created, and a
pattern no longer admits any number of topics. Pure."""

from __future__ import annotations

import pytest

from ingress.sources import bounded_sources, concrete_sources
from replicator.core.config import IngressConfig, parse_config, required
from replicator.core.errors import ConfigError
from replicator.core.kafka.topics import (
    COPIED_CONFIGS,
    NEW_TOPIC_FLOORS,
    new_topic_configs,
    unsafe_changes,
)

WEEK_MS = NEW_TOPIC_FLOORS["retention.ms"]
CENTURY_MS = str(100 * 365 * 86_400_000)


@pytest.mark.parametrize(
    ("current", "changes", "unsafe"),
    [
        ({"min.cleanable.dirty.ratio": "0.5"}, {"min.cleanable.dirty.ratio": "0"}, True),
        ({"min.cleanable.dirty.ratio": "0.5"}, {"min.cleanable.dirty.ratio": "0.9"}, False),
        ({"min.cleanable.dirty.ratio": "0.5"}, {"min.cleanable.dirty.ratio": "nan"}, True),
        ({"max.compaction.lag.ms": "9223372036854775807"}, {"max.compaction.lag.ms": "1"}, True),
    ],
)
def test_compacting_sooner_counts_as_deleting_sooner(current, changes, unsafe):
    assert unsafe_changes(current, changes) == (sorted(changes) if unsafe else [])


@pytest.mark.parametrize(
    ("asked", "created", "refused"),
    [
        # What the issue forged: retention that deletes at once, compaction that keeps a
        # key's last record only, as soon as possible.
        (
            {"retention.ms": "1", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"},
            {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"},
            ["cleanup.policy", "min.cleanable.dirty.ratio", "retention.ms"],
        ),
        ({"retention.ms": "1"}, {"retention.ms": WEEK_MS}, ["retention.ms"]),
        ({"retention.bytes": "0"}, {"retention.bytes": "-1"}, ["retention.bytes"]),
        (
            {"delete.retention.ms": "0"},
            {"delete.retention.ms": "86400000"},
            ["delete.retention.ms"],
        ),
        ({"cleanup.policy": "compact,delete"}, {"cleanup.policy": "delete"}, ["cleanup.policy"]),
        # Raising a floor, or a config that deletes nothing, is taken as asked.
        ({"retention.ms": CENTURY_MS}, {"retention.ms": CENTURY_MS}, []),
        ({"retention.ms": "-1"}, {"retention.ms": "-1"}, []),
        ({"min.compaction.lag.ms": "60000"}, {"min.compaction.lag.ms": "60000"}, []),
        ({"cleanup.policy": "delete"}, {"cleanup.policy": "delete"}, []),
        ({"compression.type": "zstd"}, {"compression.type": "zstd"}, []),
        # Never copied at all.
        ({"segment.ms": "1", "min.insync.replicas": "1"}, {}, []),
    ],
)
def test_a_new_destination_gets_no_config_below_the_floors(asked, created, refused):
    configs, names = new_topic_configs(asked)
    assert {name: configs[name] for name in created} == created
    assert names == refused
    assert "segment.ms" not in configs and "min.insync.replicas" not in configs
    assert configs["message.timestamp.type"] == "CreateTime"


def test_the_floors_cover_every_copied_config_that_deletes_data():
    assert set(NEW_TOPIC_FLOORS) <= set(COPIED_CONFIGS)


def ingress_config(sources: str) -> IngressConfig:
    text = (
        '[regions.east]\nbucket = "bucket-east"\nkafka.bootstrap_servers = "127.0.0.1:1"\n'
        '[regions.west]\nbucket = "bucket-west"\nsqs_queue = "events"\n'
        'kafka.bootstrap_servers = "127.0.0.1:1"\n'
        '[ingress]\nregion = "west"\n' + sources
    )
    return required(parse_config(text, "ingress.toml", {}), "ingress")


PATTERN = (
    '[[ingress.sources]]\nregion = "east"\ntopic_pattern = "app\\\\..*"\n'
    'destination_topic = "{topic}.copy"\nmax_topics = 2\n'
)


def test_a_pattern_admits_at_most_max_topics_topics():
    ingress = ingress_config(PATTERN)
    listed = ["app.a", "app.b", "app.c", "other"]
    found, past = bounded_sources(ingress, lambda _region: listed)
    assert [s.topic for s in found] == ["app.a", "app.b"]
    assert list(past) == [("east", "app.c")]
    assert "max_topics = 2" in past[("east", "app.c")]
    assert [s.topic for s in concrete_sources(ingress, lambda _region: listed)] == [
        "app.a",
        "app.b",
    ]


def test_topics_replayed_already_keep_their_place():
    """A forged topic whose name sorts first does not push out a topic being replayed."""
    ingress = ingress_config(PATTERN)
    listed = ["app.0forged", "app.b", "app.c"]
    found, past = bounded_sources(
        ingress, lambda _region: listed, replaying={("east", "app.b"), ("east", "app.c")}
    )
    assert sorted(s.topic for s in found) == ["app.b", "app.c"]
    assert list(past) == [("east", "app.0forged")]


def test_a_named_topic_does_not_count_against_a_pattern():
    ingress = ingress_config(
        '[[ingress.sources]]\nregion = "east"\ntopic = "app.a"\ndestination_topic = "x"\n' + PATTERN
    )
    found, past = bounded_sources(ingress, lambda _region: ["app.a", "app.b", "app.c"])
    assert [s.topic for s in found] == ["app.a", "app.b", "app.c"] and past == {}


def test_max_topics_has_a_default_and_must_be_positive():
    ingress = ingress_config(PATTERN.replace("max_topics = 2\n", ""))
    assert ingress.sources[0].max_topics == 100
    with pytest.raises(ConfigError, match="max_topics"):
        ingress_config(PATTERN.replace("max_topics = 2", "max_topics = 0"))
