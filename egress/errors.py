"""Errors of the egress job."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class DataLossError(ReplicatorError):
    """Offsets of a source partition can no longer be exported (retention outran egress,
    or the topic was re-created); names the topic, partition and inclusive offset range."""

    def __init__(self, topic: str, partition: int, first: int, last: int, detail: str) -> None:
        self.topic = topic
        self.partition = partition
        self.first = first
        self.last = last
        super().__init__(detail)


class EgressFailedError(ReplicatorError):
    """The streaming query stopped with an error; the message is the root cause."""
