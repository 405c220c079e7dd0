"""Segments in one region's bucket: streaming writes, verified reads, listings, deletes.

Writes stream row groups straight to the final S3 key with a multipart upload
(:mod:`replicator.core.aws.s3_streams`): the object appears only when the upload
completes, so readers never see a partial segment, and there is no temp-key copy
(single-request copies fail above 5 GB). Memory per writer is one row group plus one
upload part. Rewriting a key (a replayed batch, a rerun merge) replaces the object
atomically.

Reads fetch byte ranges on demand, so a reader holds one row group at a time whatever the
segment's size, and every row group is verified before use.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from replicator.core.aws.clients import lookup_s3_client, s3_client, s3_errors
from replicator.core.aws.errors import StorageError
from replicator.core.aws.s3_streams import (
    S3MultipartWriter,
    S3RangedReader,
    UploadedObject,
    content_md5,
    upload_stream,
)
from replicator.core.config import Config, S3Config
from replicator.core.decimal_text import parse_decimal
from replicator.core.errors import ConfigError
from replicator.core.segments.descriptor import read_descriptor
from replicator.core.segments.errors import DescriptorError, SegmentKeyError, SegmentMismatchError
from replicator.core.segments.format import (
    DEFAULT_ROW_GROUP_BYTES,
    SegmentFooter,
    SegmentReader,
    SegmentWriter,
)
from replicator.core.segments.key import (
    MAX_PARTITION,
    SegmentKey,
    partition_s3_prefix,
    topic_s3_prefix,
)
from replicator.core.segments.selection import exported_end
from replicator.core.segments.signing import (
    UNSIGNED,
    SigningKeys,
    ed25519_private_key,
    ed25519_public_key,
)
from replicator.core.untrusted_json import json_object
from replicator.core.untrusted_text import escape

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ListObjectsV2OutputTypeDef

log = logging.getLogger(__name__)


MAX_JSON_BYTES = 16 * 1024**2
"""The largest JSON object the replicator reads from a bucket (descriptors, offsets)."""


def signing_keys(s3: S3Config) -> SigningKeys:
    """The deployment's signing keys: HMAC (``[s3] signing_key``, ``verify_keys``) or
    Ed25519 (``signing_public_keys``, and ``signing_private_key`` where this process has
    its variable: the writers). A reader of an Ed25519 deployment is not given the
    private key and holds only the public ones."""
    if s3.signing_key is not None:
        return SigningKeys(
            s3.signing_key.get_secret_value().encode(),
            tuple(k.get_secret_value().encode() for k in s3.verify_keys),
        )
    if not s3.signing_public_keys:
        return UNSIGNED
    public = tuple(ed25519_public_key(k) for k in s3.signing_public_keys)
    if s3.signing_private_key is None:
        return SigningKeys(public_keys=public)
    try:
        private = ed25519_private_key(s3.signing_private_key.get_secret_value())
    except ConfigError as exc:  # the variable is not set here: a reader
        return SigningKeys(public_keys=public, no_private_key=str(exc))
    return SigningKeys(private_key=private, public_keys=public)


@dataclass(frozen=True)
class StoredSegment:
    """A segment as listed in the bucket."""

    segment_key: SegmentKey
    s3_key: str
    size: int
    last_modified: datetime | None = None
    etag: str | None = None
    storage_class: str | None = None
    """As listed (S3 omits it for STANDARD on some endpoints: None means STANDARD)."""
    encryption: str | None = None
    """The server-side encryption S3 reports for the object (``stat`` only): the bucket's
    default may encrypt with KMS whatever the store's own setting."""

    @property
    def etag_is_md5(self) -> bool:
        """Whether S3's ETag of this object derives from the MD5 of its bytes: not for
        objects encrypted with KMS (``aws:kms``, ``aws:kms:dsse``)."""
        return not (self.encryption or "").startswith("aws:kms")


