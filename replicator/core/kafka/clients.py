"""librdkafka settings for a region's cluster, and small admin helpers.

Every Kafka client the replicator opens (consumers, producers, admin clients, in any
process) gets its settings from :func:`client_config`, so security settings in the config
apply everywhere. Clients are created where they are used: they hold sockets and threads
and cannot be pickled into Spark tasks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.core.config import KafkaConfig
from replicator.core.kafka.client_logs import client_logger
from replicator.core.kafka.errors import (
    AuthorizationError,
    BrokerError,
    KafkaAccessError,
    ServiceTopicError,
)

log = logging.getLogger(__name__)

_SECRET_WORDS = ("password", "secret", "token", "key.pem", "credentials")

BULK_READER: dict[str, Any] = {"fetch.queue.backoff.ms": 10}
"""Settings of a consumer that reads a partition's backlog as fast as it can (egress's
range reader, the relay's upstream reader), on top of :func:`client_config`'s.

Why: once a partition's local queue holds ``queued.min.messages`` (100,000) records or
``queued.max.messages.kbytes``, librdkafka postpones that partition's next fetch by
``fetch.queue.backoff.ms``, 1,000 ms by default — though the application drains 10,000
records in a few milliseconds. A reader of a backlog then spends most of its time waiting
for a fetch it held back itself: one confluent-kafka consumer of one partition read
about 200,000 records a second with the default and about 860,000 with 10 ms, for the
same CPU a record (``bench`` workload, 500,000 records of 216 bytes). The queue's bounds
(and so the reader's memory) are those thresholds, unchanged; only the pause after them
is shorter. A cluster's raw ``config`` table overrides these."""


def client_config(kafka: KafkaConfig, **overrides: Any) -> dict[str, Any]:
    """librdkafka properties for ``kafka``; ``overrides`` use librdkafka names with '_' for '.'.

    Precedence, lowest first: the typed fields, the raw ``kafka.config`` table, overrides.
    """
    conf: dict[str, Any] = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "security.protocol": kafka.security_protocol,
        "logger": client_logger(),
    }
    if kafka.sasl_mechanism:
        conf["sasl.mechanism"] = kafka.sasl_mechanism
    if kafka.sasl_username is not None:
        conf["sasl.username"] = kafka.sasl_username
    if kafka.sasl_password is not None:
        conf["sasl.password"] = kafka.sasl_password.get_secret_value()
    if kafka.ssl_key_password is not None:
        conf["ssl.key.password"] = kafka.ssl_key_password.get_secret_value()
    for field, prop in (
        ("ssl_ca_location", "ssl.ca.location"),
        ("ssl_certificate_location", "ssl.certificate.location"),
        ("ssl_key_location", "ssl.key.location"),
    ):
        value = getattr(kafka, field)
        if value is not None:
            conf[prop] = value
    conf.update(kafka.config)
    conf.update({name.replace("_", "."): value for name, value in overrides.items()})
    return conf


ACCESS_REFUSED = {
    KafkaError._AUTHENTICATION: "SASL authentication failed",
    KafkaError.SASL_AUTHENTICATION_FAILED: "SASL authentication failed",
    KafkaError._SSL: "the TLS handshake failed",
}
"""Client errors that mean the cluster will not talk to this client as configured."""
ACCESS_CHECK_TIMEOUT = 15.0
ACCESS_CHECK_ATTEMPT = 1.0


def consume_available(consumer: Any, most: int, wait: float) -> list[Any]:
    """Messages (and errors) as soon as there are any: the first within ``wait`` seconds,
    then, without waiting, those already fetched, up to ``most`` in all.

    Why not ``consume(most, timeout=wait)``: librdkafka's batch consume returns only once
    it has ``most`` messages or ``wait`` has passed, so a reader that is caught up would
    hold each record it already has for the rest of ``wait`` (measured in the relay: every
    read took the full 50 ms)."""
    first = consumer.poll(wait)
    if first is None:
        return []
    if most <= 1:
        return [first]
    return [first, *consumer.consume(num_messages=most - 1, timeout=0)]


def check_access(kafka: KafkaConfig, region: str, timeout: float = ACCESS_CHECK_TIMEOUT) -> None:
    """Ask ``region``'s cluster for its metadata once a second until it answers, as the
    service's clients will; raise :class:`KafkaAccessError` at the first SASL
    authentication or TLS handshake failure, naming the region, the user and the client's
    reason.

    Why: librdkafka treats both as a broker that is down and reconnects for ever (an
    untrusted certificate: about 20 handshakes a second per client), so a service would
    hang or log the same failure endlessly. Checked before a service starts, the first
    refusal stops it with one clear error. A cluster that does not answer at all within
    ``timeout`` is left to the service's own waiting (this is no availability check)."""
    refusals: list[KafkaError] = []
    conf = client_config(kafka, socket_timeout_ms=int(ACCESS_CHECK_ATTEMPT * 1000))
    conf["error_cb"] = refusals.append
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=ACCESS_CHECK_ATTEMPT)
            return
        except KafkaException:
            admin.poll(0)  # serves error_cb
        refused = next((e for e in refusals if e.code() in ACCESS_REFUSED), None)
        if refused is not None:
            raise access_error(kafka, region, refused)
        if time.monotonic() > deadline:
            return


