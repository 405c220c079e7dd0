"""Egress in a deployment with ``[s3] signing_key``: the segments its tasks write (the
code a Spark task runs, here in this process) carry the signature readers require."""

from __future__ import annotations

import pytest

from egress.kafka_source import read_range
from egress.planning import OffsetRange
from egress.segment_sink import write_ranges
from replicator.core.segments.errors import SegmentSignatureError
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

    written = write_ranges(config, iter(read_range(config, OffsetRange(topic, 0, 0, 10))))

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
