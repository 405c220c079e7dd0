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
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replicator.core.aws.clients import s3_errors
from replicator.core.faults import S3_MID_MULTIPART_UPLOAD, crash_point

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)

PARTS_IN_FLIGHT = 4
"""Parts of one object uploaded at once (see :class:`S3MultipartWriter`)."""


def content_md5(digest: bytes) -> str:
    """The ``Content-MD5`` header of a body whose MD5 is ``digest``. Every upload of the
    project carries one: S3 refuses a body damaged on the way, and the S3 clients
    compute no other checksum (``request_checksum_calculation``, clients.py)."""
    return base64.b64encode(digest).decode()


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

    Up to ``parts_in_flight`` parts are uploaded at once, in background threads, while the
    writer goes on filling the next: a part's upload no longer stops the encoding (egress
    and compaction waited for each in turn), and several connections carry one object, as
    S3 recommends for large ones. Memory: at most ``parts_in_flight`` parts on their way
    plus the one filling. A failed part fails the next :meth:`write` or :meth:`complete`.
    """

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        key: str,
        part_size: int,
        extra_args: dict[str, str],
        *,
        parts_in_flight: int = PARTS_IN_FLIGHT,
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
        self._parts_in_flight = max(1, parts_in_flight)
        self._sending: deque[Future[tuple[dict[str, Any], bytes]]] = deque()
        """Parts on their way, oldest first (their numbers follow ``self._parts``)."""
        self._pool: ThreadPoolExecutor | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        """Buffer ``data``, sending each part as it fills.

        Each byte is copied once on its way to a part (the part must not change while it
        is sent, so the caller's buffer is not sent), and not at all when ``data`` is an
        immutable ``bytes`` of exactly one part written at a part's boundary — what a
        spooled segment read back a part at a time is (:func:`upload_stream`). Before,
        every byte was copied three times (into the buffer, a slice of it, ``bytes`` of
        the slice). After an exception the upload is to be aborted, not written on."""
        view = memoryview(data).cast("B")
        size = len(view)
        self._written += size
        start = 0
        if not self._buffer:
            as_is = isinstance(data, bytes) and size == self._part_size
            while size - start >= self._part_size:
                self._upload_part(data if as_is else bytes(view[start : start + self._part_size]))
                start += self._part_size
        self._buffer += view[start:]
        while len(self._buffer) >= self._part_size:
            with memoryview(self._buffer) as buffered:
                part = bytes(buffered[: self._part_size])
            self._upload_part(part)
            del self._buffer[: self._part_size]
        return size

    def tell(self) -> int:
        return self._written

    @property
    def part_size(self) -> int:
        return self._part_size

    def _upload_part(self, body: bytes) -> None:
        """Send ``body`` as the next part, once fewer than ``parts_in_flight`` are on
        their way (waiting for the oldest, which raises if it failed)."""
        if self._upload_id is None:
            with s3_errors("multipart upload", self._bucket, self._key):
                response = self._client.create_multipart_upload(
                    Bucket=self._bucket,
                    Key=self._key,
                    **self._extra,  # type: ignore[arg-type]
                )
            self._upload_id = response["UploadId"]
            self._pool = ThreadPoolExecutor(self._parts_in_flight, thread_name_prefix="s3-part")
        while len(self._sending) >= self._parts_in_flight:
            self._receive_oldest()
        assert self._pool is not None
        number = len(self._parts) + len(self._sending) + 1
        self._sending.append(self._pool.submit(self._send_part, self._upload_id, number, body))

    def _send_part(self, upload_id: str, number: int, body: bytes) -> tuple[dict[str, Any], bytes]:
        """One part (in a sending thread), with its MD5 for S3 to check."""
        digest = hashlib.md5(body, usedforsecurity=False).digest()
        with s3_errors("multipart upload", self._bucket, self._key):
            part = self._client.upload_part(
                Bucket=self._bucket,
                Key=self._key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                ContentMD5=content_md5(digest),
            )
        crash_point(S3_MID_MULTIPART_UPLOAD)
        return {"PartNumber": number, "ETag": part["ETag"]}, digest

    def _receive_oldest(self) -> None:
        part, digest = self._sending.popleft().result()
        self._parts.append(part)
        self._part_digests.append(digest)

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
                    ContentMD5=content_md5(digest),
                    **self._extra,  # type: ignore[arg-type]
                )
            etag = digest.hex()
        else:
            if self._buffer:
                self._upload_part(bytes(self._buffer))
            while self._sending:
                self._receive_oldest()
            self._stop_sending()
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
        self._stop_sending()
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

    def _stop_sending(self) -> None:
        """Wait for the parts still on their way (an abort must come after them, or S3
        may keep a part that arrives later) and end the sending threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._sending.clear()


def upload_stream(stream: io.BufferedIOBase | Any, sink: S3MultipartWriter) -> UploadedObject:
    """Upload what ``stream`` holds from its position to ``sink`` and complete it: read a
    part at a time, so each part is sent as read (no copy in the writer); a failure
    aborts the upload (nothing appears at the key) and is raised."""
    try:
        while part := stream.read(sink.part_size):
            sink.write(part)
        return sink.complete()
    except BaseException:
        sink.abort()
        raise


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
