"""Egress in a deployment with ``[s3] signing_key``: the segments its tasks write (the
code a Spark task runs, here in this process) carry the signature readers require."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition

from egress.catalog import SourceCatalog
from egress.group_offsets import GroupOffsetsExporter
from egress.kafka_source import export_ranges
from egress.planning import OffsetRange
from egress.topic_descriptor import DescriptorPublisher
from replicator.core.groups.offsets_file import group_offsets_s3_key
from replicator.core.groups.stored import read_group_offsets, read_group_offsets_at
from replicator.core.kafka.clients import retry_while_moving
from replicator.core.segments.descriptor import describe, read_descriptor, write_descriptor
from replicator.core.segments.errors import DescriptorError, SegmentSignatureError
from replicator.core.segments.signing import UNSIGNED, SigningKeys
from replicator.core.segments.store import SegmentStore
from tests.fixtures.egress import one_partition_topic
from tests.fixtures.signing import SIGNING_KEY, signed_by, signed_config, store_with
from tests.fixtures.stack import SOURCE


def test_egress_signs_the_segments_it_writes(local_stack, egress_config, unique, monkeypatch):
    topic = unique("signed")
    one_partition_topic(local_stack, topic, [b"v%d" % i for i in range(10)])
    _, path = egress_config({topic: {}})
    config = signed_config(path, monkeypatch)

    written = list(export_ranges(config, [OffsetRange(topic, 0, 0, 10)]))

    assert [(s.segment_key.start, s.segment_key.end) for s in written[0].segments] == [(0, 9)]
    store = SegmentStore.for_region(config, SOURCE)
    [segment] = store.list_segments(SOURCE, topic, 0)
    body = store.client.get_object(Bucket=store.bucket, Key=segment.s3_key)["Body"].read()
    assert signed_by(SigningKeys(SIGNING_KEY.encode()), segment.s3_key, bytes(body))
    assert store.read_segment(segment).column("value").to_pylist() == [
        b"v%d" % i for i in range(10)
    ]
    # The same records written without the key are refused by the signing deployment.
    store_with(store, UNSIGNED).write_segment(segment.segment_key, store.read_segment(segment))
    with pytest.raises(SegmentSignatureError, match=f"{segment.s3_key}: unsigned"):
        store.open(segment.segment_key)


def test_egress_signs_the_group_offsets_it_exports(local_stack, egress_config, unique, monkeypatch):
    topic, group = unique("signed"), unique("signed-app")
    one_partition_topic(local_stack, topic, [b"v%d" % i for i in range(10)])
    consumer = Consumer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "group.id": group})
    retry_while_moving(
        lambda: consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    )
    consumer.close()
    _, path = egress_config({topic: {}}, consumer_groups=[group])
    config = signed_config(path, monkeypatch)

    assert GroupOffsetsExporter(config, SourceCatalog(config)).export() == 1

    store = SegmentStore.for_region(config, SOURCE)
    [latest] = read_group_offsets(store, SOURCE, topic)
    [at_the_time] = read_group_offsets_at(store, SOURCE, topic, None)
    assert latest.offsets == at_the_time.offsets == {0: 7}
    # Every object carries a signature for its own key: none reads under another.
    s3_key = group_offsets_s3_key("data", SOURCE, topic, group)
    body = json.loads(store.client.get_object(Bucket=store.bucket, Key=s3_key)["Body"].read())
    assert body["signature"].startswith("replicator-signature-v2:hmac-sha256:")
    assert read_group_offsets(store_with(store, SigningKeys(b"x" * 32)), SOURCE, topic) == []


def test_egress_signs_the_topic_descriptor_with_the_topic_id(
    local_stack, egress_config, unique, monkeypatch
):
    topic = unique("signed")
    one_partition_topic(local_stack, topic, [b"v%d" % i for i in range(3)])
    _, path = egress_config({topic: {}})
    config = signed_config(path, monkeypatch)
    catalog = SourceCatalog(config)

    DescriptorPublisher(config, catalog).publish()

    store = SegmentStore.for_region(config, SOURCE)
    descriptor = read_descriptor(store, SOURCE, topic)
    assert descriptor is not None and descriptor.partitions == 1
    assert (
        descriptor.topic_id is not None and descriptor.topic_id == catalog.topic_ids([topic])[topic]
    )
    with pytest.raises(DescriptorError, match="matches none of the configured keys"):
        read_descriptor(store_with(store, SigningKeys(b"x" * 32)), SOURCE, topic)


def test_the_segments_egress_writes_name_the_planned_topic_generation(
    local_stack, egress_config, unique, monkeypatch
):
    topic = unique("signed")
    one_partition_topic(local_stack, topic, [b"v%d" % i for i in range(4)])
    _, path = egress_config({topic: {}})
    config = signed_config(path, monkeypatch)
    topic_id = SourceCatalog(config).topic_ids([topic])[topic]
    assert topic_id is not None
    planned = OffsetRange(topic, 0, 0, 4, topic_id=topic_id)

    [written] = export_ranges(config, [planned])

    store = SegmentStore.for_region(config, SOURCE)
    write_descriptor(store, SOURCE, topic, describe(topic, 1, {}, SOURCE, topic_id=topic_id))
    [segment] = written.segments
    assert store.footer(segment.segment_key).topic_id == topic_id
