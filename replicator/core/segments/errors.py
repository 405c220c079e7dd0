"""Errors of segment keys and segment objects."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class SegmentKeyError(ReplicatorError, ValueError):
    """A string is not a valid segment key, or key fields (topic, region, range) are invalid.

    Also a ``ValueError`` so that config validation can reuse the naming rules."""


class SegmentError(ReplicatorError):
    """A segment object cannot be used; ``s3_key`` names the object."""

    def __init__(self, s3_key: str, reason: str) -> None:
        self.s3_key = s3_key
        self.reason = reason
        super().__init__(f"segment {s3_key}: {reason}")


class CorruptSegmentError(SegmentError):
    """The object is not a readable segment: truncated, not Parquet, or damaged pages."""


class SegmentMismatchError(SegmentError):
    """The segment is readable but its footer disagrees with its key or its content
    (wrong topic, range or level, record count, or checksum)."""


class SegmentSignatureError(SegmentMismatchError):
    """The deployment signs segments and this one is unsigned, or signed with a key it
    does not hold (:mod:`replicator.core.segments.signing`): written by someone else."""


class DescriptorError(ReplicatorError):
    """A topic descriptor (``_topic.json``) that cannot be used; the message names its S3
    object key and the field."""
