"""Signed objects in a real bucket: exported group offsets are signed and checked by every
reader (a forged one is refused naming it, the other groups go on), and a signed segment
does not validate under another deployment prefix."""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.errors import GroupOffsetsError
from replicator.core.groups.offsets_file import (
    GroupOffsets,
    group_history_s3_key,
    group_offsets_s3_key,
    signed_json,
)
from replicator.core.groups.stored import read_group_offsets, read_group_offsets_at
from replicator.core.kafka.clients import client_config
from replicator.core.segments import signing
from replicator.core.segments.descriptor import describe, write_descriptor
from replicator.core.segments.errors import SegmentMismatchError, SegmentSignatureError
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.signing import SigningKeys, public_key_of
from replicator.core.segments.store import SegmentStore, signing_keys
from tests.fixtures.ingress import segment_batch
from tests.fixtures.records import plain
from tests.fixtures.signing import SIGNING_KEY, signed_config, store_with
from tests.fixtures.stack import DESTINATION, SOURCE

KEYS = SigningKeys(SIGNING_KEY.encode())
AT_THE_END = {0: 2**62, 1: 2**62}
"""Offsets a forger gives a group: failed over there, it skips everything unread."""


def test_a_forged_group_offsets_object_is_refused_and_the_others_are_read(
    local_stack, bucket, caplog
):
    plain_store = local_stack.store(SOURCE, bucket)
    signed = store_with(plain_store, KEYS)
    forged = GroupOffsets(SOURCE, "t", "forged", AT_THE_END, 1.0)
    for s3_key in (
        group_offsets_s3_key("data", SOURCE, "t", "forged"),
        group_history_s3_key("data", SOURCE, "t", "forged", 1000),
    ):
        plain_store.put_json(s3_key, forged.to_json())  # what a bucket writer can do
    with caplog.at_level(logging.WARNING):
        assert read_group_offsets(signed, SOURCE, "t") == []
        assert read_group_offsets_at(signed, SOURCE, "t", None) == []
    refusals = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any("_groups/forged.json" in r.getMessage() for r in refusals), caplog.text
    assert any("_group_history/forged/" in r.getMessage() for r in refusals), caplog.text
    assert all("unsigned" in r.getMessage() for r in refusals), caplog.text

    good = GroupOffsets(SOURCE, "t", "good", {0: 5, 1: 7}, 2.5)
    good_key = group_offsets_s3_key("data", SOURCE, "t", "good")
    signed.put_json(good_key, signed_json(good, good_key, KEYS))
    history_key = group_history_s3_key("data", SOURCE, "t", "good", 2500)
    signed.put_json(history_key, signed_json(good, history_key, KEYS))
    assert read_group_offsets(signed, SOURCE, "t") == [good]
    assert read_group_offsets_at(signed, SOURCE, "t", None) == [good]
    assert read_group_offsets(plain_store, SOURCE, "t") == [forged, good]  # unsigned: as before

    caplog.clear()
    # The good signature under another group's key, or over other offsets, is refused.
    copied = {**signed_json(good, good_key, KEYS), "group": "copied"}
    signed.put_json(group_offsets_s3_key("data", SOURCE, "t", "copied"), copied)
    moved = {**signed_json(good, good_key, KEYS), "offsets": {"0": 2**62, "1": 7}}
    signed.put_json(good_key, moved)
    with caplog.at_level(logging.WARNING):
        assert read_group_offsets(signed, SOURCE, "t") == []
    messages = caplog.text
    assert "_groups/copied.json" in messages and "_groups/good.json" in messages, messages
    assert "matches none of the configured keys" in messages


