"""``[egress] sync_acls`` and ``[ingress] sync_acls`` on brokers that demand SASL_SSL and
enforce ACLs, in a deployment that signs: an application allowed to read an exported topic
and its group in the source gets the same in the destination through egress, the bucket
and ingress (each running as its own user with exactly the ACLs ``docs/security.md``
lists, the S3 path's row included), its WRITE does not, and it reads the replica as itself
without anyone granting it anything there. A forged ``_acls.json`` of another topic in
the destination's bucket is refused naming its key, and copies nothing.

Ingress runs one replay process here: a refusal is logged once by each process that comes
to lead (owns segment-events partition 0), and with two a rebalance under load moves the
lead and its second ERROR is right, not a repeat per round, which is what the test counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
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
from replicator.core.aws.errors import ObjectNotFoundError
from replicator.core.kafka.acls import MAX_OBJECT_BYTES, describe_binding
from replicator.core.kafka.clients import retry_while_moving
from replicator.core.segments.key import topic_acls_s3_key
from replicator.core.segments.store import SegmentStore
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
from tests.fixtures.signing import SIGNING_KEY, SIGNING_VARIABLE

pytestmark = pytest.mark.integration

TOPIC = "orders"
COPY = "orders.replayed"
FORGED = "payments"
"""A second exported topic whose ``_acls.json`` the test forges in the destination."""
FORGED_COPY = "payments.replayed"
OVERSIZED = "refunds"
"""A third, whose ``_acls.json`` the test replaces with one over the size allowed."""
OVERSIZED_COPY = "refunds.replayed"
GROUP = "app-orders"
RECORDS = 10


def jobs(root: Path) -> str:
    return f"""
[egress]
region = "{SOURCE_REGION}"
checkpoint_location = "{root / "egress-checkpoint"}"
state_dir = "{root / "egress-state"}"
trigger_interval = "250ms"
consumer_groups = ["app-.*"]
sync_acls = true

[egress.topics."{TOPIC}"]
[egress.topics."{FORGED}"]
[egress.topics."{OVERSIZED}"]

[ingress]
region = "{DESTINATION_REGION}"
processes = 1
relist_interval = "1s"
segment_events_partitions = 2
consumer_groups = ["app-.*"]
group_sync_interval = "1s"
sync_acls = true
acl_sync_interval = "1s"

[[ingress.sources]]
region = "{SOURCE_REGION}"
topic = "{TOPIC}"
destination_topic = "{COPY}"
first_segment_delay = "0s"

[[ingress.sources]]
region = "{SOURCE_REGION}"
topic = "{FORGED}"
destination_topic = "{FORGED_COPY}"
first_segment_delay = "0s"

[[ingress.sources]]
region = "{SOURCE_REGION}"
topic = "{OVERSIZED}"
destination_topic = "{OVERSIZED_COPY}"
first_segment_delay = "0s"
"""


def signed(toml: str) -> str:
    """``toml`` signing with the tests' key (``[s3] signing_key``)."""
    assert toml.count('prefix = "data"') == 1
    return toml.replace(
        'prefix = "data"', f'prefix = "data"\nsigning_key = "${{{SIGNING_VARIABLE}}}"'
    )


SOURCE_ACLS = [
    app_binding(ResourceType.TOPIC, TOPIC, AclOperation.READ),
    app_binding(ResourceType.TOPIC, TOPIC, AclOperation.WRITE),
    app_binding(ResourceType.GROUP, GROUP, AclOperation.READ),
    app_binding(ResourceType.TOPIC, TOPIC, AclOperation.ALL, "User:ops"),
    app_binding(ResourceType.TOPIC, FORGED, AclOperation.READ),
    app_binding(ResourceType.TOPIC, OVERSIZED, AclOperation.READ),
]
"""The source's: the application reads and writes ``TOPIC``, reads its group and
``FORGED``; an operator holds ALL on ``TOPIC``."""
EXPECTED = {
    app_binding(ResourceType.TOPIC, COPY, AclOperation.READ),
    app_binding(ResourceType.GROUP, GROUP, AclOperation.READ),
    app_binding(ResourceType.TOPIC, COPY, AclOperation.READ, "User:ops"),
    app_binding(ResourceType.TOPIC, COPY, AclOperation.DESCRIBE, "User:ops"),
}
"""What the destination holds once ingress has copied: nothing of ``FORGED``'s or
``OVERSIZED``'s."""


@dataclass
class Synced:
    stack: SecuredStack
    ingress_log: Path
    forged_key: str
    oversized_key: str


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synced]:
    """Egress run to the end, ``FORGED``'s object forged in the destination's bucket, and
    ingress running until the module's tests are done."""
    root = tmp_path_factory.mktemp("acl-sync-s3")
    material = security_material(root / "stack")
    toml = signed(local_regions("aclsyncs3", ca_location=material.ca_file) + jobs(root))
    path = root / "replicator.toml"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(SIGNING_VARIABLE, SIGNING_KEY)
        with running_stack(path, toml, root / "stack", secured=True) as config:
            stack = SecuredStack(config, path, root, material)
            users = {s: SERVICE_USERS[s] for s in ("egress", "ingress")}
            rows = read_acl_table(s3_sync_acls=True)
            topics = {TOPIC: COPY, FORGED: FORGED_COPY, OVERSIZED: OVERSIZED_COPY}
            for region in (SOURCE_REGION, DESTINATION_REGION):
                apply_acls(stack.admin(region), acl_bindings(rows, users, topics, [GROUP]))
            source_with_a_group(stack)
            apply_acls(stack.admin(SOURCE_REGION), SOURCE_ACLS)
            egress = stack.run("egress", "egress", "--stop-at-end", timeout=600)
            assert egress.returncode == 0, egress.stderr[-3000:]
            forged_key = forge_in_destination(stack)
            oversized_key = oversize_in_destination(stack)
            ingress, log = stack.start("ingress", "ingress")
            try:
                yield Synced(stack, log, forged_key, oversized_key)
            finally:
                ingress.terminate()
                ingress.wait(60)


