"""Errors of the relay."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class UpstreamMismatchError(ReplicatorError):
    """Two upstreams that should be identical hold different records at the same offset;
    names both clusters, the topic, the partition and the offset."""


class SourceDataLossError(ReplicatorError):
    """The next offset to relay is no longer in the upstream's log (retention outran the
    relay); names the topic, partition and offsets."""


class UnrelayableRecordError(ReplicatorError):
    """A source record the relay cannot carry (a header name that is not UTF-8: Kafka's
    protocol makes header names strings); names the topic, partition, offset and upstream.
    Its partition halts there, the record and everything after it unrelayed."""


class RelayIdentityError(ReplicatorError):
    """The config names the upstream offsets otherwise than the relay recorded at its
    first start (see :mod:`relay.identity`); nothing is relayed."""


class StopOffsetsError(ReplicatorError):
    """``--stop-at-end`` could not learn where every relayed partition ends; nothing is
    relayed (a partition without a stop offset would keep the run from ending)."""


class UpstreamUnreadableError(ReplicatorError):
    """An upstream could not be read to compare the record relayed last (a timeout, a
    broker error): not a mismatch; the partition waits and asks again."""


class RelayLoopError(ReplicatorError):
    """An upstream and the destination are one Kafka cluster under two names (their
    cluster ids match) and a topic would be relayed into itself; nothing is written."""
