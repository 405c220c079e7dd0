"""Which of a source cluster's ACL bindings are copied onto the replicas, and as what
(:func:`replicator.core.kafka.acls.copied_bindings`): the read side only, WRITE never,
ALL as READ and DESCRIBE, each copy literal on the one replica it covers."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from replicator.core.kafka.acls import copied_bindings, describe_binding

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, DESCRIBE, WRITE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.WRITE
TOPICS = {"orders": "orders.relayed", "payments": "payments"}
"""Source topic -> destination topic, one of them renamed."""


def binding(
    resource: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    pattern: ResourcePatternType = LITERAL,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:app",
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def copied(*source: AclBinding, groups: tuple[str, ...] = ()) -> set[AclBinding]:
    copies = copied_bindings(source, TOPICS, groups)
    assert len(copies) == len(set(copies))
    return set(copies)


def test_read_and_describe_on_a_topic_are_copied_onto_its_renamed_destination():
    assert copied(binding(TOPIC, "orders", READ), binding(TOPIC, "orders", DESCRIBE)) == {
        binding(TOPIC, "orders.relayed", READ),
        binding(TOPIC, "orders.relayed", DESCRIBE),
    }


def test_write_and_every_other_operation_but_reading_are_not_copied():
    others = [
        op
        for op in AclOperation
        if op not in (READ, DESCRIBE, AclOperation.ALL, AclOperation.ANY, AclOperation.UNKNOWN)
    ]
    assert WRITE in others
    assert copied(*(binding(TOPIC, "orders", op) for op in others)) == set()
    assert (
        copied(
            binding(GROUP, "app", WRITE),
            binding(GROUP, "app", AclOperation.DELETE),
            groups=("app",),
        )
        == set()
    )


def test_all_becomes_read_and_describe_never_write():
    assert copied(binding(TOPIC, "payments", AclOperation.ALL)) == {
        binding(TOPIC, "payments", READ),
        binding(TOPIC, "payments", DESCRIBE),
    }


def test_a_denial_of_reading_is_copied_as_a_denial():
    """Leaving it out would let the denied principal read the replica through a wider
    ALLOW (a wildcard principal's READ, say)."""
    assert copied(
        binding(TOPIC, "orders", AclOperation.ALL, permission=DENY, principal="User:bad")
    ) == {
        binding(TOPIC, "orders.relayed", READ, permission=DENY, principal="User:bad"),
        binding(TOPIC, "orders.relayed", DESCRIBE, permission=DENY, principal="User:bad"),
    }


def test_principal_and_host_are_kept_as_they_are():
    source = binding(TOPIC, "orders", READ, principal="User:*", host="10.0.0.7")
    assert copied(source) == {
        binding(TOPIC, "orders.relayed", READ, principal="User:*", host="10.0.0.7")
    }


def test_a_prefixed_or_wildcard_pattern_becomes_a_literal_binding_per_replica_it_covers():
    """The same pattern in the destination would also cover topics that are no replica
    (the replicator's own checkpoint topics under ``*``)."""
    assert copied(binding(TOPIC, "ord", READ, pattern=PREFIXED)) == {
        binding(TOPIC, "orders.relayed", READ)
    }
    assert copied(binding(TOPIC, "*", DESCRIBE)) == {
        binding(TOPIC, "orders.relayed", DESCRIBE),
        binding(TOPIC, "payments", DESCRIBE),
    }
    assert copied(binding(TOPIC, "orders.", READ, pattern=PREFIXED)) == set()


def test_topics_and_groups_not_replicated_are_left_out():
    assert copied(binding(TOPIC, "audit", READ), binding(TOPIC, "orders.relayed", READ)) == set()
    assert copied(binding(GROUP, "other", READ), groups=("app-orders",)) == set()


def test_groups_moved_get_their_read_copied_under_the_same_id():
    source = [
        binding(GROUP, "app-orders", READ),
        binding(GROUP, "app-", DESCRIBE, pattern=PREFIXED),
        binding(GROUP, "*", READ, principal="User:ops"),
    ]
    assert copied(*source, groups=("app-orders", "app-payments")) == {
        binding(GROUP, "app-orders", READ),
        binding(GROUP, "app-orders", DESCRIBE),
        binding(GROUP, "app-payments", DESCRIBE),
        binding(GROUP, "app-orders", READ, principal="User:ops"),
        binding(GROUP, "app-payments", READ, principal="User:ops"),
    }


def test_other_resource_types_are_not_copied():
    assert (
        copied(
            binding(ResourceType.BROKER, "kafka-cluster", DESCRIBE),
            binding(ResourceType.TRANSACTIONAL_ID, "*", DESCRIBE),
            groups=("kafka-cluster",),
        )
        == set()
    )


def test_a_binding_is_described_with_its_names_escaped():
    hostile = binding(TOPIC, "orders\nFORGED", READ, principal="User:a\x1b[2J")
    assert describe_binding(hostile) == (
        "ALLOW READ on topic 'orders\\nFORGED' for User:a\\x1b[2J from host *"
    )
