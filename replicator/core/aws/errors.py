"""Errors of S3 and SQS operations."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class StorageError(ReplicatorError):
    """An S3 operation failed (missing bucket, access denied, endpoint unreachable)."""

    def __init__(self, operation: str, bucket: str, s3_key: str | None, reason: str) -> None:
        self.operation = operation
        self.bucket = bucket
        self.s3_key = s3_key
        where = f"s3://{bucket}/{s3_key}" if s3_key else f"s3://{bucket}"
        super().__init__(f"{operation} {where} failed: {reason}")


class ObjectNotFoundError(StorageError):
    """The object (or bucket) does not exist: e.g. a segment deleted by compaction."""