def failover(path: Path, *groups: str) -> subprocess.CompletedProcess[str]:
    """``replicator failover --apply`` for ``groups``, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "replicator", "failover", "--config", str(path), "--apply"]
        + [arg for group in groups for arg in ("--group", group)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_failover_refuses_a_forged_group_file_naming_it(
    local_stack, ingress_setup, unique, monkeypatch
):
    """``replicator failover --apply`` in a signing deployment: a group whose exported
    offsets a bucket writer forged (at the end of the replayed data) is not moved, the
    refusal names the object; a signed group is moved."""
    setup = ingress_setup()
    config = signed_config(setup.path, monkeypatch)
    store = SegmentStore.for_region(config, DESTINATION)
    write_descriptor(store, SOURCE, setup.topic, describe(setup.topic, 1, {}, SOURCE, {0: 0}))
    store.write_segment(SegmentKey(SOURCE, setup.topic, 0, 0, 0, 9), segment_batch(0, 10))
    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0
    forged, good = unique("forged-app"), unique("good-app")
    forged_key = group_offsets_s3_key("data", SOURCE, setup.topic, forged)
    store_with(store, SigningKeys()).put_json(
        forged_key, GroupOffsets(SOURCE, setup.topic, forged, {0: 10}, 1.0).to_json()
    )

    result = failover(setup.path, forged)
    assert "no exported offsets found" in result.stdout, result.stdout + result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    assert forged_key in result.stderr and "unsigned" in result.stderr, result.stderr
    assert (
        GroupAdmin(client_config(config.region(DESTINATION).kafka), DESTINATION).committed(forged)
        == {}
    )

    good_key = group_offsets_s3_key("data", SOURCE, setup.topic, good)
    store.put_json(
        good_key, signed_json(GroupOffsets(SOURCE, setup.topic, good, {0: 4}, 1.0), good_key, KEYS)
    )
    result = failover(setup.path, good)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "committed (1 partitions moved)" in result.stdout, result.stdout


def test_a_signed_segment_is_refused_under_another_prefix(local_stack, bucket):
    """Two deployments sharing a key but not a prefix: one's segments copied under the
    other's prefix do not validate there."""
    ours = local_stack.store(SOURCE, bucket)
    theirs = SegmentStore(ours.client, bucket, "theirs", keys=KEYS)
    ours = store_with(ours, KEYS)
    key = SegmentKey(SOURCE, "sensor.events", 0, 0, 0, 9)
    written = theirs.write_segment(key, plain(10))
    ours.client.copy_object(
        Bucket=bucket,
        Key=key.to_s3_key(ours.prefix),
        CopySource={"Bucket": bucket, "Key": written.s3_key},
    )
    assert theirs.read_segment(key).num_rows == 10
    with pytest.raises(SegmentSignatureError, match="matches none of the configured keys"):
        ours.open(key)


def test_an_ed25519_deployment_signs_in_writers_and_only_verifies_in_readers(
    local_stack, bucket, tmp_path, monkeypatch
):
    """Egress and compaction are given the private key's variable, the other services
    not: theirs is a store that reads what the writers signed and cannot sign itself."""
    private = bytes(range(32))
    public = base64.b64encode(public_key_of(private)).decode()
    path = tmp_path / "replicator.toml"
    path.write_text(
        local_stack.config_path.read_text().replace(
            'prefix = "data"',
            'prefix = "data"\nsigning_private_key = "${TEST_SIGNING_PRIVATE}"\n'
            f'signing_public_keys = ["{public}"]',
        )
    )
    monkeypatch.setenv("TEST_SIGNING_PRIVATE", base64.b64encode(private).decode())
    writer = store_with(local_stack.store(SOURCE, bucket), signing_keys(load_config(path).s3))
    monkeypatch.delenv("TEST_SIGNING_PRIVATE")
    reader = store_with(writer, signing_keys(load_config(path).s3))
    assert writer.keys.signs and not reader.keys.signs and reader.keys.required

    key = SegmentKey(SOURCE, "sensor.events", 0, 0, 0, 9)
    writer.write_segment(key, plain(10))
    assert reader.read_segment(key).num_rows == 10
    with pytest.raises(ValueError, match="TEST_SIGNING_PRIVATE"):
        reader.write_segment(SegmentKey(SOURCE, "sensor.events", 0, 0, 10, 19), plain(10, 10))
    group = GroupOffsets(SOURCE, "t", "app", {0: 3}, 1.0)
    s3_key = group_offsets_s3_key("data", SOURCE, "t", "app")
    writer.put_json(s3_key, signed_json(group, s3_key, writer.keys))
    assert read_group_offsets(reader, SOURCE, "t") == [group]
    with pytest.raises(GroupOffsetsError, match="signing_private_key"):
        signed_json(group, s3_key, reader.keys)


