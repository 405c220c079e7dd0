"""Errors of Kafka operations. Each keeps the Kafka error code it came from, so callers
decide on the code (retry, re-open, halt) rather than on message text."""

from __future__ import annotations

from typing import Any

from replicator.core.errors import ReplicatorError


class BrokerError(ReplicatorError):
    """A Kafka operation failed; the message names the cluster or topic and the attempt.

    ``code`` is the librdkafka / Kafka error code (``confluent_kafka.KafkaError``), or
    None when the failure did not come from the client (a timeout of our own);
    ``retriable`` says whether the client considers the same call worth repeating.
    """

    def __init__(self, message: str, *, code: int | None = None, retriable: bool = False) -> None:
        self.code = code
        self.retriable = retriable
        super().__init__(message)

    @classmethod
    def from_kafka(cls, context: str, error: Any) -> BrokerError:
        """``context: <client's text>`` keeping a ``KafkaError``'s code and retriability."""
        return cls(f"{context}: {error.str()}", code=error.code(), retriable=error.retriable())


class RecordRefusedError(BrokerError):
    """The destination refused one record for what it is (a record without a key for a
    compacted topic, a timestamp out of its range): asking again gets the same answer, so
    its partition halts; names the record's source offset and the broker's reason."""


class RecordTooLargeError(RecordRefusedError):
    """The destination refused a record for its size; names where it came from."""


class DestinationTopicError(BrokerError):
    """A destination topic has fewer partitions than its source needs and cannot grow
    (``code``: the broker's, when adding partitions failed)."""


class OwnershipLostError(BrokerError):
    """Another writer fenced this producer: it owns the destination partition now."""


class ServiceTopicError(ReplicatorError):
    """A service topic exists with another partition count than the config says."""


class CheckpointError(ReplicatorError):
    """A checkpoint record of a writer's own key that cannot be read: its partition halts
    (resuming without it could replay or skip records). Names where the record is."""


class TransactionStillOpenError(BrokerError):
    """A writer's resume point cannot be read yet: a transaction open in its destination or
    checkpoint partition has not ended within the wait. The writer fails and is opened
    again later (a resume read now could miss records and write them twice)."""


class KafkaAccessError(BrokerError):
    """A region's cluster refused this client before any work: SASL authentication failed
    (wrong user or password, or a mechanism the broker does not offer) or the TLS
    handshake failed (the broker's certificate is not signed by ``ssl_ca_location``, or
    its name does not match). Asking again gets the same answer, so the service stops
    with this error instead of reconnecting in a loop; names the region, the user and
    the client's own reason (``code``: ``_AUTHENTICATION`` or ``_SSL``)."""


class AuthorizationError(BrokerError):
    """An ACL does not allow an operation the replicator needs (``code``: the broker's
    ``TOPIC_AUTHORIZATION_FAILED``, ``GROUP_AUTHORIZATION_FAILED``,
    ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED``, ``CLUSTER_AUTHORIZATION_FAILED``); names
    the operation and the resource. The partition or source it was for halts: asking
    again gets the same answer until an operator grants the ACL."""
