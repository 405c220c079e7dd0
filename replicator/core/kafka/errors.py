"""Errors of Kafka operations. Each keeps the Kafka error code it came from, so callers
decide on the code (retry, re-open, halt) rather than on message text.

:func:`transient_state` tells a cluster's passing state (a broker that does not answer, a
leader or coordinator on the move) from a failure an operator must look at: a worker
failing on the first is restarted after a pause and reports it as one warning line."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

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


class PartitionLookupError(BrokerError):
    """A look-up of a partition's ends (or of the metadata they need) failed. A broker
    paused under the look-up makes it fail with ``_UNKNOWN_PARTITION`` too (the client has
    no metadata of the partition yet), while a record produced to a partition the client's
    metadata lacks fails with the same code for good: the code alone does not say which,
    the kind of call does (see :func:`transient_state`)."""


class RecordRefusedError(BrokerError):
    """The destination refused one record for what it is (a record without a key for a
    compacted topic, a timestamp out of its range): asking again gets the same answer, so
    its partition halts; names the record's source offset and the broker's reason."""


class RecordTooLargeError(RecordRefusedError):
    """The destination refused a record for its size; names where it came from."""


class DestinationTopicError(BrokerError):
    """A destination topic has fewer partitions than its source needs and cannot grow
    (``code``: the broker's, when adding partitions failed)."""


class DestinationRecreatedError(BrokerError):
    """The destination topic was deleted and created again since the writer opened (its
    topic id changed): the open transaction is aborted and the worker fails, so that a
    writer opened again resumes by what the new topic holds."""


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


NOT_ANSWERING = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TRANSPORT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)
"""Codes of a broker that did not answer in time or dropped the connection (paused,
restarting, unreachable for a moment)."""

LEADER_MOVING = frozenset(
    {
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    }
)
"""Codes of a partition whose leader is being elected or has moved to another broker."""

COORDINATOR_MOVING = frozenset(
    {
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError._WAIT_COORD,
    }
)
"""Codes of a group or transaction coordinator being moved or loading its partition."""

ACCESS_REFUSED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._SSL,
    }
)
"""Codes of a cluster refusing this client (an ACL, its credentials, its TLS): asked
again, it answers the same, so never a passing state even when flagged retriable."""

NEVER_TRANSIENT = (
    OwnershipLostError,
    RecordRefusedError,
    AuthorizationError,
    KafkaAccessError,
    DestinationTopicError,
)
"""Broker errors that say something about this replicator, not the cluster's moment: it
was fenced, a record is refused, an ACL or credential is missing, a topic cannot grow.
They halt, stop the service or re-open a writer that may have moved, each on purpose."""


def transient_state(error: BaseException) -> str | None:
    """The passing state of a cluster ``error`` comes from, in a few words ("a broker did
    not answer"), or None when it is not one (the failure is to be looked at).

    Passing: a :class:`TransactionStillOpenError`; a :class:`BrokerError` whose code says a
    broker did not answer (:data:`NOT_ANSWERING`, and ``_UNKNOWN_PARTITION`` of a
    :class:`PartitionLookupError`) or a leader or coordinator is moving
    (:data:`LEADER_MOVING`, :data:`COORDINATOR_MOVING`), or that the client flags
    retriable. Never: the errors of :data:`NEVER_TRANSIENT`, a refused access
    (:data:`ACCESS_REFUSED`), a BrokerError without a code (a wait of our own that ran
    out), nor anything but a BrokerError."""
    if isinstance(error, TransactionStillOpenError):
        return "a transaction was still open"
    if not isinstance(error, BrokerError) or isinstance(error, NEVER_TRANSIENT):
        return None
    code = error.code
    if code is None or code in ACCESS_REFUSED:
        return None
    if code in NOT_ANSWERING:
        return "a broker did not answer"
    if code == KafkaError._UNKNOWN_PARTITION and isinstance(error, PartitionLookupError):
        return "a broker did not answer"
    if code in LEADER_MOVING:
        return "a partition leader was moving"
    if code in COORDINATOR_MOVING:
        return "a coordinator was moving"
    if error.retriable:
        return "the cluster was busy (a retriable error)"
    return None
