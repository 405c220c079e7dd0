"""Ingress with signed segments: a segment the deployment did not sign halts its
partition naming the S3 object key and why; signed segments replay exactly once; a topic
descriptor the deployment did not sign stops its source only."""

from __future__ import annotations

import dataclasses
import logging

from ingress.service import IngressService
from replicator.core.kafka import provenance
from replicator.core.segments.descriptor import describe, write_descriptor
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.signing import UNSIGNED, SigningKeys
from tests.fixtures.hostile import forge, rows
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import provenance_offsets, segment_batch
from tests.fixtures.signing import ATTACKER_KEY, signed_config, store_with
from tests.fixtures.stack import DESTINATION, SOURCE


def test_segments_the_deployment_did_not_sign_halt_their_partitions(
    local_stack, ingress_setup, caplog, monkeypatch
):
    plain = ingress_setup()
    config = signed_config(plain.path, monkeypatch)
    setup = dataclasses.replace(plain, config=config)
    signed = setup.store.__class__.for_region(config, DESTINATION)
    assert signed.keys.signs
    unsigned = store_with(signed, UNSIGNED)
    attacker = store_with(signed, SigningKeys(ATTACKER_KEY))
    setup.put_descriptor(4, export_start={p: 0 for p in range(4)}, store=signed)
    for partition in range(4):
        signed.write_segment(
            SegmentKey(SOURCE, setup.topic, partition, 0, 0, 9), segment_batch(0, 10)
        )
    second = {p: SegmentKey(SOURCE, setup.topic, p, 0, 10, 19) for p in range(4)}
    unsigned.write_segment(second[0], segment_batch(10, 10))
    attacker.write_segment(second[1], segment_batch(10, 10))
    # A valid empty segment in place of the real one: unsigned ingress skips 10..19.
    local_stack.s3().put_object(
        Bucket=signed.bucket, Key=second[2].to_s3_key("data"), Body=forge(second[2], rows([]))
    )
    signed.write_segment(second[3], segment_batch(10, 10))

    with caplog.at_level(logging.ERROR):
        service = IngressService(config, stop_at_end=True, handle_signals=False)
        code = service.run()

    assert code == 1
    halts = [r.getMessage() for r in caplog.records if "partition halted" in r.getMessage()]
    reasons = {0: "unsigned", 1: "matches none of the configured keys", 2: "unsigned"}
    for partition, reason in reasons.items():
        s3_key = second[partition].to_s3_key("data")
        assert [h for h in halts if s3_key in h and reason in h], (partition, halts)
        assert provenance_offsets(local_stack, setup, partition) == list(range(10)), partition
    assert len(halts) == 3, halts
    assert provenance_offsets(local_stack, setup, 3) == list(range(20))


def test_a_signed_pipeline_replays_exactly_once_across_a_restart(
    local_stack, ingress_setup, monkeypatch
):
    plain = ingress_setup()
    config = signed_config(plain.path, monkeypatch)
    setup = dataclasses.replace(plain, config=config)
    signed = setup.store.__class__.for_region(config, DESTINATION)
    setup.put_descriptor(2, export_start={0: 0, 1: 0}, store=signed)
    for partition in range(2):
        signed.write_segment(
            SegmentKey(SOURCE, setup.topic, partition, 0, 0, 9), segment_batch(0, 10)
        )
    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0
    for partition in range(2):  # more arrives; a second run resumes where the first stopped
        signed.write_segment(
            SegmentKey(SOURCE, setup.topic, partition, 0, 10, 29), segment_batch(10, 20)
        )
    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0
    for partition in range(2):
        assert provenance_offsets(local_stack, setup, partition) == list(range(30))


def test_a_descriptor_the_deployment_did_not_sign_stops_only_its_source(
    local_stack, ingress_setup, unique, caplog, monkeypatch
):
    """The descriptor names the generation whose segments ingress replays: one a bucket
    writer put there (unsigned) stops its source with an ERROR naming its S3 object key;
    a source whose descriptor is signed replays."""
    other, other_copy = unique("healthy"), unique("healthy.copy")
    plain = ingress_setup(
        extra_toml=f'[[ingress.sources]]\nregion = "{SOURCE}"\ntopic = "{other}"\n'
        f'destination_topic = "{other_copy}"\nfirst_segment_delay = "0s"\n'
    )
    config = signed_config(plain.path, monkeypatch)
    signed = plain.store.__class__.for_region(config, DESTINATION)
    plain.put_descriptor(1, export_start={0: 0})  # unsigned: a bucket writer's
    signed.write_segment(SegmentKey(SOURCE, plain.topic, 0, 0, 0, 9), segment_batch(0, 10))
    write_descriptor(signed, SOURCE, other, describe(other, 1, {}, SOURCE, {0: 0}))
    signed.write_segment(SegmentKey(SOURCE, other, 0, 0, 0, 9), segment_batch(0, 10))

    with caplog.at_level(logging.ERROR):
        IngressService(config, stop_at_end=True, handle_signals=False).run()

    named = provenance.SourcePartition(SOURCE, other, 0)
    copied = read_partition(local_stack.bootstrap(DESTINATION), other_copy, 0)
    assert [provenance.source_offset(list(r[5]), named) for r in copied] == list(range(10))
    bad_key = topic_descriptor_s3_key("data", SOURCE, plain.topic)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(bad_key in e and "unsigned" in e for e in errors), errors


def test_a_segment_of_another_topic_generation_halts_its_partition(
    local_stack, ingress_setup, caplog, monkeypatch
):
    """The source topic was deleted and created again (id B); a validly signed segment of
    the earlier generation (id A) put back at the next key halts the partition, naming its
    key and both ids; nothing of it is replayed."""
    plain = ingress_setup()
    config = signed_config(plain.path, monkeypatch)
    signed = plain.store.__class__.for_region(config, DESTINATION)
    plain.put_descriptor(1, export_start={0: 0}, store=signed, topic_id="B")
    signed.write_segment(
        SegmentKey(SOURCE, plain.topic, 0, 0, 0, 9), segment_batch(0, 10), topic_id="B"
    )
    earlier = SegmentKey(SOURCE, plain.topic, 0, 0, 10, 19)
    signed.write_segment(earlier, segment_batch(10, 10), topic_id="A")

    with caplog.at_level(logging.ERROR):
        code = IngressService(config, stop_at_end=True, handle_signals=False).run()

    assert code == 1
    halts = [r.getMessage() for r in caplog.records if "partition halted" in r.getMessage()]
    assert [h for h in halts if earlier.to_s3_key("data") in h and "topic id A" in h], halts
    assert [h for h in halts if "names topic id B" in h], halts
    assert provenance_offsets(local_stack, plain, 0) == list(range(10))
