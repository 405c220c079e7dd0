import logging
import os

import pyarrow as pa
import pytest

from replicator.core.aws.errors import ObjectNotFoundError, StorageError
from replicator.core.aws.s3_streams import etag_matches
from replicator.core.segments.errors import CorruptSegmentError
from replicator.core.segments.format import SCHEMA
from replicator.core.segments.key import SegmentKey
from tests.fixtures.records import every_shape, plain, to_batch
from tests.fixtures.stack import SOURCE


def incompressible(count: int) -> pa.RecordBatch:
    """``count`` records of 4 KiB of random bytes each, at offsets from 0."""
    return pa.RecordBatch.from_pydict(
        {
            "offset": list(range(count)),
            "timestamp": [0] * count,
            "timestamp_type": [1] * count,
            "key": [None] * count,
            "value": [os.urandom(4096) for _ in range(count)],
            "headers": [[]] * count,
        },
        schema=SCHEMA,
    )


def test_segment_written_through_the_store_is_listed_and_read_back(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket)
    records = every_shape(start=0, step=2)
    first = SegmentKey(SOURCE, "orders.v1", 0, 0, 0, 19)
    second = SegmentKey(SOURCE, "orders.v1", 0, 0, 20, 29)
    merged = SegmentKey(SOURCE, "orders.v1", 0, 1, 0, 29)
    other_partition = SegmentKey(SOURCE, "orders.v1", 1, 0, 0, 9)
    store.write_segment(first, to_batch(records))
    store.write_segment(second, plain(10, start=20))
    store.write_segment(
        merged,
        pa.concat_tables(
            [
                pa.Table.from_batches([to_batch(records)]),
                pa.Table.from_batches([plain(10, start=20)]),
            ]
        ),
    )
    store.write_segment(other_partition, plain(10))

    listed = store.list_segments(SOURCE, "orders.v1", 0)
    assert [s.segment_key for s in listed] == [first, merged, second]
    assert all(s.size > 0 for s in listed)
    assert store.read_segment(listed[0]).to_pylist() == to_batch(records).to_pylist()
    assert store.read_segment(second).column("offset").to_pylist() == list(range(20, 30))
    assert store.list_partitions(SOURCE, "orders.v1") == [0, 1]
    assert store.list_topics(SOURCE) == ["orders.v1"]


def test_segment_larger_than_one_part_is_uploaded_in_parts_and_reads_back(local_stack, bucket):
    part = 5 * 1024**2  # S3's minimum part size
    store = local_stack.store(SOURCE, bucket, part_size=part)
    key = SegmentKey(SOURCE, "big", 0, 0, 0, 2999)
    batch = incompressible(3000)  # ~12 MiB on disk
    values = batch.column("value").to_pylist()
    with store.writer(key, row_group_bytes=2 * 1024**2) as upload:
        upload.write(batch)
    stored = store.stat(key)
    assert stored.size > 2 * part
    head = local_stack.s3().head_object(Bucket=bucket, Key=stored.s3_key)
    assert head["ETag"].strip('"').endswith(f"-{-(-stored.size // part)}")  # multipart ETag
    # What the writer computed is what S3 reports for the bytes it holds.
    assert upload.uploaded is not None and upload.uploaded.size == stored.size
    assert etag_matches(head["ETag"], upload.uploaded)
    reader = store.open(stored)
    assert reader.num_row_groups >= 6
    assert reader.read_all().column("value").to_pylist() == values


def test_a_single_put_reports_the_md5_etag_s3_gives_it(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket)
    key = SegmentKey(SOURCE, "small", 0, 0, 0, 9)
    with store.writer(key) as upload:
        upload.write(plain(10))
    head = local_stack.s3().head_object(Bucket=bucket, Key=key.to_s3_key(store.prefix))
    assert upload.uploaded is not None and "-" not in upload.uploaded.md5_etag
    assert etag_matches(head["ETag"], upload.uploaded)
    assert not etag_matches(None, upload.uploaded)