def access_error(kafka: KafkaConfig, region: str, error: KafkaError) -> KafkaAccessError:
    """The error naming why ``region`` refused the client (see :func:`check_access`)."""
    user = f" as user {kafka.sasl_username!r}" if kafka.sasl_username else ""
    if error.code() == KafkaError._SSL:
        hint = (
            f"the broker's certificate is not trusted by ssl_ca_location "
            f"{kafka.ssl_ca_location or '(system CAs)'} or does not name the host"
        )
    else:
        hint = f"check the user and password ({kafka.sasl_mechanism})"
    return KafkaAccessError(
        f"region {region}: Kafka at {kafka.bootstrap_servers} refused the connection{user}: "
        f"{ACCESS_REFUSED[error.code()]} ({error.name()}; {hint}): {error.str()}",
        code=error.code(),
    )


AUTHORIZATION_FAILED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
"""Broker answers meaning an ACL does not allow the operation: never worth repeating."""


def refuse_if_unauthorized(topic: Any, name: str) -> None:
    """Raise :class:`AuthorizationError` when the metadata of topic ``name`` (``topic``:
    its ``TopicMetadata`` or None) says this client may not describe it: such a topic
    shows no partitions and no leaders, and waiting for them would only time out."""
    error = getattr(topic, "error", None)
    if error is not None and error.code() in AUTHORIZATION_FAILED:
        raise authorization_error("Describe", f"topic {name!r}", error)


def authorization_error(operation: str, resource: str, error: KafkaError) -> AuthorizationError:
    """The error naming the operation and the resource an ACL did not allow."""
    return AuthorizationError(
        f"not allowed to {operation} {resource} ({error.name()}): grant the ACL "
        f"docs/security.md lists for this service; {error.str()}",
        code=error.code(),
    )


def redacted(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``conf`` safe to log: secret-looking values are masked."""
    return {
        k: "***" if any(word in k.lower() for word in _SECRET_WORDS) else v for k, v in conf.items()
    }


def ensure_topic(
    admin: AdminClient,
    name: str,
    partitions: int,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> bool:
    """Create ``name`` unless it exists. Returns True if this call created it.

    Safe when several processes race to create the same topic. A topic this call
    created is returned only once each partition has a leader (:func:`await_leaders`).
    """
    metadata = admin.list_topics(timeout=timeout)
    if name in metadata.topics and metadata.topics[name].error is None:
        return False
    refuse_if_unauthorized(metadata.topics.get(name), name)
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, config=dict(config or {}))],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    try:
        futures[name].result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            await_leaders(admin, name, partitions, timeout)
            return False
        if error.code() in AUTHORIZATION_FAILED:
            raise authorization_error("Create", f"topic {name!r}", error) from None
        raise BrokerError.from_kafka(f"cannot create topic {name!r}", error) from None
    await_leaders(admin, name, partitions, timeout)
    return True


COORDINATOR_NOT_READY = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
"""Answers of a group coordinator that is moving or loading its partition of
``__consumer_offsets`` (a broker restart, the first group of a new cluster): asked again
a moment later, it answers."""
Result = TypeVar("Result")


LEADER_NOT_READY = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    }
)
"""Answers about a partition its broker does not lead yet: a topic created a moment ago
(see :func:`await_leaders`), a broker restarting (its leader epoch behind or ahead of the
asker's for a moment). Asked again, it answers."""


def retry_while_moving(
    call: Callable[[], Result],
    codes: frozenset[int] = COORDINATOR_NOT_READY,
    timeout: float = 30.0,
    pause: float = 0.2,
) -> Result:
    """``call()``, repeated while it fails with one of ``codes`` (a coordinator or leader
    on the move: :data:`COORDINATOR_NOT_READY`, :data:`LEADER_NOT_READY`) and ``timeout``
    seconds have not passed; any other failure, or the last, is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            if exc.args[0].code() not in codes or time.monotonic() > deadline:
                raise
            log.info("not ready (%s); asking again", exc.args[0].str())
            time.sleep(pause)


def await_leaders(admin: AdminClient, name: str, partitions: int, timeout: float = 30.0) -> None:
    """Wait until the brokers know ``partitions`` partitions of ``name``, each with a leader.

    Why: Kafka answers CreateTopics and CreatePartitions once its controller has recorded
    the change; each broker learns of it from the metadata log a moment later. Until then
    a request for a new partition is refused (NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION), which a writer, a watermark look-up or a checkpoint scan
    made just after the creation would take for a failure.
    """
    deadline = time.monotonic() + timeout
    while True:
        topic = admin.list_topics(name, timeout=timeout).topics.get(name)
        refuse_if_unauthorized(topic, name)
        ready = (
            topic is not None
            and topic.error is None
            and len(topic.partitions) >= partitions
            and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())
        )
        if ready:
            return
        if time.monotonic() > deadline:
            raise BrokerError(
                f"topic {name!r}: its {partitions} partitions have no leader "
                f"{timeout:.0f} s after it was created or grown"
            )
        time.sleep(0.05)


def ensure_service_topic(
    admin: AdminClient,
    name: str,
    partitions: int,
    setting: str,
    config: Mapping[str, str] | None = None,
) -> None:
    """Create a service topic (segment events, checkpoints, relay assignments) or check
    that the one there has the partition count ``setting`` names: work placement and
    checkpoint look-ups hash onto that count, so another count would leave sources with
    no owner or miss checkpoints (a full replay). Raises :class:`ServiceTopicError`."""
    if ensure_topic(admin, name, partitions, config):
        return
    described = admin.list_topics(name, timeout=30).topics.get(name)
    have = len(described.partitions) if described is not None else partitions
    if have != partitions:
        raise ServiceTopicError(
            f"topic {name} has {have} partitions but {setting} = {partitions}: set "
            f"{setting} = {have}, or stop every instance and re-create the topic with "
            f"{partitions} partitions"
        )
