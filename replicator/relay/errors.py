"""Errors of the relay."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class UpstreamMismatchError(ReplicatorError):
    """Two upstreams that should be identical hold different records at the same offset;
    names both clusters, the topic, the partition and the offset."""


class SourceDataLossError(ReplicatorError):
    """The next offset to relay is no longer in the upstream's log (retention outran the
    relay); names the topic, partition and offsets."""
