"""The replicator's exceptions.

Every error the product raises on purpose derives from :class:`ReplicatorError`, so an
entry point can tell a user error (print one line, exit non-zero) from a bug (traceback).
Subclasses carry the context an operator needs to act: the file and key path, the S3 key,
the topic and partition. Messages never contain secret values.
"""

from __future__ import annotations


class ReplicatorError(Exception):
    """Root of all errors raised deliberately by the replicator."""


class ConfigError(ReplicatorError):
    """The config file is missing, unparseable or invalid.

    ``problems`` holds one ``(key_path, message)`` pair per problem found, so a file with
    several mistakes is reported in one go.
    """

    def __init__(self, path: str, problems: list[tuple[str, str]]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{key}: {msg}" if key else msg for key, msg in problems]
        if len(lines) == 1:
            text = f"{path}: {lines[0]}"
        else:
            text = f"{path}: {len(lines)} problems\n" + "\n".join(f"  {line}" for line in lines)
        super().__init__(text)


class SegmentKeyError(ReplicatorError, ValueError):
    """A string is not a valid segment key, or key fields (topic, region, range) are invalid.

    Also a ``ValueError`` so that config validation can reuse the naming rules."""


class SegmentError(ReplicatorError):
    """A segment object cannot be used; ``key`` names the object."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"segment {key}: {reason}")


class CorruptSegmentError(SegmentError):
    """The object is not a readable segment: truncated, not Parquet, or damaged pages."""


class SegmentMismatchError(SegmentError):
    """The segment is readable but its footer disagrees with its key or its content
    (wrong topic, range or level, record count, or checksum)."""


class StorageError(ReplicatorError):
    """An S3 operation failed (missing bucket, access denied, endpoint unreachable)."""

    def __init__(self, operation: str, bucket: str, key: str | None, reason: str) -> None:
        self.operation = operation
        self.bucket = bucket
        self.key = key
        where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
        super().__init__(f"{operation} {where} failed: {reason}")


class BrokerError(ReplicatorError):
    """A Kafka operation failed; the message names the cluster or topic and the attempt."""


class DataLossError(ReplicatorError):
    """Offsets of a source partition can no longer be exported (retention outran egress,
    or the topic was re-created); names the topic, partition and offset range."""

    def __init__(self, topic: str, partition: int, first: int, last: int, detail: str) -> None:
        self.topic = topic
        self.partition = partition
        self.first = first
        self.last = last
        super().__init__(detail)


class StackError(ReplicatorError):
    """The local stack could not be started, checked or stopped."""
