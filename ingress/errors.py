"""Errors of the ingress service."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class PartitionHaltedError(ReplicatorError):
    """This partition stops (others go on): a corrupt segment or a lost one."""
