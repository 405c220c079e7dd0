"""The services on brokers that demand SASL_SSL (SCRAM-SHA-512) on every listener and
enforce ACLs with nothing allowed by default: each service runs as its own user holding
exactly the ACLs of the table in ``docs/security.md`` (parsed and applied here, so the
table cannot drift); then what a missing ACL, a wrong password and an untrusted
certificate look like.

One secured stack for the module (its own two brokers, S3 and replication); the tests run
in order on it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from infra.acls import acl_bindings, apply_acls, read_acl_table
from infra.local_config import (
    DESTINATION_REGION,
    SOURCE_REGION,
)
from infra.security import PASSWORD_ENV, SERVICE_USERS, make_ca
from replicator.core.kafka.checkpoints import Checkpoint, WriteTarget, checkpoint_partition
from replicator.core.kafka.clients import ensure_service_topic
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore
from tests.fixtures.records import plain
from tests.fixtures.secured import (
    INGRESS_COPY,
    PARTITIONS,
    RELAY_COPY,
    RESTORED_COPY,
    TOPIC,
    SecuredStack,
    records,
)

pytestmark = pytest.mark.integration

DENIED_SOURCE = "audit"
"""Relayed into :data:`DENIED_COPY`, on which the relay's user is denied everything."""
DENIED_COPY = "audit.relayed"
REVOKED_SOURCE = "ledger"
"""Relayed into :data:`REVOKED_COPY`, whose WRITE ACL is revoked while the relay runs."""
REVOKED_COPY = "ledger.relayed"
JOURNAL = "journal"
"""Its segments are placed in the destination's bucket by the test (as replication
would); replayed into :data:`JOURNAL_COPY`, whose WRITE ACL is revoked while ingress runs."""
JOURNAL_COPY = "journal.replayed"
RECORDS = 200


def produce(stack: SecuredStack, topic: str, count: int) -> None:
    admin = stack.admin(SOURCE_REGION)
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(timeout=30)
    producer = Producer(stack.admin_settings(SOURCE_REGION))
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def wait_for_replication(stack: SecuredStack, timeout: float = 60) -> None:
    from infra.stack import Stack, StackSpec

    s3 = Stack(StackSpec.from_config(stack.config, stack.root / "stack")).s3_client()

    def keys(region: str) -> set[str]:
        listing = s3.list_objects_v2(
            Bucket=stack.config.bucket(region), Prefix=f"data/{SOURCE_REGION}/{TOPIC}/"
        )
        return {item["Key"] for item in listing.get("Contents", [])}

    deadline = time.monotonic() + timeout
    while not keys(SOURCE_REGION) or keys(DESTINATION_REGION) != keys(SOURCE_REGION):
        assert time.monotonic() < deadline, "replication did not copy every segment"
        time.sleep(0.5)


def test_each_service_runs_as_its_own_user_with_only_the_documented_acls(secured):
    produce(secured, TOPIC, RECORDS)
    source = records(secured, SOURCE_REGION, TOPIC)
    assert sum(map(len, source)) == RECORDS

    # The relay runs while egress does (they share nothing); ingress after replication.
    relay = secured.start("relay", "relay", "--stop-at-end")
    egress = secured.run("egress", "egress", "--stop-at-end", timeout=600)
    assert egress.returncode == 0, egress.stderr[-3000:]
    wait_for_replication(secured)
    ingress = secured.run("ingress", "ingress", "--stop-at-end")
    assert ingress.returncode == 0, ingress.stderr[-3000:]
    assert relay[0].wait(300) == 0, relay[1].read_text()[-3000:]

    # Exactly once, in order, per partition: read_committed readers of both copies.
    assert records(secured, DESTINATION_REGION, INGRESS_COPY) == source
    assert records(secured, DESTINATION_REGION, RELAY_COPY) == source

    status = secured.run("failover", "status")
    assert status.returncode == 0, status.stderr[-3000:]
    assert TOPIC in status.stdout and "unreachable" not in status.stdout, status.stdout
    failover = secured.run("failover", "failover")
    assert failover.returncode in (0, 1), failover.stderr[-3000:]
    assert "not reached" not in failover.stdout and "AUTHORIZATION" not in failover.stdout

    # Restore from the destination's bucket into a topic of its own, as its own user.
    restore = secured.run(
        "restore",
        "restore",
        "--topic",
        TOPIC,
        "--from-region",
        SOURCE_REGION,
        "--into-region",
        DESTINATION_REGION,
        "--into-topic",
        RESTORED_COPY,
        timeout=600,
    )
    assert restore.returncode == 0, restore.stdout[-2000:] + restore.stderr[-3000:]
    assert records(secured, DESTINATION_REGION, RESTORED_COPY) == source


