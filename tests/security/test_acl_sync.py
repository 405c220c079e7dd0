"""``[relay] sync_acls`` on brokers that demand SASL_SSL and enforce ACLs: an application
allowed to read a relayed topic and its group in the source gets the same in the
destination from the relay (running as its own user with exactly the ACLs
``docs/security.md`` lists for it, the option's row included), its WRITE does not, and it
reads the replica as itself without anyone granting it anything there.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    NewTopic,
    ResourceType,
)

from infra.acls import acl_bindings, apply_acls, read_acl_table
from infra.local_config import (
    DESTINATION_REGION,
    SOURCE_REGION,
    local_regions,
    running_stack,
    security_material,
)
from infra.security import SERVICE_USERS
from replicator.core.kafka.clients import retry_while_moving
from tests.fixtures.application import (
    APP,
    app_binding,
    app_user,
    applications,
    first_record_read_as,
    produce_as,
    wait_for_bindings,
    wait_for_group_offset,
)
from tests.fixtures.secured import SecuredStack

pytestmark = pytest.mark.integration

TOPIC = "orders"
COPY = "orders.relayed"
GROUP = "app-orders"
RECORDS = 10


def jobs() -> str:
    return f"""
[relay]
sources = ["{SOURCE_REGION}"]
destination = "{DESTINATION_REGION}"
health_check_interval = "300ms"
consumer_groups = ["app-.*"]
group_sync_interval = "1s"
sync_acls = true
acl_sync_interval = "1s"

[[relay.topics]]
source_topic = "{TOPIC}"
destination_topic = "{COPY}"
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredStack]:
    root = tmp_path_factory.mktemp("acl-sync")
    material = security_material(root / "stack")
    toml = local_regions("aclsync", ca_location=material.ca_file) + jobs()
    path = root / "replicator.toml"
    with running_stack(path, toml, root / "stack", secured=True) as config:
        stack = SecuredStack(config, path, root, material)
        for region in (SOURCE_REGION, DESTINATION_REGION):
            apply_acls(stack.admin(region), relay_bindings(sync_acls=False))
        source_with_a_group(stack)
        apply_acls(stack.admin(SOURCE_REGION), SOURCE_ACLS)
        yield stack


def relay_bindings(*, sync_acls: bool) -> list[AclBinding]:
    """The relay's ACLs as docs/security.md lists them, with or without the option's."""
    relay = {"relay": SERVICE_USERS["relay"]}
    return acl_bindings(read_acl_table(sync_acls=sync_acls), relay, {TOPIC: COPY}, [GROUP])


SOURCE_ACLS = [
    app_binding(ResourceType.TOPIC, TOPIC, AclOperation.READ),
    app_binding(ResourceType.TOPIC, TOPIC, AclOperation.WRITE),
    app_binding(ResourceType.GROUP, GROUP, AclOperation.READ),
    app_binding(ResourceType.TOPIC, TOPIC, AclOperation.ALL, "User:ops"),
]
"""The source's: the application reads and writes the topic and reads its group; an
operator holds ALL on the topic."""


def source_with_a_group(stack: SecuredStack) -> None:
    """The source topic with records, and ``GROUP`` having read half of partition 0."""
    admin = stack.admin(SOURCE_REGION)
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(timeout=30)
    producer = Producer(stack.admin_settings(SOURCE_REGION))
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({**stack.admin_settings(SOURCE_REGION), "group.id": GROUP})
    try:
        offsets = [KafkaTopicPartition(TOPIC, 0, RECORDS // 2)]
        # The stack's brokers are new: their offsets topic may still be loading.
        done = (
            retry_while_moving(lambda: consumer.commit(offsets=offsets, asynchronous=False)) or []
        )
        assert all(tp.error is None for tp in done), done
    finally:
        consumer.close()


def test_without_alter_on_the_cluster_the_sync_names_the_grant_and_the_relay_goes_on(secured):
    """The relay's user holds every ACL of the main table but not the option's ALTER on
    the cluster: each round is refused and says what to grant; nothing is copied, and the
    relay keeps relaying."""
    destination = secured.admin(DESTINATION_REGION)
    relay, log = secured.start("relay", "relay")
    try:
        deadline = time.monotonic() + 60
        while "ACL sync failed" not in log.read_text():
            assert relay.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        refusal = next(line for line in log.read_text().splitlines() if "ACL sync failed" in line)
        print(f"the relay without ALTER on the cluster logged: {refusal}")
        assert "(CLUSTER_AUTHORIZATION_FAILED): sync_acls needs ALTER on the cluster" in refusal
        assert applications(destination) == set()
        wait_for_group_offset(destination, GROUP, COPY, RECORDS // 2, log)  # the relay goes on
        assert relay.poll() is None, log.read_text()[-3000:]
    finally:
        relay.terminate()
        relay.wait(60)


def test_an_applications_read_acls_reach_the_destination_and_its_write_does_not(secured):
    extra = [b for b in relay_bindings(sync_acls=True) if b not in relay_bindings(sync_acls=False)]
    apply_acls(secured.admin(DESTINATION_REGION), extra)
    read = AclOperation.READ
    expected = {
        app_binding(ResourceType.TOPIC, COPY, read),
        app_binding(ResourceType.GROUP, GROUP, read),
        app_binding(ResourceType.TOPIC, COPY, read, "User:ops"),
        app_binding(ResourceType.TOPIC, COPY, AclOperation.DESCRIBE, "User:ops"),
    }
    destination = secured.admin(DESTINATION_REGION)
    relay, log = secured.start("relay", "relay")
    try:
        wait_for_bindings(destination, expected, seconds=60)
        time.sleep(3)  # three more rounds: nothing created twice, nothing more
        assert applications(destination) == expected
        text = log.read_text()
        assert relay.poll() is None, text[-3000:]
        created = [line for line in text.splitlines() if "created ACL" in line]
        assert len(created) == len(expected), created
        assert f"created ACL ALLOW READ on topic '{COPY}' for User:{APP} from host *" in text

        wait_for_group_offset(destination, GROUP, COPY, RECORDS // 2, log)
        app = app_user(secured)
        assert first_record_read_as(app, GROUP, COPY) == (
            b"k%d" % (RECORDS // 2),
            b"v%d" % (RECORDS // 2),
        )
        assert produce_as(app, COPY) == "TOPIC_AUTHORIZATION_FAILED"
    finally:
        relay.terminate()
        relay.wait(60)
