"""Errors of the local stack and the drill."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class StackError(ReplicatorError):
    """The local stack could not be started, checked or stopped."""


class DrillFailedError(ReplicatorError):
    """A check of the disaster-recovery drill failed; names what differed."""