def forged_checkpoint_error(secured: SecuredStack, service: str, topic: str) -> str:
    """The error the broker gives ``service``'s user producing a plain record under a key
    of ingress's checkpoints into ``topic`` (empty: it was written)."""
    ingress = secured.config.ingress
    assert ingress is not None
    forged = Checkpoint(
        INGRESS_COPY, 0, SOURCE_REGION, TOPIC, 10_000, -1, time.time(), writer="ingress"
    )
    target = WriteTarget(SourcePartition(SOURCE_REGION, TOPIC, 0), INGRESS_COPY, 0)
    user = SERVICE_USERS[service]
    kafka = {
        "bootstrap.servers": secured.config.region(DESTINATION_REGION).kafka.bootstrap_servers,
        **secured.material.client_settings(user),
    }
    producer = Producer(kafka)
    errors: list[str] = []
    producer.produce(
        topic,
        key=target.checkpoint_key.encode(),
        value=forged.to_json(),
        partition=checkpoint_partition(target.checkpoint_key, ingress.checkpoint_partitions),
        on_delivery=lambda error, _message: errors.append(error.name()) if error else None,
    )
    producer.flush(30)
    return errors[0] if errors else ""


def test_only_ingress_user_may_write_ingress_checkpoints(secured):
    """A checkpoint is where a writer resumes: the relay's and restore's users, which
    write checkpoints too, are refused by the broker on ingress's checkpoint topic (each
    service has its own), as is failover's, which only reads it."""
    ingress = secured.config.ingress
    assert ingress is not None
    # As ingress creates it at start. Not left to another test's ingress run: a test of
    # this module taken by another xdist worker gets a stack of its own, in which a user
    # that may describe the topic (failover's) would get UNKNOWN_TOPIC_OR_PART instead.
    ensure_service_topic(
        secured.admin(DESTINATION_REGION),
        ingress.checkpoint_topic,
        ingress.checkpoint_partitions,
        "ingress.checkpoint_partitions",
        {"cleanup.policy": "compact"},
    )
    for service in ("relay", "restore", "failover"):
        refused = forged_checkpoint_error(secured, service, ingress.checkpoint_topic)
        written = f"{service}'s user wrote a checkpoint into {ingress.checkpoint_topic}"
        assert refused == "TOPIC_AUTHORIZATION_FAILED", refused or written