def test_every_upload_carries_its_md5_and_no_other_checksum(local_stack, bucket):
    """A multipart segment, a single-PUT segment and a JSON object (a descriptor's way):
    each request sends ``Content-MD5``, which S3 checks, and none the CRC32 botocore
    computes by default beside it (a third of an upload call's CPU, guarding nothing
    the MD5 does not)."""
    part = 5 * 1024**2
    store = local_stack.store(SOURCE, bucket, part_size=part)
    sent: list[tuple[str, dict[str, str]]] = []

    def record(request, event_name, **_):
        sent.append((event_name.split(".")[-1], {k.lower(): v for k, v in request.headers.items()}))

    for operation in ("PutObject", "UploadPart"):
        store.client.meta.events.register(f"before-send.s3.{operation}", record)
    store.write_segment(SegmentKey(SOURCE, "md5", 0, 0, 0, 2999), incompressible(3000))
    store.write_segment(SegmentKey(SOURCE, "md5", 0, 0, 3000, 3009), plain(10, start=3000))
    store.put_json("md5/descriptor.json", {"partitions": 1})
    operations = [operation for operation, _ in sent]
    assert operations.count("UploadPart") >= 2 and operations.count("PutObject") == 2, operations
    for operation, headers in sent:
        assert "content-md5" in headers, (operation, headers)
        assert not [h for h in headers if h.startswith("x-amz-checksum")], (operation, headers)
        assert "x-amz-sdk-checksum-algorithm" not in headers, (operation, headers)


def test_failed_write_leaves_no_object_and_no_pending_upload(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket, part_size=5 * 1024**2)
    key = SegmentKey(SOURCE, "t", 0, 0, 0, 99_999)
    with (
        pytest.raises(RuntimeError, match="writer crashed"),
        store.writer(key, row_group_bytes=1024**2) as writer,
    ):
        for start in range(0, 8000, 1000):  # enough for a multipart upload to begin
            writer.write(
                plain(1000, start=start, value_size=1000).set_column(
                    4, SCHEMA.field("value"), pa.array([os.urandom(1000) for _ in range(1000)])
                )
            )
        raise RuntimeError("writer crashed")
    assert store.list_segments(SOURCE, "t", 0) == []
    assert local_stack.s3().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_storage_class_and_encryption_are_applied_to_every_write(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket, storage_class="STANDARD_IA", sse="SSE-S3")
    stored = store.write_segment(SegmentKey(SOURCE, "t", 0, 0, 0, 9), plain(10))
    head = local_stack.s3().head_object(Bucket=bucket, Key=stored.s3_key)
    assert head["StorageClass"] == "STANDARD_IA"
    assert head["ServerSideEncryption"] == "AES256"
    override = store.write_segment(
        SegmentKey(SOURCE, "t", 0, 1, 0, 9), plain(10), storage_class="GLACIER_IR"
    )
    assert (
        local_stack.s3().head_object(Bucket=bucket, Key=override.s3_key)["StorageClass"]
        == "GLACIER_IR"
    )


def test_kms_encryption_names_the_key(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket, sse="SSE-KMS", sse_kms_key_id="alias/replicator")
    stored = store.write_segment(SegmentKey(SOURCE, "t", 0, 0, 0, 9), plain(10))
    head = local_stack.s3().head_object(Bucket=bucket, Key=stored.s3_key)
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"].endswith("alias/replicator")


def test_listing_skips_foreign_keys_and_warns_once(local_stack, bucket, caplog):
    store = local_stack.store(SOURCE, bucket)
    store.write_segment(SegmentKey(SOURCE, "t", 0, 0, 0, 9), plain(10))
    local_stack.s3().put_object(Bucket=bucket, Key="data/us-east-1/t/0/0/upload.tmp", Body=b"x")
    with caplog.at_level(logging.WARNING, logger="replicator.core.segments.store"):
        assert len(store.list_segments(SOURCE, "t", 0)) == 1
        assert len(store.list_segments(SOURCE, "t", 0)) == 1
    warnings = [r for r in caplog.records if "upload.tmp" in r.getMessage()]
    assert len(warnings) == 1


