"""A merge's output is verified before any input is deleted: a damaged, truncated or
replaced object at the output key fails the merge and leaves every input in place,
whether S3's ETags vouch for the bytes (the default) or the output is read back
(SSE-KMS)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import compaction.merge
from compaction.merge import run_merge
from compaction.planning import Merge
from replicator.core.config import Config
from replicator.core.errors import ReplicatorError
from replicator.core.faults import COMPACTION_AFTER_OUTPUT
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import SegmentStore, StoredSegment
from tests.fixtures.compaction import CompactionSetup, records, segments
from tests.fixtures.stack import SOURCE


def with_sse_kms(config: Config) -> Config:
    s3 = config.s3.model_copy(update={"sse": "SSE-KMS", "sse_kms_key_id": "alias/replicator"})
    return config.model_copy(update={"s3": s3})


def merge_of_three(local_stack: Any, setup: CompactionSetup) -> tuple[Merge, list[Any]]:
    setup.fill(partitions=1, segments=3, per_segment=50)
    inputs = tuple(setup.store.list_segments(SOURCE, setup.topic, 0))
    before = records(segments(local_stack, setup)[0])
    return Merge(SegmentKey(SOURCE, setup.topic, 0, 1, 0, 149), inputs), before


def assert_inputs_untouched(
    local_stack: Any, setup: CompactionSetup, merge: Merge, before: list[Any]
) -> None:
    """Every input still at its key with its records (the damaged output is removed
    first: the independent reader reads every object under the partition)."""
    local_stack.s3().delete_object(Bucket=setup.bucket, Key=merge.output.to_s3_key("data"))
    after = segments(local_stack, setup)[0]
    assert [(s.level, s.start, s.end) for s in after] == [(0, 0, 49), (0, 50, 99), (0, 100, 149)]
    assert records(after) == before


@pytest.mark.parametrize("sse", ["none", "SSE-KMS"])
def test_an_output_truncated_after_its_upload_fails_the_merge_and_keeps_the_inputs(
    local_stack, compaction_setup, monkeypatch, sse
):
    setup = compaction_setup()
    config = with_sse_kms(setup.config) if sse == "SSE-KMS" else setup.config
    merge, before = merge_of_three(local_stack, setup)
    output_s3_key = merge.output.to_s3_key("data")
    s3 = local_stack.s3()

    def truncate_the_output(point: str, **_: Any) -> None:
        if point == COMPACTION_AFTER_OUTPUT:  # complete at its key, not yet verified
            body = s3.get_object(Bucket=setup.bucket, Key=output_s3_key)["Body"].read()
            s3.put_object(Bucket=setup.bucket, Key=output_s3_key, Body=body[: len(body) // 2])

    monkeypatch.setattr(compaction.merge, "crash_point", truncate_the_output)
    with pytest.raises(ReplicatorError, match=output_s3_key):
        run_merge(config, SOURCE, merge, None, delete=True)
    assert_inputs_untouched(local_stack, setup, merge, before)


def test_a_body_damaged_on_its_way_to_s3_fails_the_merge_and_keeps_the_inputs(
    local_stack, compaction_setup, monkeypatch
):
    """S3 itself refuses a body that does not match its Content-MD5; the local S3 stores
    it, so here it is the ETag check that must catch it."""
    setup = compaction_setup()
    merge, before = merge_of_three(local_stack, setup)
    client = setup.store.client  # the process's client: the merge's store uses it too
    put_object = client.put_object

    def damaged_put(**kwargs: Any) -> Any:
        if kwargs["Key"] == merge.output.to_s3_key("data"):
            body = bytearray(kwargs["Body"])
            body[len(body) // 2] ^= 0xFF
            kwargs["Body"] = bytes(body)
        return put_object(**kwargs)

    monkeypatch.setattr(client, "put_object", damaged_put)
    with pytest.raises(ReplicatorError, match="ETag"):
        run_merge(setup.config, SOURCE, merge, None, delete=True)
    assert_inputs_untouched(local_stack, setup, merge, before)


@pytest.mark.parametrize("sse", ["none", "SSE-KMS"])
def test_an_intact_output_is_verified_and_its_inputs_deleted(local_stack, compaction_setup, sse):
    setup = compaction_setup()
    config = with_sse_kms(setup.config) if sse == "SSE-KMS" else setup.config
    merge, before = merge_of_three(local_stack, setup)
    result = run_merge(config, SOURCE, merge, None, delete=True)
    assert result.deleted == 3 and result.records == 150
    after = segments(local_stack, setup)[0]
    assert [(s.level, s.start, s.end) for s in after] == [(1, 0, 149)]
    assert records(after) == before


def kms_encrypted_by_the_bucket(stat: Any) -> Any:
    """``SegmentStore.stat`` as under a bucket whose default encryption is SSE-KMS: S3
    reports ``aws:kms`` for the object (and an ETag that is no MD5 of its bytes, which the
    local S3 cannot give: reads are pinned to the ETag it does give)."""

    def as_kms(self: SegmentStore, key: SegmentKey) -> StoredSegment:
        return dataclasses.replace(stat(self, key), encryption="aws:kms")

    return as_kms


@pytest.mark.parametrize("bucket_default", ["none", "aws:kms"])
def test_an_output_is_read_back_only_when_s3_encrypts_it_with_kms(
    local_stack, compaction_setup, monkeypatch, bucket_default
):
    setup = compaction_setup()  # the store itself is configured without encryption
    merge, before = merge_of_three(local_stack, setup)
    if bucket_default == "aws:kms":
        monkeypatch.setattr(SegmentStore, "stat", kms_encrypted_by_the_bucket(SegmentStore.stat))
    opened: list[int] = []
    open_segment = SegmentStore.open

    def recording_open(self: SegmentStore, segment: Any) -> Any:
        opened.append(segment.segment_key.level)
        return open_segment(self, segment)

    monkeypatch.setattr(SegmentStore, "open", recording_open)
    result = run_merge(setup.config, SOURCE, merge, None, delete=True)
    assert result.deleted == 3
    assert records(segments(local_stack, setup)[0]) == before
    assert opened == ([0, 0, 0, 1] if bucket_default == "aws:kms" else [0, 0, 0])


def test_a_truncated_output_the_bucket_encrypts_with_kms_fails_the_merge(
    local_stack, compaction_setup, monkeypatch
):
    setup = compaction_setup()
    merge, before = merge_of_three(local_stack, setup)
    output_s3_key = merge.output.to_s3_key("data")
    s3 = local_stack.s3()

    def truncate_the_output(point: str, **_: Any) -> None:
        if point == COMPACTION_AFTER_OUTPUT:
            body = s3.get_object(Bucket=setup.bucket, Key=output_s3_key)["Body"].read()
            s3.put_object(Bucket=setup.bucket, Key=output_s3_key, Body=body[: len(body) // 2])

    monkeypatch.setattr(compaction.merge, "crash_point", truncate_the_output)
    monkeypatch.setattr(SegmentStore, "stat", kms_encrypted_by_the_bucket(SegmentStore.stat))
    with pytest.raises(ReplicatorError, match=output_s3_key):
        run_merge(setup.config, SOURCE, merge, None, delete=True)
    assert_inputs_untouched(local_stack, setup, merge, before)
