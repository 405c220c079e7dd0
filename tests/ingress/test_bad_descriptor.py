"""An unusable topic descriptor stops only its own source, with an ERROR naming its key;
the other sources replay."""

from __future__ import annotations

import logging

import pytest

from ingress.service import IngressService
from replicator.core.kafka import provenance
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import segment_batch
from tests.fixtures.stack import DESTINATION, SOURCE


@pytest.mark.parametrize(
    ("poison", "message"),
    [
        ({"partitions": "many", "configs": {}}, "'partitions' is 'many'"),
        # Digits str.isdigit() accepts and int() refuses: once a plain ValueError that
        # stopped every source.
        ({"partitions": 1, "configs": {"retention.ms": "²"}}, "config retention.ms = '²'"),
        ({"partitions": 1, "configs": {"retention.bytes": "--5"}}, "retention.bytes = '--5'"),
        ({"partitions": 1, "configs": {}, "export_start": {"²": 0}}, "partition '²'"),
    ],
)
def test_a_bad_descriptor_stops_only_its_source(
    local_stack, ingress_setup, unique, caplog, poison, message
):
    other, other_copy = unique("healthy"), unique("healthy.copy")
    setup = ingress_setup(
        extra_toml=f'[[ingress.sources]]\nregion = "{SOURCE}"\ntopic = "{other}"\n'
        f'destination_topic = "{other_copy}"\nfirst_segment_delay = "0s"\n'
    )
    bad_key = topic_descriptor_s3_key("data", SOURCE, setup.topic)
    setup.store.put_json(bad_key, poison)
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    setup.store.put_json(
        topic_descriptor_s3_key("data", SOURCE, other), describe(other, 1, {}, SOURCE, {0: 0})
    )
    setup.store.write_segment(SegmentKey(SOURCE, other, 0, 0, 0, 9), segment_batch(0, 10))
    with caplog.at_level(logging.ERROR):
        IngressService(setup.config, stop_at_end=True, handle_signals=False).run()
    named = provenance.SourcePartition(SOURCE, other, 0)
    copied = read_partition(local_stack.bootstrap(DESTINATION), other_copy, 0)
    assert [provenance.source_offset(list(r[5]), named) for r in copied] == list(range(10))
    assert any(bad_key in r.getMessage() and message in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records
    ]