def source_with_a_group(stack: SecuredStack) -> None:
    """The topics with records, and ``GROUP`` having read half of ``TOPIC``."""
    admin = stack.admin(SOURCE_REGION)
    for topic in (TOPIC, FORGED, OVERSIZED):
        admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=30)
    producer = Producer(stack.admin_settings(SOURCE_REGION))
    for topic in (TOPIC, FORGED, OVERSIZED):
        for i in range(RECORDS):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
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


def forge_in_destination(stack: SecuredStack) -> str:
    """Once bucket replication has carried egress's ``_acls.json`` of ``FORGED`` to the
    destination, a bucket writer without the key adds a grant to it there; its key."""
    key, exported, destination = replicated_acls(stack, FORGED)
    assert exported["signature"], exported
    forged = {**exported, "bindings": [*exported["bindings"]]}
    app = next(b for b in exported["bindings"] if b["principal"] == f"User:{APP}")
    forged["bindings"].append({**app, "principal": "User:mallory"})
    destination.put_json(key, forged)
    return key


def oversize_in_destination(stack: SecuredStack) -> str:
    """``OVERSIZED``'s object replaced, once replicated, by one over the bytes allowed."""
    key, exported, destination = replicated_acls(stack, OVERSIZED)
    destination.put_json(key, {**exported, "padding": "x" * MAX_OBJECT_BYTES})
    return key


def replicated_acls(stack: SecuredStack, topic: str) -> tuple[str, dict[str, Any], SegmentStore]:
    """``topic``'s ``_acls.json`` key, what egress wrote there (granting the application),
    and the destination's store, once bucket replication has carried it there."""
    key = topic_acls_s3_key(stack.config.s3.prefix, SOURCE_REGION, topic)
    exported = SegmentStore.for_region(stack.config, SOURCE_REGION).get_json(key)
    assert f"User:{APP}" in {b["principal"] for b in exported["bindings"]}, exported
    destination = SegmentStore.for_region(stack.config, DESTINATION_REGION)
    deadline = time.monotonic() + 60
    while True:
        try:
            if destination.get_json(key) == exported:
                return key, exported, destination
        except ObjectNotFoundError:
            pass
        assert time.monotonic() < deadline, f"{key} never reached the destination bucket"
        time.sleep(0.5)


def test_an_applications_read_acls_reach_the_destination_through_the_bucket_not_its_write(
    synced,
):
    destination = synced.stack.admin(DESTINATION_REGION)
    wait_for_bindings(destination, EXPECTED, synced.ingress_log)
    time.sleep(3)  # three more rounds: nothing created twice, nothing more
    assert applications(destination) == EXPECTED
    text = synced.ingress_log.read_text()
    services = tuple(f"for User:{user} " for user in SERVICE_USERS.values())
    created = [
        line
        for line in text.splitlines()
        if "created ACL" in line and not any(s in line for s in services)
    ]
    assert len(created) == len(EXPECTED), created  # each once
    assert f"created ACL ALLOW READ on topic '{COPY}' for User:{APP} from host *" in text

    wait_for_group_offset(destination, GROUP, COPY, RECORDS // 2, synced.ingress_log)
    app = app_user(synced.stack)
    assert first_record_read_as(app, GROUP, COPY) == (
        b"k%d" % (RECORDS // 2),
        b"v%d" % (RECORDS // 2),
    )
    assert produce_as(app, COPY) == "TOPIC_AUTHORIZATION_FAILED"


def test_a_forged_acls_object_is_refused_naming_its_key_and_copies_nothing(synced):
    destination = synced.stack.admin(DESTINATION_REGION)
    wait_for_bindings(destination, EXPECTED, synced.ingress_log)
    time.sleep(2)  # two more rounds
    refusals = [
        line
        for line in synced.ingress_log.read_text().splitlines()
        if "ERROR" in line and synced.forged_key in line
    ]
    assert len(refusals) == 1, refusals  # once, though refused again every round
    print(f"ingress refused the forged object: {refusals[0]}")
    assert f"ACLs of {SOURCE_REGION}/{FORGED} not copied" in refusals[0]
    assert "signature matches none of the configured keys" in refusals[0]
    copied = {b for b in applications(destination) if b.name == FORGED_COPY}
    assert copied == set(), sorted(map(describe_binding, copied))


def test_an_oversized_acls_object_is_refused_before_it_is_read(synced):
    destination = synced.stack.admin(DESTINATION_REGION)
    wait_for_bindings(destination, EXPECTED, synced.ingress_log)
    refusals = [
        line
        for line in synced.ingress_log.read_text().splitlines()
        if "ERROR" in line and synced.oversized_key in line
    ]
    assert refusals, synced.ingress_log.read_text()[-3000:]
    print(f"ingress refused the oversized object: {refusals[0]}")
    assert f"ACLs of {SOURCE_REGION}/{OVERSIZED} not copied: size " in refusals[0]
    assert f"over the {MAX_OBJECT_BYTES} allowed" in refusals[0]
    assert not {b for b in applications(destination) if b.name == OVERSIZED_COPY}