class SpooledSegment:
    """A segment whose end offset is decided when it closes.

    Row groups are spooled (in memory up to one upload part, then in a temporary file) and
    uploaded to the final key by :meth:`close`, once the key is known. Memory stays bounded
    by one row group plus one part; the object appears at its key only when complete.
    """

    def __init__(
        self,
        store: SegmentStore,
        key: SegmentKey,
        *,
        storage_class: str | None = None,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    ) -> None:
        self._store = store
        self._storage_class = storage_class
        self._spool = tempfile.SpooledTemporaryFile(max_size=store.part_size)  # noqa: SIM115
        self.writer = SegmentWriter(
            self._spool, key, row_group_bytes=row_group_bytes, keys=store.keys, prefix=store.prefix
        )

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.writer.write(batch)

    def close(self, end: int | None = None) -> tuple[StoredSegment, SegmentFooter]:
        """Finish the file with covered end ``end`` and upload it; returns what was stored."""
        try:
            footer = self.writer.close(end)
            key = self.writer.segment_key
            s3_key = key.to_s3_key(self._store.prefix)
            self._spool.seek(0)
            size = upload_stream(self._spool, self._store.sink(s3_key, self._storage_class)).size
        finally:
            self._spool.close()
        return StoredSegment(key, s3_key, size), footer

    def abort(self) -> None:
        self._spool.close()


class SegmentUpload:
    """A segment being written by :meth:`SegmentStore.writer`: rows go to ``segment``;
    ``footer`` and ``uploaded`` are set once the block exits cleanly."""

    def __init__(self, segment: SegmentWriter) -> None:
        self.segment = segment
        self.footer: SegmentFooter | None = None
        self.uploaded: UploadedObject | None = None

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.segment.write(batch)


