"""The ACL table of docs/security.md parses into the bindings the secured stack applies,
and the secured broker's settings leave nothing open."""

from __future__ import annotations

import stat

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from infra.acls import acl_bindings, parse_acl_table, read_acl_table
from infra.broker import BrokerSpec, server_properties
from infra.errors import StackError
from infra.security import BROKER_USER, SERVICE_USERS, make_material

TABLE = """\
## ACLs each service needs

| service | resource type | name | pattern | operation |
| --- | --- | --- | --- | --- |
| ingress | topic | `<destination topic>` | literal | WRITE |
| ingress | transactional id | `replicator-ingress.` | prefixed | WRITE |
| egress | group | `<application group>` | literal | DESCRIBE |
| egress | cluster | `kafka-cluster` | literal | DESCRIBE |

## Next
"""


def test_the_documented_table_names_every_service_that_talks_to_kafka():
    rows = read_acl_table()
    services = {row.service for row in rows}
    assert services == set(SERVICE_USERS) - {"compaction"}
    assert all(row.operation != "ALL" for row in rows)
    assert not any(row.name == "*" for row in rows)


def test_rows_become_allow_bindings_with_the_placeholders_filled():
    rows = parse_acl_table(TABLE)
    bindings = acl_bindings(
        rows, {"ingress": "u-in", "egress": "u-eg"}, {"a": "a.copy", "b": "b.copy"}, ["app"]
    )
    described = {
        (b.principal, b.restype, b.name, b.resource_pattern_type, b.operation) for b in bindings
    }
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    assert described == {
        ("User:u-in", ResourceType.TOPIC, "a.copy", literal, AclOperation.WRITE),
        ("User:u-in", ResourceType.TOPIC, "b.copy", literal, AclOperation.WRITE),
        (
            "User:u-in",
            ResourceType.TRANSACTIONAL_ID,
            "replicator-ingress.",
            prefixed,
            AclOperation.WRITE,
        ),
        ("User:u-eg", ResourceType.GROUP, "app", literal, AclOperation.DESCRIBE),
        ("User:u-eg", ResourceType.BROKER, "kafka-cluster", literal, AclOperation.DESCRIBE),
    }
    assert len(bindings) == 5
    assert acl_bindings(rows, {"relay": "u-re"}, {"a": "a.copy"}) == []


@pytest.mark.parametrize(
    ("row", "complaint"),
    [
        ("| ingress | topic | `t` | literal | WRITES |", "unknown operation 'WRITES'"),
        ("| ingress | table | `t` | literal | WRITE |", "unknown resource type 'table'"),
        ("| ingress | topic | `t` | glob | WRITE |", "pattern must be literal or prefixed"),
        ("| ingress | topic | t | literal | WRITE |", "the name must be in backticks"),
        ("| ingress | topic | `t` | WRITE |", "expected 5 cells, got 4"),
    ],
)
def test_a_row_that_does_not_parse_is_named(row, complaint):
    table = TABLE.replace("| egress | cluster | `kafka-cluster` | literal | DESCRIBE |", row)
    with pytest.raises(StackError, match="line 8: " + complaint):
        parse_acl_table(table)


def test_a_secured_broker_has_no_plaintext_listener_and_nothing_open(tmp_path):
    material = make_material(tmp_path / "security")
    assert stat.S_IMODE(material.users_file.stat().st_mode) == 0o600
    spec = BrokerSpec("127.0.0.1", 19092, tmp_path / "kafka", security=material)
    properties = server_properties(spec, 19093)
    assert properties["listeners"] == "SASL_SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert properties["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL"
    assert properties["inter.broker.listener.name"] == "SASL_SSL"
    assert properties["sasl.mechanism.controller.protocol"] == "SCRAM-SHA-512"
    assert properties["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert properties["super.users"] == f"User:{BROKER_USER}"
    assert "PLAINTEXT" not in properties["listeners"] + properties["advertised.listeners"]


def test_a_topic_replicated_under_its_own_name_gives_each_binding_once():
    """A relay reads ``<source topic>`` and ``<destination topic>``: with one name for
    both, one binding (the Admin API refuses a request holding the same binding twice)."""
    bindings = acl_bindings(read_acl_table(), dict(SERVICE_USERS), {"t": "t"}, ["app"])
    assert len(bindings) == len(set(bindings))
    assert len(bindings) == len({str(b) for b in bindings})


def test_the_relays_sync_acls_adds_alter_on_the_cluster_only_when_on():
    """CreateAcls needs ALTER on the cluster (Kafka has nothing narrower); a relay without
    ``sync_acls`` is not granted it."""
    plain = read_acl_table()
    synced = read_acl_table(sync_acls=True)
    added = [row for row in synced if row not in plain]
    assert [(r.service, r.resource, r.name, r.operation) for r in added] == [
        ("relay", "cluster", "kafka-cluster", "ALTER")
    ]
    assert not any(row.operation == "ALTER" and row.resource == "cluster" for row in plain)
    relay = {"relay": SERVICE_USERS["relay"]}
    bindings = acl_bindings(synced, relay, {"t": "t.copy"}, ["app"])
    assert len(bindings) == len(acl_bindings(plain, relay, {"t": "t.copy"}, ["app"])) + 1