def test_a_signed_segment_of_another_topic_generation_is_refused(local_stack, bucket):
    """The topic deleted and created again: a signed segment of the earlier generation
    put back at its key (bucket versioning keeps it) names the earlier topic id, and is
    refused against the signed descriptor's, naming its key and both ids."""
    store = store_with(local_stack.store(SOURCE, bucket), KEYS)
    topic = "sensor.events"
    write_descriptor(store, SOURCE, topic, describe(topic, 1, {}, SOURCE, {0: 0}, topic_id="B"))
    current = SegmentKey(SOURCE, topic, 0, 0, 0, 9)
    store.write_segment(current, plain(10), topic_id="B")
    assert store.read_segment(current).num_rows == 10
    earlier = SegmentKey(SOURCE, topic, 0, 0, 10, 19)
    store.write_segment(earlier, plain(10, 10), topic_id="A")
    with pytest.raises(SegmentMismatchError) as refused:
        store.open(earlier)
    message = str(refused.value)
    assert earlier.to_s3_key("data") in message, message
    assert "of topic id A, but its topic descriptor names topic id B" in message, message
    # A segment naming no generation does not pass for this one either.
    store.write_segment(earlier, plain(10, 10))
    with pytest.raises(SegmentMismatchError, match=r"of topic id \(none\), but"):
        store.open(earlier)


def test_a_topic_exported_anew_is_read_against_its_new_descriptor(local_stack, bucket):
    """A reader that read the descriptor of generation A reads it again when a segment
    names another id: the operator moved A's segments out and egress exports B."""
    store = store_with(local_stack.store(SOURCE, bucket), KEYS)
    topic = "sensor.events"
    write_descriptor(store, SOURCE, topic, describe(topic, 1, {}, SOURCE, {0: 0}, topic_id="A"))
    store.write_segment(SegmentKey(SOURCE, topic, 0, 0, 0, 9), plain(10), topic_id="A")
    assert store.read_segment(SegmentKey(SOURCE, topic, 0, 0, 0, 9)).num_rows == 10
    write_descriptor(store, SOURCE, topic, describe(topic, 1, {}, SOURCE, {0: 0}, topic_id="B"))
    store.write_segment(SegmentKey(SOURCE, topic, 0, 0, 0, 9), plain(10), topic_id="B")
    assert store.read_segment(SegmentKey(SOURCE, topic, 0, 0, 0, 9)).num_rows == 10


def test_without_a_recorded_topic_id_segments_are_not_compared(local_stack, bucket):
    """A descriptor naming no topic id (a broker that reports none), or none there yet
    (bucket replication keeps no order): nothing trusted to compare with, so read."""
    store = store_with(local_stack.store(SOURCE, bucket), KEYS)
    key = SegmentKey(SOURCE, "sensor.events", 0, 0, 0, 9)
    store.write_segment(key, plain(10), topic_id="A")
    assert store.read_segment(key).num_rows == 10
    write_descriptor(store, SOURCE, "sensor.events", describe("sensor.events", 1, {}, SOURCE))
    assert store_with(store, KEYS).read_segment(key).num_rows == 10


def test_a_forged_descriptor_stops_the_segments_read_against_it(local_stack, bucket):
    store = store_with(local_stack.store(SOURCE, bucket), KEYS)
    key = SegmentKey(SOURCE, "sensor.events", 0, 0, 0, 9)
    store.write_segment(key, plain(10), topic_id="A")
    forged = describe("sensor.events", 1, {}, SOURCE, topic_id="A")
    store_with(store, SigningKeys()).put_json(
        topic_descriptor_s3_key("data", SOURCE, "sensor.events"), forged
    )
    with pytest.raises(SegmentMismatchError, match=r"generation cannot be checked: .*unsigned"):
        store.open(key)


def test_a_segment_signed_with_the_v2_scheme_is_refused_saying_so(local_stack, bucket, monkeypatch):
    """v2 signatures bound no generation: refused like v1, the reason naming v2."""
    store = store_with(local_stack.store(SOURCE, bucket), KEYS)
    key = SegmentKey(SOURCE, "sensor.events", 0, 0, 0, 9)
    with monkeypatch.context() as patched:
        patched.setattr(
            signing,
            "segment_message",
            lambda s3_key, footer: signing.V2_SEGMENT_DOMAIN + s3_key.encode() + b"\n" + footer,
        )
        store.write_segment(key, plain(10))
    with pytest.raises(SegmentSignatureError, match="signed with segment signature v2"):
        store.open(key)
