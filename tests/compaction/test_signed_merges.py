"""Compaction in a deployment that signs segments: outputs are signed, and an input the
deployment did not sign fails its merge (it would otherwise be signed into the output)."""

from __future__ import annotations

import base64

import pytest

from compaction.job import _merge_task
from compaction.merge import run_merge
from compaction.planning import Merge
from replicator.core.config import load_config
from replicator.core.config_json import config_to_json
from replicator.core.segments.errors import SegmentMismatchError, SegmentSignatureError
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.signing import UNSIGNED, SigningKeys, public_key_of
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


def test_a_compaction_without_the_private_key_fails_its_merges_naming_it(
    local_stack, compaction_setup, monkeypatch
):
    """Ed25519: compaction is given the private key's variable like egress. Run without
    it, each merge fails naming the setting (never writing an unsigned output, nor
    failing the whole run); its inputs stay."""
    setup = compaction_setup()
    private = bytes(range(32))
    public = base64.b64encode(public_key_of(private)).decode()
    setup.path.write_text(
        setup.path.read_text().replace(
            'prefix = "data"',
            'prefix = "data"\nsigning_private_key = "${TEST_SIGNING_PRIVATE}"\n'
            f'signing_public_keys = ["{public}"]',
        )
    )
    monkeypatch.setenv("TEST_SIGNING_PRIVATE", base64.b64encode(private).decode())
    store = SegmentStore.for_region(load_config(setup.path), SOURCE)
    for start in (0, 10, 20):
        store.write_segment(
            SegmentKey(SOURCE, setup.topic, 0, 0, start, start + 9), segment_batch(start, 10)
        )
    inputs = tuple(store.list_segments(SOURCE, setup.topic, 0))
    monkeypatch.delenv("TEST_SIGNING_PRIVATE")
    config = load_config(setup.path)
    output = SegmentKey(SOURCE, setup.topic, 0, 1, 0, 29)

    result = _merge_task((config_to_json(config), SOURCE, Merge(output, inputs), None, True))

    assert result.failed is not None and "signing_private_key" in result.failed, result
    assert "TEST_SIGNING_PRIVATE" in result.failed
    assert store.list_segments(SOURCE, setup.topic, 0) == list(inputs)


def test_inputs_of_two_topic_generations_are_not_merged(local_stack, compaction_setup):
    """The output's footer names its inputs' topic id (signed where the deployment signs):
    inputs naming two fail the merge, naming the input and both ids; nothing is deleted."""
    setup = compaction_setup()
    store = SegmentStore.for_region(setup.config, SOURCE)
    store.write_segment(
        SegmentKey(SOURCE, setup.topic, 0, 0, 0, 9), segment_batch(0, 10), topic_id="A"
    )
    other = SegmentKey(SOURCE, setup.topic, 0, 0, 10, 19)
    store.write_segment(other, segment_batch(10, 10), topic_id="B")
    inputs = tuple(store.list_segments(SOURCE, setup.topic, 0))
    output = SegmentKey(SOURCE, setup.topic, 0, 1, 0, 19)

    with pytest.raises(SegmentMismatchError, match="of topic id B, but the merge's earlier"):
        run_merge(setup.config, SOURCE, Merge(output, inputs), None, delete=True)
    assert [s.segment_key for s in store.list_segments(SOURCE, setup.topic, 0)] == [
        i.segment_key for i in inputs
    ]

    store.write_segment(other, segment_batch(10, 10), topic_id="A")
    inputs = tuple(store.list_segments(SOURCE, setup.topic, 0))
    assert run_merge(setup.config, SOURCE, Merge(output, inputs), None, delete=True).records == 20
    assert store.footer(output).topic_id == "A"