def test_rewriting_a_key_replaces_the_segment(local_stack, bucket):
    # A replayed batch rewrites the same key; readers see one whole version or the other.
    store = local_stack.store(SOURCE, bucket)
    key = SegmentKey(SOURCE, "t", 0, 0, 0, 9)
    store.write_segment(key, plain(10, value_size=8))
    store.write_segment(key, plain(10, value_size=16))
    assert len(store.list_segments(SOURCE, "t", 0)) == 1
    assert len(store.read_segment(key).column("value")[0].as_py()) == 16


def test_garbage_at_a_segment_key_is_reported_with_the_key(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket)
    key = SegmentKey(SOURCE, "t", 0, 0, 0, 9)
    local_stack.s3().put_object(
        Bucket=bucket, Key=key.to_s3_key("data"), Body=b"not parquet at all"
    )
    with pytest.raises(CorruptSegmentError, match=f"s3://{bucket}/{key.to_s3_key('data')}"):
        store.open(store.list_segments(SOURCE, "t", 0)[0])


def test_truncated_object_is_reported_with_the_key(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket)
    key = SegmentKey(SOURCE, "t", 0, 0, 0, 99)
    stored = store.write_segment(key, plain(100))
    body = local_stack.s3().get_object(Bucket=bucket, Key=stored.s3_key)["Body"].read()
    local_stack.s3().put_object(Bucket=bucket, Key=stored.s3_key, Body=body[: len(body) // 2])
    with pytest.raises(CorruptSegmentError, match=stored.s3_key):
        store.read_segment(key)


def test_deleted_segments_disappear_from_listings(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket)
    keys = [SegmentKey(SOURCE, "t", 0, 0, s, s + 9) for s in range(0, 50, 10)]
    for key in keys:
        store.write_segment(key, plain(10, start=key.start))
    assert store.delete_segments(keys[:3]) == 3
    assert [s.segment_key for s in store.list_segments(SOURCE, "t", 0)] == keys[3:]
    with pytest.raises(ObjectNotFoundError):
        store.read_segment(keys[0])


def test_missing_bucket_is_an_error_naming_the_bucket(local_stack, unique):
    store = local_stack.store(SOURCE, unique("missing"))
    with pytest.raises(StorageError, match="bucket does not exist"):
        store.list_segments(SOURCE, "t", 0)
    with pytest.raises(StorageError, match=r"s3://missing-"):
        store.write_segment(SegmentKey(SOURCE, "t", 0, 0, 0, 9), plain(10))


def test_a_json_object_over_the_cap_is_refused_before_it_is_read(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket)
    store.put_json("data/r/t/_topic.json", {"partitions": 1, "pad": "x" * 2000})
    assert store.get_json("data/r/t/_topic.json")["partitions"] == 1
    with pytest.raises(StorageError, match=r"data/r/t/_topic\.json.*over the 1000 allowed"):
        store.get_json("data/r/t/_topic.json", max_bytes=1000)


def test_partition_directories_count_only_in_ascii_digits(local_stack, bucket, caplog):
    """A directory named with a digit int() refuses ('²') or reads as another partition
    ('\u0661\u0660' is 10, '01' is 1) is not a partition: skipped with one warning, never a crash
    and never a partition count raised by a name."""
    store = local_stack.store(SOURCE, bucket)
    store.write_segment(SegmentKey(SOURCE, "t", 0, 0, 0, 9), plain(10))
    for name in ("²", "\u0661\u0660", "01", "-1", "_groups"):
        local_stack.s3().put_object(Bucket=bucket, Key=f"data/{SOURCE}/t/{name}/x", Body=b"x")
    with caplog.at_level(logging.WARNING):
        assert store.list_partitions(SOURCE, "t") == [0]
        assert store.list_partitions(SOURCE, "t") == [0]
    warned = [r.getMessage() for r in caplog.records if "not a partition" in r.getMessage()]
    assert len(warned) == 4, warned  # once each; _groups is the replicator's own
