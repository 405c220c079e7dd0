"""Errors of consumer-group offset export, translation and commit."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class GroupOffsetsError(ReplicatorError):
    """A group-offsets object that cannot be used (not JSON, wrong shape, too large)."""


class GroupActiveError(ReplicatorError):
    """A destination group has members: its offsets are never moved under them."""
