"""One merge, as run in a Spark task: stream the inputs into the output, verify it, then
delete the inputs.

Order, for crash safety: write the output (multipart upload, visible only when complete),
verify it, and only then delete the inputs. A crash at any point leaves the records
readable from the inputs, the output, or both — never neither; the output key is
deterministic, so a rerun rewrites the same object, and a later run deletes inputs a
verified output already covers (reading that output back first).

Verifying an output does not read it back where S3 can vouch for it: the writer's footer
must count every record taken from the inputs, and the object S3 holds at the key must
have the size and the MD5 ETag of the bytes uploaded (each part was also sent with its
MD5, which S3 checks on arrival). A damaged, truncated or replaced object fails that. Under
SSE-KMS (the store's setting, or the bucket's default as S3 reports it for the object),
whose ETags are no MD5 of the content, the output is read back instead: footer
against key, every row group's checksum, the record count. Reading back doubled the
merge's reads (the compaction benchmark's whole-run rate was half its baseline's).
Memory is one row group, whatever the segments' sizes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import pyarrow.compute as pc

from compaction.planning import Merge
from replicator.core.aws.s3_streams import etag_matches
from replicator.core.config import Config
from replicator.core.faults import (
    COMPACTION_AFTER_OUTPUT,
    COMPACTION_DURING_DELETES,
    COMPACTION_DURING_MERGE,
    crash_point,
)
from replicator.core.logs import partition_fields
from replicator.core.segments.errors import SegmentMismatchError
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import SegmentStore, SegmentUpload, StoredSegment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeResult:
    output: SegmentKey
    inputs: int
    records: int
    bytes_in: int
    bytes_out: int
    deleted: int
    seconds: float
    failed: str = ""
    """Why the merge was not done (an input is not a usable segment); empty if it was."""


def verify_output(
    store: SegmentStore, stored: StoredSegment, upload: SegmentUpload, expected_records: int
) -> None:
    """The merge's output holds ``expected_records`` and S3 holds exactly what was uploaded
    (see the module docstring); raises :class:`SegmentMismatchError` naming the key."""
    assert upload.footer is not None and upload.uploaded is not None, "a completed upload"
    if upload.footer.record_count != expected_records:
        raise SegmentMismatchError(
            stored.s3_key,
            f"its footer counts {upload.footer.record_count} records, expected "
            f"{expected_records} from its inputs",
        )
    if not (store.etags_are_md5 and stored.etag_is_md5):
        verify(store, stored, expected_records)
        return
    sent = upload.uploaded
    if stored.size != sent.size or not etag_matches(stored.etag, sent):
        raise SegmentMismatchError(
            stored.s3_key,
            f"S3 holds {stored.size} bytes with ETag {stored.etag}, but {sent.size} bytes "
            f"with ETag {sent.md5_etag} were uploaded",
        )


def verify(store: SegmentStore, stored: StoredSegment, expected_records: int) -> None:
    """Read ``stored`` back: footer against key, every row-group checksum, record count."""
    reader = store.open(stored)
    count = sum(t.num_rows for t in reader.iter_tables())
    if count != expected_records or reader.footer.record_count != expected_records:
        raise SegmentMismatchError(
            stored.s3_key,
            f"holds {count} records (footer {reader.footer.record_count}), "
            f"expected {expected_records} from its inputs",
        )


def carry_topic_id(
    upload: SegmentUpload, segment: StoredSegment, topic_id: str | None, *, first: bool
) -> None:
    """The output names the topic generation of its inputs (its signature binds it, see
    :mod:`replicator.core.segments.signing`); inputs of two generations are never merged
    into one: :class:`SegmentMismatchError` naming the input and both ids (the upload is
    aborted, the inputs stay)."""
    if first:
        upload.segment.topic_id = topic_id
    elif upload.segment.topic_id != topic_id:
        raise SegmentMismatchError(
            segment.s3_key,
            f"of topic id {topic_id or '(none)'}, but the merge's earlier inputs are of topic "
            f"id {upload.segment.topic_id or '(none)'}: segments of two generations of the "
            "topic are not merged",
        )


def run_merge(
    config: Config, region: str, merge: Merge, storage_class: str | None, delete: bool
) -> MergeResult:
    started = time.monotonic()
    store = SegmentStore.for_region(config, region)
    records = 0
    next_offset = merge.output.start
    with store.writer(merge.output, storage_class=storage_class) as upload:
        for segment in merge.inputs:
            # An input may start inside the previous one (another split of the same
            # offsets, see planning): only its offsets after the previous input count.
            reader = store.open(segment)
            # A loss at the source recorded by an input stays recorded in the output.
            upload.segment.source_data_loss |= reader.footer.source_data_loss
            carry_topic_id(
                upload, segment, reader.footer.topic_id, first=segment is merge.inputs[0]
            )
            for table in reader.iter_tables():
                offsets = table.column("offset")
                if len(table) and offsets[0].as_py() < next_offset:
                    table = table.filter(pc.greater_equal(offsets, next_offset))
                upload.write(table)
                records += table.num_rows
            next_offset = segment.segment_key.end + 1
            crash_point(COMPACTION_DURING_MERGE)
    crash_point(COMPACTION_AFTER_OUTPUT)
    stored = store.stat(merge.output)
    verify_output(store, stored, upload, records)
    deleted = 0
    if delete:
        for segment in merge.inputs:
            crash_point(COMPACTION_DURING_DELETES)
            deleted += store.delete_segments([segment.segment_key])
    key = merge.output
    log.info(
        "merged %d segments into %s (%d records)",
        len(merge.inputs),
        stored.s3_key,
        records,
        extra=partition_fields(key.region, key.topic, key.partition, start=key.start, end=key.end)
        | {"key": stored.s3_key},
    )
    return MergeResult(
        merge.output,
        len(merge.inputs),
        records,
        merge.input_bytes,
        stored.size,
        deleted,
        time.monotonic() - started,
    )
