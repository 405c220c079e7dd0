"""Compaction in a deployment that signs segments: outputs are signed, and an input the
deployment did not sign fails its merge (it would otherwise be signed into the output)."""

from __future__ import annotations

import pytest

from compaction.merge import run_merge
from compaction.planning import Merge
from replicator.core.segments.errors import SegmentSignatureError
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.signing import UNSIGNED, SigningKeys
from replicator.core.segments.store import SegmentStore
from tests.fixtures.ingress import segment_batch
from tests.fixtures.signing import SIGNING_KEY, signed_by, signed_config, store_with
from tests.fixtures.stack import SOURCE


def stored_bytes(store: SegmentStore, key: SegmentKey) -> bytes:
    body = store.client.get_object(Bucket=store.bucket, Key=key.to_s3_key(store.prefix))["Body"]
    return bytes(body.read())


def test_merged_outputs_are_signed(local_stack, compaction_setup, monkeypatch):
    setup = compaction_setup()
    config = signed_config(setup.path, monkeypatch)
    store = SegmentStore.for_region(config, SOURCE)
    for start in (0, 10, 20):
        key = SegmentKey(SOURCE, setup.topic, 0, 0, start, start + 9)
        store.write_segment(key, segment_batch(start, 10))
    inputs = tuple(store.list_segments(SOURCE, setup.topic, 0))
    output = SegmentKey(SOURCE, setup.topic, 0, 1, 0, 29)

    result = run_merge(config, SOURCE, Merge(output, inputs), None, delete=True)

    assert (result.records, result.deleted) == (30, 3)
    keys = SigningKeys(SIGNING_KEY.encode())
    assert signed_by(keys, output.to_s3_key("data"), stored_bytes(store, output))
    assert store.read_segment(output).column("offset").to_pylist() == list(range(30))


def test_an_unsigned_input_fails_the_merge_and_nothing_is_written_or_deleted(
    local_stack, compaction_setup, monkeypatch
):
    setup = compaction_setup()
    config = signed_config(setup.path, monkeypatch)
    store = SegmentStore.for_region(config, SOURCE)
    store.write_segment(SegmentKey(SOURCE, setup.topic, 0, 0, 0, 9), segment_batch(0, 10))
    forged = SegmentKey(SOURCE, setup.topic, 0, 0, 10, 19)
    store_with(store, UNSIGNED).write_segment(forged, [])  # an empty replacement
    inputs = tuple(store.list_segments(SOURCE, setup.topic, 0))
    output = SegmentKey(SOURCE, setup.topic, 0, 1, 0, 19)

    with pytest.raises(SegmentSignatureError, match=forged.to_s3_key("data") + ": unsigned"):
        run_merge(config, SOURCE, Merge(output, inputs), None, delete=True)

    listed = [s.segment_key for s in store.list_segments(SOURCE, setup.topic, 0)]
    assert listed == [inputs[0].segment_key, forged]
