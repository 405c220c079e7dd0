"""The ACLs each service needs, read from the table in ``docs/security.md`` and applied
through the Admin API, so that the documented table is the one the secured drill and the
tests run with and cannot drift from it.

The table (section :data:`SECTION`) has the columns ``service | resource type | name |
pattern | operation``. A name is written between backticks; the placeholders
``<source topic>`` and ``<destination topic>`` stand for each topic a deployment
replicates (its ``[egress.topics]`` and ``[ingress.sources]``, or a relay's), and
``<application group>`` for each application consumer group whose offsets it carries
over; they are the only parts a deployment fills in. Parsing is pure; :func:`apply_acls`
talks to Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from infra.errors import StackError

SECTION = "## ACLs each service needs"
SYNC_ACLS_SECTION = "## ACLs the relay's sync_acls adds"
"""A table of the same columns: what ``[relay] sync_acls = true`` needs on top of
:data:`SECTION` (granted only to a relay that has it on)."""
S3_SYNC_ACLS_SECTION = "## ACLs the S3 path's sync_acls adds"
"""What ``[egress] sync_acls`` and ``[ingress] sync_acls`` need on top of :data:`SECTION`
(granted only where they are on)."""
DOC = Path(__file__).resolve().parent.parent / "docs" / "security.md"
SOURCE_TOPIC = "<source topic>"
DESTINATION_TOPIC = "<destination topic>"
APPLICATION_GROUP = "<application group>"
_RESOURCES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional id": ResourceType.TRANSACTIONAL_ID,
    "cluster": ResourceType.BROKER,
}
_PATTERNS = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED}
_NAME = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class AclRow:
    """One row of the table: ``service`` may ``operation`` on the resource."""

    service: str
    resource: str
    name: str
    pattern: str
    operation: str


def parse_acl_table(markdown: str, section: str = SECTION) -> list[AclRow]:
    """The rows of the table under ``section``; ``StackError`` naming the line for a
    row that does not parse (an unknown resource, pattern or operation). Pure."""
    lines = markdown.splitlines()
    try:
        start = lines.index(section)
    except ValueError:
        raise StackError(f"no section {section!r} in the security document") from None
    rows: list[AclRow] = []
    in_table = False
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not in_table:
            in_table = True  # the header
            continue
        if set("".join(cells)) <= {"-", " ", ":"}:
            continue
        rows.append(_row(cells, number))
    if not rows:
        raise StackError(f"the table under {section!r} has no rows")
    return rows


def _row(cells: list[str], number: int) -> AclRow:
    if len(cells) != 5:
        raise StackError(f"security.md line {number}: expected 5 cells, got {len(cells)}")
    service, resource, name_cell, pattern, operation = cells
    named = _NAME.fullmatch(name_cell)
    if named is None:
        raise StackError(f"security.md line {number}: the name must be in backticks")
    resource, pattern, operation = resource.lower(), pattern.lower(), operation.upper()
    if resource not in _RESOURCES:
        raise StackError(f"security.md line {number}: unknown resource type {resource!r}")
    if pattern not in _PATTERNS:
        raise StackError(f"security.md line {number}: pattern must be literal or prefixed")
    if operation.replace("_", "") not in {o.name.replace("_", "") for o in AclOperation}:
        raise StackError(f"security.md line {number}: unknown operation {operation!r}")
    return AclRow(service.strip("`"), resource, named.group(1), pattern, operation)


def read_acl_table(
    path: Path = DOC, *, sync_acls: bool = False, s3_sync_acls: bool = False
) -> list[AclRow]:
    """The rows of :data:`SECTION`, with ``sync_acls`` (a relay with ``[relay] sync_acls
    = true``) those of :data:`SYNC_ACLS_SECTION` too, and with ``s3_sync_acls`` (egress
    and ingress with ``sync_acls = true``) those of :data:`S3_SYNC_ACLS_SECTION`."""
    markdown = path.read_text(encoding="utf-8")
    extra = parse_acl_table(markdown, SYNC_ACLS_SECTION) if sync_acls else []
    if s3_sync_acls:
        extra += parse_acl_table(markdown, S3_SYNC_ACLS_SECTION)
    return parse_acl_table(markdown) + extra


def _operation(name: str) -> AclOperation:
    wanted = name.replace("_", "")
    return next(o for o in AclOperation if o.name.replace("_", "") == wanted)


def acl_bindings(
    rows: Iterable[AclRow],
    users: Mapping[str, str],
    topics: Mapping[str, str],
    groups: Iterable[str] = (),
) -> list[AclBinding]:
    """ALLOW bindings for ``rows``: ``users`` maps a service to its user (services not in
    it are left out); ``topics`` maps each source topic to its destination topic and
    ``groups`` names the application groups, filling the placeholders. Each binding once
    (a topic both read and written under one name is one binding, as the Admin API
    wants). Pure."""
    applications = sorted(set(groups))
    bindings: list[AclBinding] = []
    for row in rows:
        user = users.get(row.service)
        if user is None:
            continue
        for name in _names(row.name, topics, applications):
            binding = AclBinding(
                _RESOURCES[row.resource],
                "kafka-cluster" if row.resource == "cluster" else name,
                _PATTERNS[row.pattern],
                f"User:{user}",
                "*",
                _operation(row.operation),
                AclPermissionType.ALLOW,
            )
            if binding not in bindings:
                bindings.append(binding)
    return bindings


def _names(name: str, topics: Mapping[str, str], groups: list[str]) -> list[str]:
    if name == APPLICATION_GROUP:
        return groups
    if name == SOURCE_TOPIC:
        return sorted(topics)
    if name == DESTINATION_TOPIC:
        return sorted(set(topics.values()))
    return [name]


def apply_acls(admin: AdminClient, bindings: list[AclBinding], timeout: float = 30.0) -> None:
    """Create ``bindings`` (as a principal allowed to alter the cluster's ACLs)."""
    if not bindings:
        return
    for binding, future in admin.create_acls(bindings, request_timeout=timeout).items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            raise StackError(f"creating ACL {binding}: {exc.args[0].str()}") from None