def test_a_denied_destination_topic_halts_its_source_naming_operation_and_topic(secured):
    """The relay's destination topic exists, and the relay's user is denied every
    operation on it while allowed to create topics cluster-wide (as operators often
    grant): the relay stops at once with the broker's error code, the operation and the
    topic, instead of waiting 30 s for leaders of a topic it cannot see."""
    produce(secured, DENIED_SOURCE, 10)
    admin = secured.admin(DESTINATION_REGION)
    admin.create_topics([NewTopic(DENIED_COPY, PARTITIONS)])[DENIED_COPY].result(timeout=30)
    user = f"User:{SERVICE_USERS['relay']}"
    rows = read_acl_table()
    granted = acl_bindings(rows, {"relay": SERVICE_USERS["relay"]}, {DENIED_SOURCE: DENIED_COPY})
    apply_acls(secured.admin(SOURCE_REGION), granted)
    cluster_create = AclBinding(
        ResourceType.BROKER,
        "kafka-cluster",
        ResourcePatternType.LITERAL,
        user,
        "*",
        AclOperation.CREATE,
        AclPermissionType.ALLOW,
    )
    deny = AclBinding(
        ResourceType.TOPIC,
        DENIED_COPY,
        ResourcePatternType.LITERAL,
        user,
        "*",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    apply_acls(admin, [*granted, cluster_create, deny])
    path = secured.root / "denied.toml"
    path.write_text(
        secured.path.read_text().replace(
            f'source_topic = "{TOPIC}"\ndestination_topic = "{RELAY_COPY}"',
            f'source_topic = "{DENIED_SOURCE}"\ndestination_topic = "{DENIED_COPY}"',
        )
    )
    started = time.monotonic()
    relay = secured.run("relay", "relay", "--stop-at-end", config=path, timeout=180)
    elapsed = time.monotonic() - started
    printed = relay.stderr.strip().splitlines()[-1]
    print(f"relay without access to {DENIED_COPY} printed: {printed}")
    assert relay.returncode == 1
    assert (
        f"not allowed to Describe topic '{DENIED_COPY}' (TOPIC_AUTHORIZATION_FAILED)" in printed
    ), printed
    assert "no leader" not in relay.stderr
    assert elapsed < 25, f"took {elapsed:.0f} s"


def relay_config(secured: SecuredStack, name: str, source: str, destination: str) -> Path:
    """The stack's config with the relay's one topic replaced."""
    path = secured.root / name
    path.write_text(
        secured.path.read_text().replace(
            f'source_topic = "{TOPIC}"\ndestination_topic = "{RELAY_COPY}"',
            f'source_topic = "{source}"\ndestination_topic = "{destination}"',
        )
    )
    return path


def wait_for_records(secured: SecuredStack, topic: str, count: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            held = sum(map(len, records(secured, DESTINATION_REGION, topic)))
        except Exception:  # the topic may not exist yet
            held = -1
        if held >= count:
            return
        assert time.monotonic() < deadline, f"{topic} holds {held} of {count} records"
        time.sleep(0.5)


def revoke_write(secured: SecuredStack, service: str, topic: str) -> AclBinding:
    """Delete ``service``'s WRITE ACL on the destination's ``topic``; returns it, to grant
    again."""
    write_acl = (
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        f"User:{SERVICE_USERS[service]}",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    admin = secured.admin(DESTINATION_REGION)
    for future in admin.delete_acls([AclBindingFilter(*write_acl)]).values():
        assert future.result(timeout=30), f"{service}'s WRITE ACL on {topic} was not there"
    return AclBinding(*write_acl)


def assert_halted_on_revoked_write(
    service: str, process: subprocess.Popen[bytes], log: Path, topic: str, secured: SecuredStack
) -> None:
    """Every partition of ``service`` (running, logging to ``log``) halts with the broker's
    code naming ``topic``, which holds the 100 records written before the revocation; and
    it does not loop: no worker restarted in the 5 s after."""
    deadline = time.monotonic() + 60
    while log.read_text().count("partition halted") < PARTITIONS:
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)
    restarts = log.read_text().count("restarting the worker")
    time.sleep(5)
    text = log.read_text()
    assert text.count("restarting the worker") == restarts, text[-3000:]
    print(f"{service} after its WRITE was revoked logged: {text.splitlines()[-1]}")
    assert "TOPIC_AUTHORIZATION_FAILED" in text and topic in text, text[-3000:]
    assert sum(map(len, records(secured, DESTINATION_REGION, topic))) == 100


def test_a_write_acl_revoked_while_the_relay_runs_halts_its_partitions_and_loses_nothing(
    secured,
):
    """The relay's WRITE on its destination topic is revoked mid-run: each partition halts
    with the broker's code and the topic (asking again gets the same answer), nothing more
    becomes visible; with the ACL granted again, a restarted relay relays the rest, every
    source record once, in order."""
    produce(secured, REVOKED_SOURCE, 100)
    user = SERVICE_USERS["relay"]
    granted = acl_bindings(read_acl_table(), {"relay": user}, {REVOKED_SOURCE: REVOKED_COPY})
    for region in (SOURCE_REGION, DESTINATION_REGION):
        apply_acls(secured.admin(region), granted)
    path = relay_config(secured, "revoked.toml", REVOKED_SOURCE, REVOKED_COPY)
    relay, log = secured.start("relay", "relay", config=path)
    try:
        wait_for_records(secured, REVOKED_COPY, 100)
        write_acl = revoke_write(secured, "relay", REVOKED_COPY)
        producer = Producer(secured.admin_settings(SOURCE_REGION))
        for i in range(100, 200):
            producer.produce(REVOKED_SOURCE, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        assert_halted_on_revoked_write("relay", relay, log, REVOKED_COPY, secured)
    finally:
        relay.terminate()
        relay.wait(60)

    apply_acls(secured.admin(DESTINATION_REGION), [write_acl])
    again = secured.run("relay", "relay", "--stop-at-end", config=path, timeout=180)
    assert again.returncode == 0, again.stderr[-3000:]
    assert records(secured, DESTINATION_REGION, REVOKED_COPY) == records(
        secured, SOURCE_REGION, REVOKED_SOURCE
    )


def test_a_write_acl_revoked_while_ingress_runs_halts_its_partitions_and_loses_nothing(secured):
    """Ingress's WRITE on its destination topic is revoked between two segments: each
    partition halts with the broker's code and the topic instead of its worker being
    restarted every few seconds; nothing more becomes visible; with the ACL granted
    again, ingress replays the rest, every source offset once, in order."""
    user = {"ingress": SERVICE_USERS["ingress"]}
    apply_acls(
        secured.admin(DESTINATION_REGION),
        acl_bindings(read_acl_table(), user, {JOURNAL: JOURNAL_COPY}),
    )
    store = SegmentStore.for_region(secured.config, DESTINATION_REGION)
    descriptor = describe(JOURNAL, PARTITIONS, {}, SOURCE_REGION, {0: 0, 1: 0})
    store.put_json(topic_descriptor_s3_key("data", SOURCE_REGION, JOURNAL), descriptor)

    def put_segments(start: int, count: int) -> None:
        for partition in range(PARTITIONS):
            key = SegmentKey(SOURCE_REGION, JOURNAL, partition, 0, start, start + count - 1)
            store.write_segment(key, plain(count, start))

    put_segments(0, 50)
    path = secured.root / "journal.toml"
    path.write_text(
        secured.path.read_text().replace(
            f'topic = "{TOPIC}"\ndestination_topic = "{INGRESS_COPY}"',
            f'topic = "{JOURNAL}"\ndestination_topic = "{JOURNAL_COPY}"',
        )
    )
    ingress, log = secured.start("ingress", "ingress", config=path)
    try:
        wait_for_records(secured, JOURNAL_COPY, 100)
        write_acl = revoke_write(secured, "ingress", JOURNAL_COPY)
        put_segments(50, 50)
        assert_halted_on_revoked_write("ingress", ingress, log, JOURNAL_COPY, secured)
    finally:
        ingress.terminate()
        ingress.wait(60)

    apply_acls(secured.admin(DESTINATION_REGION), [write_acl])
    again = secured.run("ingress", "ingress", "--stop-at-end", config=path)
    assert again.returncode == 0, again.stderr[-3000:]
    expected = [(b"key-%d" % i, (b"%08d" % i) * 12) for i in range(100)]
    assert records(secured, DESTINATION_REGION, JOURNAL_COPY) == [expected] * PARTITIONS


def _refused(secured: SecuredStack, env: dict[str, str], config: Path | None = None):
    started = time.monotonic()
    done = secured.run("ingress", "ingress", env=env, config=config, timeout=120)
    return done, time.monotonic() - started


def test_a_wrong_password_stops_the_service_with_one_clear_error(secured):
    done, elapsed = _refused(secured, {PASSWORD_ENV: "not-the-password"})
    printed = done.stderr.strip().splitlines()[-1]
    print(f"ingress with a wrong password printed: {printed}")
    assert done.returncode == 1
    assert f"region {DESTINATION_REGION}" in printed, printed
    assert f"as user '{SERVICE_USERS['ingress']}'" in printed, printed
    assert "SASL authentication failed (_AUTHENTICATION" in printed, printed
    assert "not-the-password" not in done.stderr + done.stdout
    assert elapsed < 30, f"took {elapsed:.0f} s"


def test_an_untrusted_broker_certificate_stops_the_service_with_one_clear_error(secured):
    other_ca = make_ca(secured.root / "other-ca", "not the stack's CA")
    path = secured.root / "untrusted.toml"
    path.write_text(secured.path.read_text().replace(str(secured.material.ca_file), str(other_ca)))
    done, elapsed = _refused(secured, {}, path)
    printed = done.stderr.strip().splitlines()[-1]
    print(f"ingress trusting another CA printed: {printed}")
    assert done.returncode == 1
    assert f"region {DESTINATION_REGION}" in printed, printed
    assert "the TLS handshake failed (_SSL" in printed, printed
    assert "certificate verify failed" in printed, printed
    assert elapsed < 30, f"took {elapsed:.0f} s"
