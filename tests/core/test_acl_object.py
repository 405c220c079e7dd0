"""The S3 path's ACL object, ``_acls.json`` (:class:`replicator.core.kafka.acls.TopicAcls`):
what egress writes reads back as the same bindings, signed for its own S3 key; anything a
bucket writer could put there (a bad principal, a prefixed pattern, too many bindings, an
unsigned or re-keyed copy) is refused naming the object; and what ingress copies from it
(:func:`ingress.acl_sync.destination_copies`) is only the read side, literal on the
destination topic and on the groups ingress moves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from ingress.acl_sync import destination_copies
from replicator.core.config import IngressSource
from replicator.core.groups.offsets_file import GroupSelection
from replicator.core.kafka.acls import (
    MAX_BINDINGS,
    AclObjectError,
    TopicAcls,
    checked_acls,
    signed_acls_json,
)
from replicator.core.segments.key import topic_acls_s3_key
from replicator.core.segments.signing import UNSIGNED, SigningKeys

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
READ, DESCRIBE, WRITE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
KEY = topic_acls_s3_key("dr", "east", "orders")
KEYS = SigningKeys(b"the deployment's signing key")


def binding(
    resource: ResourceType,
    name: str,
    operation: AclOperation,
    principal: str = "User:app",
    permission: AclPermissionType = ALLOW,
) -> AclBinding:
    return AclBinding(
        resource, name, ResourcePatternType.LITERAL, principal, "*", operation, permission
    )


EXPORTED = TopicAcls(
    "east",
    "orders",
    (
        binding(TOPIC, "orders", READ),
        binding(TOPIC, "orders", DESCRIBE, "User:ops"),
        binding(TOPIC, "orders", READ, "User:intern", DENY),
        binding(GROUP, "app-orders", READ),
    ),
)


def stored(record: TopicAcls = EXPORTED, keys: SigningKeys = KEYS) -> dict[str, Any]:
    """The object as a reader gets it back from the bucket."""
    parsed: dict[str, Any] = json.loads(json.dumps(signed_acls_json(record, KEY, keys)))
    return parsed


def entry(**changed: str) -> dict[str, str]:
    return {
        "resource_type": "TOPIC",
        "name": "orders",
        "pattern_type": "LITERAL",
        "principal": "User:app",
        "host": "*",
        "operation": "READ",
        "permission_type": "ALLOW",
        **changed,
    }


def unsigned_with(*entries: Any) -> dict[str, Any]:
    return {"format_version": 1, "region": "east", "topic": "orders", "bindings": list(entries)}


def test_what_egress_writes_reads_back_as_the_same_bindings_signed_for_its_key():
    data = stored()
    assert data["signature"].startswith("replicator-signature-v2:hmac-sha256")
    assert checked_acls(data, KEY, KEYS) == TopicAcls(
        "east", "orders", tuple(sorted(EXPORTED.bindings, key=str))
    )
    assert checked_acls(stored(keys=UNSIGNED), KEY, UNSIGNED).bindings


@pytest.mark.parametrize(
    ("forge", "problem"),
    [
        (lambda d: d.pop("signature"), "unsigned, and this deployment requires signatures"),
        (
            lambda d: d["bindings"].append(entry(principal="User:mallory")),
            "signature matches none of the configured keys",
        ),
        (lambda d: d.update(signature=7), "its signature is not a string"),
    ],
    ids=["unsigned", "a binding added", "a signature not a string"],
)
def test_an_object_not_signed_as_written_is_refused_naming_its_key(forge, problem):
    data = stored()
    forge(data)
    with pytest.raises(AclObjectError) as refused:
        checked_acls(data, KEY, KEYS)
    print(f"refused: {refused.value}")
    assert str(refused.value).startswith(f"{KEY}: ")
    assert problem in str(refused.value)


def test_an_object_signed_for_another_topics_key_is_refused_at_this_one():
    elsewhere = topic_acls_s3_key("dr", "east", "payments")
    data = json.loads(json.dumps(signed_acls_json(EXPORTED, elsewhere, KEYS)))
    with pytest.raises(AclObjectError, match="matches none of the configured keys"):
        checked_acls(data, KEY, KEYS)


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (entry(principal="app"), "binding 0: principal app is not Type:name"),
        (entry(principal="User:app\nUser:root"), "binding 0: principal User:app\\nUser:root"),
        (entry(principal=""), "binding 0: 'principal' is missing"),
        (entry(principal="User:" + "x" * 2000), "over 1024 characters"),
        (entry(pattern_type="PREFIXED"), "pattern_type PREFIXED is not LITERAL"),
        (entry(resource_type="CLUSTER"), "unknown resource_type CLUSTER"),
        (entry(operation="READ_EVERYTHING"), "unknown operation READ_EVERYTHING"),
        (entry(host="\x1b[2J"), "a control character in its host or name"),
        ({**entry(), "name": 5}, "'name' is missing, not a string"),
        ("User:app", "binding 0: not a JSON object"),
    ],
)
def test_a_malformed_binding_refuses_the_object_naming_key_and_binding(bad, problem):
    with pytest.raises(AclObjectError) as refused:
        checked_acls(unsigned_with(bad), KEY, UNSIGNED)
    assert str(refused.value).startswith(f"{KEY}: binding 0: ")
    assert problem in str(refused.value)
    assert "\n" not in str(refused.value)


def test_more_bindings_than_allowed_are_refused_before_any_is_read():
    huge = unsigned_with(*([entry()] * (MAX_BINDINGS + 1)))
    with pytest.raises(AclObjectError, match=f"{MAX_BINDINGS + 1} bindings, over the"):
        checked_acls(huge, KEY, UNSIGNED)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "not a JSON object"),
        ({**unsigned_with(), "format_version": 2}, "format_version 2 is not 1"),
        ({**unsigned_with(), "bindings": {}}, "'bindings' is not a list"),
        ({**unsigned_with(), "topic": None}, "'topic' is missing or not a string"),
    ],
)
def test_an_object_not_in_the_format_is_refused(data, problem):
    with pytest.raises(AclObjectError, match=problem):
        checked_acls(data, KEY, UNSIGNED)


SOURCE = IngressSource(region="east", topic="orders", destination_topic="orders.replayed")
MOVED = GroupSelection(patterns=("app-.*",))


def test_ingress_copies_the_read_side_onto_the_destination_topic_and_moved_groups():
    assert set(destination_copies(EXPORTED, SOURCE, MOVED)) == {
        binding(TOPIC, "orders.replayed", READ),
        binding(TOPIC, "orders.replayed", DESCRIBE, "User:ops"),
        binding(TOPIC, "orders.replayed", READ, "User:intern", DENY),
        binding(GROUP, "app-orders", READ),
    }


def test_write_or_all_in_the_object_is_never_copied_as_write():
    """Egress never writes WRITE; one in the object (an older writer, a forger without
    signing) is dropped, and ALL copies as READ and DESCRIBE only."""
    record = checked_acls(
        unsigned_with(entry(operation="WRITE"), entry(operation="ALL", principal="User:ops")),
        KEY,
        UNSIGNED,
    )
    assert WRITE in {b.operation for b in record.bindings}
    assert set(destination_copies(record, SOURCE, MOVED)) == {
        binding(TOPIC, "orders.replayed", READ, "User:ops"),
        binding(TOPIC, "orders.replayed", DESCRIBE, "User:ops"),
    }


def test_bindings_on_other_topics_and_on_groups_ingress_does_not_move_are_not_copied():
    record = checked_acls(
        unsigned_with(
            entry(name="replicator.checkpoint.ingress"),
            entry(name="payments"),
            entry(resource_type="GROUP", name="replicator-ingress"),
            entry(resource_type="GROUP", name="app-orders"),
        ),
        KEY,
        UNSIGNED,
    )
    assert destination_copies(record, SOURCE, MOVED) == [binding(GROUP, "app-orders", READ)]
    assert destination_copies(record, SOURCE, GroupSelection(patterns=())) == []
