"""Errors of a restore that cannot start. (A partition that cannot finish — a lost or
corrupt segment — is reported in the result, and the others finish.)"""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class RestoreError(ReplicatorError):
    """The restore was refused before anything was written; the message says why and what
    to do."""


class ArchivedSegmentsError(RestoreError):
    """Segments in GLACIER or DEEP_ARCHIVE must be restored in S3 before they are read."""
