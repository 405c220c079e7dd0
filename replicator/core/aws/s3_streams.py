"""Streams over one S3 object: a multipart writer and a ranged, ETag-pinned reader.

Both are plain ``io.RawIOBase`` streams, so Parquet writers and readers (or anything else
that takes a file) use them directly; nothing here knows about segments.

The writer sends each part's MD5 (``Content-MD5``: S3 refuses a part damaged on the way)
and knows, once complete, the ETag S3 gives an object holding exactly the bytes written:
the hex MD5 of the body for a single PUT, the MD5 of the parts' MD5s and ``-<parts>`` for
a multipart upload. Comparing it with the stored object's ETag proves S3 holds those bytes
without reading them back — except under SSE-KMS, whose ETags are no MD5 of the content.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replicator.core.aws.clients import s3_errors
from replicator.core.faults import S3_MID_MULTIPART_UPLOAD, crash_point

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadedObject:
    """What a completed upload wrote."""

    size: int
    md5_etag: str
    """The ETag (without quotes) S3 gives an object of exactly these bytes, uploaded in
    these parts (see the module docstring)."""


def etag_matches(stored_etag: str | None, uploaded: UploadedObject) -> bool:
    """Whether an object's ETag (as S3 reports it, quoted or not) is the uploaded bytes'."""
    return stored_etag is not None and stored_etag.strip('"') == uploaded.md5_etag


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
        self._part_digests: list[bytes] = []
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
            digest = hashlib.md5(body, usedforsecurity=False).digest()
            part = self._client.upload_part(
                Bucket=self._bucket,
                Key=self._key,
                UploadId=self._upload_id,
                PartNumber=number,
                Body=body,
                ContentMD5=base64.b64encode(digest).decode(),
            )
        self._parts.append({"PartNumber": number, "ETag": part["ETag"]})
        self._part_digests.append(digest)
        crash_point(S3_MID_MULTIPART_UPLOAD)

    def complete(self) -> UploadedObject:
        """Make the object visible; returns what it holds."""
        if self._upload_id is None:
            body = bytes(self._buffer)
            digest = hashlib.md5(body, usedforsecurity=False).digest()
            with s3_errors("put", self._bucket, self._key):
                self._client.put_object(
                    Bucket=self._bucket,
                    Key=self._key,
                    Body=body,
                    ContentMD5=base64.b64encode(digest).decode(),
                    **self._extra,  # type: ignore[arg-type]
                )
            etag = digest.hex()
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
            combined = hashlib.md5(b"".join(self._part_digests), usedforsecurity=False)
            etag = f"{combined.hexdigest()}-{len(self._part_digests)}"
        self._buffer = bytearray()
        return UploadedObject(self._written, etag)

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
