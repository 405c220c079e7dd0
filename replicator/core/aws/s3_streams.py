"""Streams over one S3 object: a multipart writer and a ranged, ETag-pinned reader.

Both are plain ``io.RawIOBase`` streams, so Parquet writers and readers (or anything else
that takes a file) use them directly; nothing here knows about segments.
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING, Any

from replicator.core.aws.clients import s3_errors
from replicator.core.faults import S3_MID_MULTIPART_UPLOAD, crash_point

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)


class S3MultipartWriter(io.RawIOBase):
    """A write-only stream that uploads ``part_size`` parts as it fills.

    Nothing is visible at ``key`` until :meth:`complete`; :meth:`abort` discards the
    parts. A stream that never fills one part is sent as a single PUT at completion.
    """

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        key: str,
        part_size: int,
        extra_args: dict[str, str],
    ) -> None:
        super().__init__()
        self._client = client
        self._bucket = bucket
        self._key = key
        self._part_size = part_size
        self._extra = extra_args
        self._buffer = bytearray()
        self._parts: list[dict[str, Any]] = []
        self._upload_id: str | None = None
        self._written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._buffer += view
        self._written += len(view)
        while len(self._buffer) >= self._part_size:
            self._upload_part(bytes(self._buffer[: self._part_size]))
            del self._buffer[: self._part_size]
        return len(view)

    def tell(self) -> int:
        return self._written

    def _upload_part(self, body: bytes) -> None:
        with s3_errors("multipart upload", self._bucket, self._key):
            if self._upload_id is None:
                response = self._client.create_multipart_upload(
                    Bucket=self._bucket,
                    Key=self._key,
                    **self._extra,  # type: ignore[arg-type]
                )
                self._upload_id = response["UploadId"]
            number = len(self._parts) + 1
            part = self._client.upload_part(
                Bucket=self._bucket,
                Key=self._key,
                UploadId=self._upload_id,
                PartNumber=number,
                Body=body,
            )
        self._parts.append({"PartNumber": number, "ETag": part["ETag"]})
        crash_point(S3_MID_MULTIPART_UPLOAD)

    def complete(self) -> int:
        """Make the object visible; returns its size in bytes."""
        if self._upload_id is None:
            with s3_errors("put", self._bucket, self._key):
                self._client.put_object(
                    Bucket=self._bucket,
                    Key=self._key,
                    Body=bytes(self._buffer),
                    **self._extra,  # type: ignore[arg-type]
                )
        else:
            if self._buffer:
                self._upload_part(bytes(self._buffer))
            with s3_errors("complete multipart upload", self._bucket, self._key):
                self._client.complete_multipart_upload(
                    Bucket=self._bucket,
                    Key=self._key,
                    UploadId=self._upload_id,
                    MultipartUpload={"Parts": self._parts},  # type: ignore[typeddict-item]
                )
        self._buffer = bytearray()
        return self._written

    def abort(self) -> None:
        """Discard uploaded parts; the bucket's lifecycle rule is the backstop if this fails."""
        self._buffer = bytearray()
        if self._upload_id is None:
            return
        try:
            self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=self._key, UploadId=self._upload_id
            )
        except Exception as exc:  # the original failure matters more; the lifecycle rule cleans up
            log.warning(
                "could not abort multipart upload of s3://%s/%s: %s", self._bucket, self._key, exc
            )


class S3RangedReader(io.RawIOBase):
    """A read-only, seekable view of one S3 object that fetches byte ranges on demand.

    Pinned to the ETag seen at open: if the object is replaced mid-read, reads fail
    instead of mixing two versions.
    """

    def __init__(self, client: S3Client, bucket: str, key: str, size: int, etag: str) -> None:
        super().__init__()
        self._client = client
        self._bucket = bucket
        self._key = key
        self._size = size
        self._etag = etag
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        end = min(self._size, self._pos + len(view))
        if end <= self._pos:
            return 0
        with s3_errors("get", self._bucket, self._key):
            body = self._client.get_object(
                Bucket=self._bucket,
                Key=self._key,
                Range=f"bytes={self._pos}-{end - 1}",
                IfMatch=self._etag,
            )["Body"]
            data = body.read()
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)
