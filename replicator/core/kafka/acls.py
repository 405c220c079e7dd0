"""Copying the read side of a source cluster's ACLs onto the replicas of its topics and
groups, so that an application can fail over without an administrator granting it
anything first.

Why only READ and DESCRIBE: while the destination is a replica, only the replicator may
write its topics; an application that could write there would fork the replica from its
source. So ``WRITE`` is never copied, ``ALL`` is copied as ``READ`` and ``DESCRIBE`` (what
it grants a reader), and every other operation (CREATE, DELETE, ALTER, the configs') is
left to the operator. DENY bindings on READ and DESCRIBE are copied as well: leaving them
out would let a denied principal read the replica through a wider ALLOW.

Every copied binding is LITERAL on the one destination resource it covers: a prefixed or
wildcard source pattern becomes a binding per replicated topic (and per moved group) it
matches, because the same pattern in the destination would also cover topics that are no
replica (the replicator's own checkpoint topics, a renamed destination's neighbours).
Principals and hosts are copied as they are.

:func:`copied_bindings` is pure; :func:`describe_bindings` and :func:`create_missing` talk
to Kafka (DescribeAcls needs DESCRIBE on the cluster, CreateAcls ALTER on the cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from replicator.core.kafka.clients import AUTHORIZATION_FAILED
from replicator.core.kafka.errors import AuthorizationError, BrokerError
from replicator.core.untrusted_text import escape

ADMIN_TIMEOUT = 30.0
COPIED_OPERATIONS: Mapping[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.READ: (AclOperation.READ,),
    AclOperation.DESCRIBE: (AclOperation.DESCRIBE,),
    AclOperation.ALL: (AclOperation.READ, AclOperation.DESCRIBE),
}
"""A source operation -> the operations its copy grants (or denies); others are not
copied."""
WILDCARD = "*"


def covers(binding: AclBinding, name: str) -> bool:
    """Whether ``binding``'s resource pattern applies to the resource called ``name``.
    Pure."""
    pattern = binding.resource_pattern_type
    if pattern == ResourcePatternType.LITERAL:
        return binding.name in (name, WILDCARD)
    if pattern == ResourcePatternType.PREFIXED:
        return name.startswith(binding.name)
    return False


def copied_bindings(
    source: Iterable[AclBinding], topics: Mapping[str, str], groups: Iterable[str]
) -> list[AclBinding]:
    """The destination bindings that copy the read side of ``source``: ``topics`` maps each
    replicated source topic to its destination topic, ``groups`` names the consumer groups
    moved (under the same id). Each binding once, sorted. Pure."""
    moved = sorted(set(groups))
    copies: set[AclBinding] = set()
    for binding in source:
        operation = binding.operation
        if not isinstance(operation, AclOperation):
            continue
        operations = COPIED_OPERATIONS.get(operation, ())
        if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            continue
        for resource_type, name in _covered(binding, topics, moved):
            copies.update(
                AclBinding(
                    resource_type,
                    name,
                    ResourcePatternType.LITERAL,
                    binding.principal,
                    binding.host,
                    copied,
                    binding.permission_type,
                )
                for copied in operations
            )
    return sorted(copies, key=str)


def _covered(
    binding: AclBinding, topics: Mapping[str, str], groups: list[str]
) -> list[tuple[ResourceType, str]]:
    if binding.restype == ResourceType.TOPIC:
        return [(ResourceType.TOPIC, topics[t]) for t in sorted(topics) if covers(binding, t)]
    if binding.restype == ResourceType.GROUP:
        return [(ResourceType.GROUP, g) for g in groups if covers(binding, g)]
    return []


def describe_bindings(admin: AdminClient, where: str) -> list[AclBinding]:
    """Every topic and group binding of a cluster (``where`` names it in errors); a
    BrokerError names the cluster and the broker's reason (no DESCRIBE on the cluster, no
    authorizer)."""
    found: list[AclBinding] = []
    for resource_type in (ResourceType.TOPIC, ResourceType.GROUP):
        every = AclBindingFilter(  # None: any name, principal, host (the stubs say str)
            resource_type,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        try:
            future = admin.describe_acls(every, request_timeout=ADMIN_TIMEOUT)
            found.extend(future.result(timeout=ADMIN_TIMEOUT))
        except KafkaException as exc:
            raise _refusal("describe the ACLs of", "DESCRIBE", where, exc.args[0]) from None
    return found


def create_missing(admin: AdminClient, wanted: list[AclBinding], where: str) -> list[AclBinding]:
    """Create those of ``wanted`` the cluster lacks (idempotent); the bindings created. A
    BrokerError names the cluster, the binding and the broker's reason."""
    present = set(describe_bindings(admin, where))
    missing = [b for b in wanted if b not in present]
    if not missing:
        return []
    futures = admin.create_acls(missing, request_timeout=ADMIN_TIMEOUT)
    for binding, future in futures.items():
        try:
            future.result(timeout=ADMIN_TIMEOUT)
        except KafkaException as exc:
            raise _refusal(
                f"create ACL {describe_binding(binding)} in", "ALTER", where, exc.args[0]
            ) from None
    return missing


def _refusal(attempt: str, needed: str, where: str, error: KafkaError) -> BrokerError:
    """The error of a refused ACL request: an authorization failure names the grant it
    needs (the broker's own text for it is a dump of the request, left out)."""
    if error.code() in AUTHORIZATION_FAILED:
        return AuthorizationError(
            f"not allowed to {attempt} {where} ({error.name()}): sync_acls needs {needed} "
            'on the cluster (docs/security.md, "ACLs the relay\'s sync_acls adds")',
            code=error.code(),
        )
    return BrokerError.from_kafka(f"cannot {attempt} {where}", error)


def describe_binding(binding: AclBinding) -> str:
    """``ALLOW READ on topic 'orders' for User:app from host *``, names escaped (they come
    from a cluster). Pure."""
    return (
        f"{_name(binding.permission_type)} {_name(binding.operation)} on "
        f"{_name(binding.restype).lower()} '{escape(binding.name)}' for "
        f"{escape(binding.principal)} from host {escape(binding.host)}"
    )


def _name(value: Enum | str | int) -> str:
    return value.name if isinstance(value, Enum) else str(value)
