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

The S3 path (``[egress] sync_acls``, ``[ingress] sync_acls``) carries them in an object
per topic, ``{prefix}/{region}/{topic}/_acls.json`` (:class:`TopicAcls`): egress writes
the copies :func:`copied_bindings` makes of its source's bindings under the source topic's
name, ingress reads them back and applies :func:`copied_bindings` again, to its
destination names. Anyone who can write to the bucket can write that object, so it is
read as hostile input: bounded in bytes and in bindings, every field checked, signed like
group offsets where the deployment signs (a ``"signature"`` over its S3 key and its value
in one canonical spelling, what :meth:`TopicAcls.to_json` gives), and the second
:func:`copied_bindings` drops whatever egress would never have written (WRITE, another
topic, a prefixed pattern).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

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

from replicator.core.errors import ReplicatorError
from replicator.core.kafka.clients import AUTHORIZATION_FAILED
from replicator.core.kafka.errors import AuthorizationError, BrokerError
from replicator.core.segments.signing import (
    OBJECT_SIGNATURE_FIELD,
    SigningKeys,
    object_signature_problem,
    signed_object,
)
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
RELAY_GRANTS = "ACLs the relay's sync_acls adds"
S3_PATH_GRANTS = "ACLs the S3 path's sync_acls adds"
"""Sections of docs/security.md an authorization failure points to."""
FORMAT_VERSION = 1
MAX_OBJECT_BYTES = 1024**2
"""The largest ``_acls.json`` read (a binding costs ~200 bytes); a larger one is refused
before it is parsed."""
MAX_BINDINGS = 4096
"""More bindings than this in one object are refused."""
MAX_NAME_CHARS = 1024
"""A principal, host or resource name longer than this is refused."""
SIGNATURE_FIELD = OBJECT_SIGNATURE_FIELD
_PRINCIPAL = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}:[^\x00-\x1f\x7f]+")
"""``Type:name`` (``User:app``), no control characters."""
_RESOURCES = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP}
_PERMISSIONS = {"ALLOW": AclPermissionType.ALLOW, "DENY": AclPermissionType.DENY}
_FIELDS = (
    "resource_type",
    "name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)
"""Every field of a binding in ``_acls.json``, each a non-empty string."""
_OPERATIONS = {o.name: o for o in AclOperation if o not in (AclOperation.ANY, AclOperation.UNKNOWN)}


class AclObjectError(ReplicatorError):
    """An ``_acls.json`` object that cannot be used; the message names its S3 key."""


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


def describe_bindings(
    admin: AdminClient, where: str, grants: str = RELAY_GRANTS
) -> list[AclBinding]:
    """Every topic and group binding of a cluster (``where`` names it in errors); a
    BrokerError names the cluster and the broker's reason (no DESCRIBE on the cluster, no
    authorizer) and, refused, the section of docs/security.md listing the grants
    (``grants``)."""
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
            raise _refusal("describe the ACLs of", "DESCRIBE", where, exc.args[0], grants) from None
    return found


def create_missing(
    admin: AdminClient, wanted: list[AclBinding], where: str, grants: str = RELAY_GRANTS
) -> list[AclBinding]:
    """Create those of ``wanted`` the cluster lacks (idempotent); the bindings created. A
    BrokerError names the cluster, the binding and the broker's reason."""
    present = set(describe_bindings(admin, where, grants))
    missing = [b for b in wanted if b not in present]
    if not missing:
        return []
    futures = admin.create_acls(missing, request_timeout=ADMIN_TIMEOUT)
    for binding, future in futures.items():
        try:
            future.result(timeout=ADMIN_TIMEOUT)
        except KafkaException as exc:
            raise _refusal(
                f"create ACL {describe_binding(binding)} in", "ALTER", where, exc.args[0], grants
            ) from None
    return missing


def _refusal(attempt: str, needed: str, where: str, error: KafkaError, grants: str) -> BrokerError:
    """The error of a refused ACL request: an authorization failure names the grant it
    needs (the broker's own text for it is a dump of the request, left out)."""
    if error.code() in AUTHORIZATION_FAILED:
        return AuthorizationError(
            f"not allowed to {attempt} {where} ({error.name()}): sync_acls needs {needed} "
            f'on the cluster (docs/security.md, "{grants}")',
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


# -- the S3 path's object -----------------------------------------------------------------


@dataclass(frozen=True)
class TopicAcls:
    """The read side of one exported topic's ACLs and of its exported groups', as egress
    found them (source names, LITERAL, READ and DESCRIBE only)."""

    region: str
    topic: str
    bindings: tuple[AclBinding, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "region": self.region,
            "topic": self.topic,
            "bindings": [_binding_json(b) for b in sorted(set(self.bindings), key=str)],
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> TopicAcls:
        """Validate an object's parsed JSON; ``where`` (its S3 key) names it in errors."""
        if not isinstance(data, dict):
            raise AclObjectError(f"{where}: not a JSON object")
        if data.get("format_version") != FORMAT_VERSION:
            raise AclObjectError(
                f"{where}: format_version {escape(data.get('format_version'), 40)} is not "
                f"{FORMAT_VERSION}"
            )
        names = {name: data.get(name) for name in ("region", "topic")}
        for name, value in names.items():
            if not isinstance(value, str) or not value:
                raise AclObjectError(f"{where}: {name!r} is missing or not a string")
        entries = data.get("bindings")
        if not isinstance(entries, list):
            raise AclObjectError(f"{where}: 'bindings' is not a list")
        if len(entries) > MAX_BINDINGS:
            raise AclObjectError(
                f"{where}: {len(entries)} bindings, over the {MAX_BINDINGS} allowed"
            )
        bindings = tuple(_parse_binding(e, f"{where}: binding {i}") for i, e in enumerate(entries))
        return cls(str(names["region"]), str(names["topic"]), bindings)


def _binding_json(binding: AclBinding) -> dict[str, str]:
    return {
        "resource_type": _name(binding.restype),
        "name": binding.name,
        "pattern_type": _name(binding.resource_pattern_type),
        "principal": binding.principal,
        "host": binding.host,
        "operation": _name(binding.operation),
        "permission_type": _name(binding.permission_type),
    }


def _parse_binding(entry: Any, where: str) -> AclBinding:
    if not isinstance(entry, dict):
        raise AclObjectError(f"{where}: not a JSON object")
    fields = {}
    for field in _FIELDS:
        value = entry.get(field)
        if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
            raise AclObjectError(
                f"{where}: {field!r} is missing, not a string or over {MAX_NAME_CHARS} characters"
            )
        fields[field] = value
    resource = _RESOURCES.get(fields["resource_type"])
    operation = _OPERATIONS.get(fields["operation"])
    permission = _PERMISSIONS.get(fields["permission_type"])
    for field, parsed in (
        ("resource_type", resource),
        ("operation", operation),
        ("permission_type", permission),
    ):
        if parsed is None:
            raise AclObjectError(f"{where}: unknown {field} {escape(fields[field], 40)}")
    if fields["pattern_type"] != "LITERAL":
        raise AclObjectError(
            f"{where}: pattern_type {escape(fields['pattern_type'], 40)} is not LITERAL"
        )
    if not _PRINCIPAL.fullmatch(fields["principal"]):
        raise AclObjectError(
            f"{where}: principal {escape(fields['principal'], 80)} is not Type:name"
        )
    if any(not c.isprintable() for c in fields["host"] + fields["name"]):
        raise AclObjectError(f"{where}: a control character in its host or name")
    assert resource is not None and operation is not None and permission is not None
    return AclBinding(
        resource,
        fields["name"],
        ResourcePatternType.LITERAL,
        fields["principal"],
        fields["host"],
        operation,
        permission,
    )


def signed_acls_json(record: TopicAcls, s3_key: str, keys: SigningKeys) -> dict[str, Any]:
    """``record``'s value to store at ``s3_key``: signed where the deployment requires
    signatures (:class:`AclObjectError` if this process holds no key to sign with)."""
    try:
        return signed_object(record.to_json(), s3_key, keys)
    except ValueError as exc:
        raise AclObjectError(f"{s3_key}: not written: {exc}") from None


def checked_acls(data: Any, s3_key: str, keys: SigningKeys) -> TopicAcls:
    """The object read from ``s3_key``, validated and its signature checked (where the
    deployment signs): :class:`AclObjectError` naming the key otherwise."""
    record = TopicAcls.from_json(data, s3_key)
    problem = object_signature_problem(data, record.to_json(), s3_key, keys)
    if problem is not None:
        raise AclObjectError(f"{s3_key}: {problem}")
    return record