class SegmentStore:
    """Segments under ``prefix`` in one bucket. Create one per process or task."""

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        prefix: str,
        *,
        storage_class: str | None = None,
        sse: str = "none",
        sse_kms_key_id: str | None = None,
        part_size: int = 16 * 1024**2,
        keys: SigningKeys = UNSIGNED,
    ) -> None:
        """``keys``: segments written are signed, and segments read must be, when it
        holds a signing key (``[s3] signing_key``)."""
        self.client = client
        self.keys = keys
        self._generations: dict[tuple[str, str], str | None] = {}
        """The topic id each (region, topic)'s signed descriptor names, once read."""
        self.bucket = bucket
        self.prefix = prefix
        self.storage_class = storage_class
        self.part_size = part_size
        self._sse: dict[str, str] = {}
        if sse == "SSE-S3":
            self._sse["ServerSideEncryption"] = "AES256"
        elif sse == "SSE-KMS":
            self._sse["ServerSideEncryption"] = "aws:kms"
            if sse_kms_key_id:
                self._sse["SSEKMSKeyId"] = sse_kms_key_id
        self._warned: set[str] = set()

    @classmethod
    def for_region(cls, config: Config, region: str, *, lookup: bool = False) -> SegmentStore:
        """The store of ``region``'s bucket with the deployment's S3 settings. ``lookup``:
        its requests give up after a few seconds (reports that must answer in an outage)
        instead of retrying as a service does."""
        s3 = config.s3
        return cls(
            lookup_s3_client(config, region) if lookup else s3_client(config, region),
            config.bucket(region),
            s3.prefix,
            storage_class=s3.storage_class,
            sse=s3.sse,
            sse_kms_key_id=s3.sse_kms_key_id,
            part_size=s3.multipart_part_size,
            keys=signing_keys(s3),
        )

    # -- writing --------------------------------------------------------------------------

    def _write_args(self, storage_class: str | None) -> dict[str, str]:
        args = dict(self._sse)
        chosen = storage_class or self.storage_class
        if chosen:
            args["StorageClass"] = chosen
        return args

    def sink(self, s3_key: str, storage_class: str | None = None) -> S3MultipartWriter:
        """A multipart upload to ``s3_key`` with the store's storage class and encryption."""
        return S3MultipartWriter(
            self.client, self.bucket, s3_key, self.part_size, self._write_args(storage_class)
        )

    def spooled(
        self,
        key: SegmentKey,
        *,
        storage_class: str | None = None,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
        topic_id: str | None = None,
    ) -> SpooledSegment:
        """A segment covering at most ``key``'s range whose end is chosen at close;
        ``topic_id``: the generation its records come from (its footer names it)."""
        segment = SpooledSegment(
            self, key, storage_class=storage_class, row_group_bytes=row_group_bytes
        )
        segment.writer.topic_id = topic_id
        return segment

    @contextmanager
    def writer(
        self,
        key: SegmentKey,
        *,
        storage_class: str | None = None,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
        topic_id: str | None = None,
    ) -> Iterator[SegmentUpload]:
        """Open a segment for writing; it becomes visible when the block exits cleanly,
        and the upload then says what was sent (to check against what S3 holds).

        On an exception the upload is aborted and nothing appears at the key (an earlier
        object at the same key, if any, stays as it was).
        """
        sink = self.sink(key.to_s3_key(self.prefix), storage_class)
        try:
            upload = SegmentUpload(
                SegmentWriter(
                    sink, key, row_group_bytes=row_group_bytes, keys=self.keys, prefix=self.prefix
                )
            )
            upload.segment.topic_id = topic_id
            yield upload
            upload.footer = upload.segment.close()
            upload.uploaded = sink.complete()
        except BaseException:
            sink.abort()
            raise

    @property
    def etags_are_md5(self) -> bool:
        """Whether S3 gives this store's objects MD5 ETags (not under SSE-KMS)."""
        return self._sse.get("ServerSideEncryption") != "aws:kms"

    def write_segment(
        self,
        key: SegmentKey,
        data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch],
        *,
        storage_class: str | None = None,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
        topic_id: str | None = None,
    ) -> StoredSegment:
        """Write a whole segment and return it as listed."""
        with self.writer(
            key, storage_class=storage_class, row_group_bytes=row_group_bytes, topic_id=topic_id
        ) as w:
            if isinstance(data, (pa.Table, pa.RecordBatch)):
                w.write(data)
            else:
                for batch in data:
                    w.write(batch)
        return self.stat(key)

    # -- reading --------------------------------------------------------------------------

    def stat(self, key: SegmentKey) -> StoredSegment:
        s3_key = key.to_s3_key(self.prefix)
        with s3_errors("head", self.bucket, s3_key):
            head = self.client.head_object(Bucket=self.bucket, Key=s3_key)
        return StoredSegment(
            key,
            s3_key,
            head["ContentLength"],
            head.get("LastModified"),
            head.get("ETag"),
            encryption=head.get("ServerSideEncryption"),
        )

    def open(self, segment: StoredSegment | SegmentKey) -> SegmentReader:
        """A verified reader; raises CorruptSegmentError / SegmentMismatchError naming the key.

        Where the deployment signs, the segment must also be of the topic generation its
        signed descriptor names (:meth:`_check_generation`)."""
        stored = segment if isinstance(segment, StoredSegment) else self.stat(segment)
        if stored.etag is None:
            stored = self.stat(stored.segment_key)
        assert stored.etag is not None, "S3 returns an ETag for every object"
        source = S3RangedReader(self.client, self.bucket, stored.s3_key, stored.size, stored.etag)
        buffered = io.BufferedReader(source, buffer_size=1024 * 1024)
        reader = SegmentReader(
            buffered,
            stored.segment_key,
            f"s3://{self.bucket}/{stored.s3_key}",
            self.keys,
            self.prefix,
        )
        if self.keys.required:
            self._check_generation(reader)
        return reader

    def _check_generation(self, reader: SegmentReader) -> None:
        """Refuse a signed segment of another generation of its topic than the one its
        topic descriptor (signed, read once per topic, again when a segment disagrees:
        the topic may have been exported anew since) names.

        Why here: every reader (ingress, restore, compaction) opens segments through the
        store, and a signature alone does not tell generations apart (a deleted and
        re-created topic's old segments, kept as noncurrent versions, are validly signed).

        Where no descriptor is there yet (bucket replication keeps no order) or it names
        no topic id (the source broker reports none), nothing is compared: there is no
        trusted id to compare with, and refusing would halt partitions that are fine."""
        key = reader.segment_key
        found = reader.footer.topic_id
        expected = self._generation(reader.name, key.region, key.topic, refresh=False)
        if expected is not None and found != expected:
            expected = self._generation(reader.name, key.region, key.topic, refresh=True)
        if expected is not None and found != expected:
            raise SegmentMismatchError(
                reader.name,
                f"of topic id {found or '(none)'}, but its topic descriptor names topic id "
                f"{expected}: a segment of another generation of the topic (deleted and "
                "created again)",
            )

    def _generation(self, name: str, region: str, topic: str, *, refresh: bool) -> str | None:
        if refresh or (region, topic) not in self._generations:
            try:
                descriptor = read_descriptor(self, region, topic)
            except DescriptorError as exc:
                raise SegmentMismatchError(
                    name, f"its topic generation cannot be checked: {exc}"
                ) from None
            if descriptor is None:
                return None  # read again at the next open, until it arrives
            self._generations[(region, topic)] = descriptor.topic_id
        return self._generations[(region, topic)]

    def read_segment(self, segment: StoredSegment | SegmentKey) -> pa.Table:
        return self.open(segment).read_all()

    def footer(self, segment: StoredSegment | SegmentKey) -> SegmentFooter:
        return self.open(segment).footer

    # -- listing --------------------------------------------------------------------------

    def _list(
        self, prefix: str, delimiter: str | None = None
    ) -> Iterator[ListObjectsV2OutputTypeDef]:
        paginator = self.client.get_paginator("list_objects_v2")
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        with s3_errors("list", self.bucket, prefix):
            yield from paginator.paginate(**kwargs)

    def list_segments(self, region: str, topic: str, partition: int) -> list[StoredSegment]:
        """One partition's segments at every level, ordered by (start, level, end).

        Keys under the partition that are not segment keys are skipped and logged once.
        """
        found: list[StoredSegment] = []
        for page in self._list(partition_s3_prefix(self.prefix, region, topic, partition)):
            for item in page.get("Contents", []):
                s3_key = item["Key"]
                try:
                    key = SegmentKey.from_s3_key(s3_key, self.prefix)
                except SegmentKeyError as exc:
                    if s3_key not in self._warned:
                        self._warned.add(s3_key)
                        log.warning("ignoring object that is not a segment: %s", exc)
                    continue
                found.append(
                    StoredSegment(
                        key,
                        s3_key,
                        item["Size"],
                        item.get("LastModified"),
                        item.get("ETag"),
                        item.get("StorageClass"),
                    )
                )
        found.sort(key=lambda s: (s.segment_key.start, s.segment_key.level, s.segment_key.end))
        return found

    def exported_end(self, region: str, topic: str, partition: int) -> int | None:
        """The offset after the last one any segment of the partition covers (None:
        no segment), at any level: where export continues."""
        return exported_end(s.segment_key for s in self.list_segments(region, topic, partition))

    def list_partitions(self, region: str, topic: str) -> list[int]:
        head = topic_s3_prefix(self.prefix, region, topic)
        partitions = []
        for page in self._list(head, delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                name = common["Prefix"][len(head) :].rstrip("/")
                partition = parse_decimal(name, maximum=MAX_PARTITION)
                if partition is not None:
                    partitions.append(partition)
                elif not name.startswith("_") and common["Prefix"] not in self._warned:
                    # _groups, _group_history: the replicator's own directories
                    self._warned.add(common["Prefix"])
                    log.warning(
                        "ignoring directory %s: not a partition number", escape(common["Prefix"])
                    )
        return sorted(partitions)

    def list_regions(self) -> list[str]:
        """Source regions with data in this bucket (a destination bucket holds others')."""
        head = f"{self.prefix}/" if self.prefix else ""
        regions = []
        for page in self._list(head, delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                regions.append(common["Prefix"][len(head) :].rstrip("/"))
        return sorted(regions)

    def list_objects(self, s3_prefix: str) -> list[tuple[str, int]]:
        """(S3 object key, size) of every object under ``s3_prefix``, in key order."""
        return [
            (item["Key"], item["Size"])
            for page in self._list(s3_prefix)
            for item in page.get("Contents", [])
        ]

    def is_restored(self, s3_key: str) -> bool:
        """Whether an archived (GLACIER, DEEP_ARCHIVE) object has a readable restored
        copy (an S3 restore request completed)."""
        with s3_errors("head", self.bucket, s3_key):
            head = self.client.head_object(Bucket=self.bucket, Key=s3_key)
        return 'ongoing-request="false"' in str(head.get("Restore", ""))

    def list_topics(self, region: str) -> list[str]:
        head = f"{self.prefix}/{region}/" if self.prefix else f"{region}/"
        topics = []
        for page in self._list(head, delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                topics.append(common["Prefix"][len(head) :].rstrip("/"))
        return sorted(topics)

    # -- deleting and small objects -------------------------------------------------------

    def delete_segments(self, keys: Iterable[SegmentKey]) -> int:
        """Delete segments in batches; raises StorageError naming any key S3 refused."""
        s3_keys = [k.to_s3_key(self.prefix) for k in keys]
        for i in range(0, len(s3_keys), 1000):
            chunk = s3_keys[i : i + 1000]
            with s3_errors("delete", self.bucket, chunk[0]):
                response = self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
                )
            errors = response.get("Errors", [])
            if errors:
                first = errors[0]
                raise StorageError(
                    "delete",
                    self.bucket,
                    first.get("Key"),
                    f"{first.get('Code')}: {first.get('Message')} ({len(errors)} keys failed)",
                )
        return len(s3_keys)

    def put_json(self, s3_key: str, data: Any) -> None:
        body = json.dumps(data, indent=2, sort_keys=True).encode()
        with s3_errors("put", self.bucket, s3_key):
            self.client.put_object(
                Bucket=self.bucket,
                Key=s3_key,
                Body=body,
                ContentMD5=content_md5(hashlib.md5(body, usedforsecurity=False).digest()),
                ContentType="application/json",
                **self._sse,  # type: ignore[arg-type]
            )

    def get_json(self, s3_key: str, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
        """A small JSON object (descriptor, group offsets). One larger than ``max_bytes``
        is refused before it is read: a damaged or hostile object must not exhaust
        memory. Parsed with :func:`~replicator.core.untrusted_json.json_object`: anyone
        who can write to the bucket writes these, so one nested too deep, not JSON or no
        object is a :class:`StorageError` (operation ``parse``) naming the object, never a
        ``RecursionError`` that no caller expects."""
        with s3_errors("get", self.bucket, s3_key):
            response = self.client.get_object(Bucket=self.bucket, Key=s3_key)
            size = int(response.get("ContentLength", 0))
            if size > max_bytes:
                response["Body"].close()
                raise StorageError(
                    "size", self.bucket, s3_key, f"{size} bytes, over the {max_bytes} allowed"
                )
            body = response["Body"].read(max_bytes + 1)
        try:
            return json_object(body, max_bytes)
        except ValueError as exc:
            raise StorageError("parse", self.bucket, s3_key, f"unusable JSON: {exc}") from None
