"""Ingress under the broker's own quota: a ``producer_byte_rate`` on ingress's user in the
destination cluster (set as docs/operations/throttling.md shows, with Kafka's ``kafka-configs``
tool as the administrator) holds its replay back, and it stays exactly once: no
transaction times out or is fenced, every source offset arrives once and in order, the
throttle shows in ``replicator_ingress_throttled_seconds`` while it runs, and ``replicator
status`` says ingress is throttled. The relay under a ``producer_byte_rate`` on its user
likewise: every record once, and ``status`` says the relay is throttled in its rows.

Its own secured stack (the ``secured`` fixture of tests/fixtures/secured.py).
"""

from __future__ import annotations

import http.client
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from infra.acls import acl_bindings, apply_acls, read_acl_table
from infra.broker import java, kafka_libs
from infra.local_config import DESTINATION_REGION, SOURCE_REGION
from infra.ports import free_port
from infra.security import (
    BROKER_USER,
    SASL_MECHANISM,
    SECURITY_PROTOCOL,
    SERVICE_USERS,
    jaas,
)
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore
from tests.fixtures.records import plain
from tests.fixtures.secured import (
    INGRESS_COPY,
    PARTITIONS,
    RELAY_COPY,
    TOPIC,
    SecuredStack,
    records,
)

pytestmark = pytest.mark.integration

QUOTA_SOURCE = "payments"
QUOTA_COPY = "payments.replayed"
RATE = 100 * 1024
"""producer_byte_rate of ingress's user: bytes a second."""
SEGMENTS = 5
RECORDS_PER_SEGMENT = 150
VALUE_BYTES = 1024
"""2 partitions x 5 segments x 150 records of 1 KiB: 1.5 MiB, 15 s at the quota. The
broker measures a rate over its quota window (11 one-second samples by default), so it
throttles only what is more than the window's worth of the quota."""
TRANSACTION_TIMEOUT = 30
"""By docs/operations/throttling.md's guidance: a transaction holds at most a row group (here a
150 KiB segment), two writers share the quota: 3 s at the quota, well within."""


def set_producer_quota(secured: SecuredStack, user: str, rate: int) -> None:
    """``kafka-configs --alter --add-config producer_byte_rate=<rate> --entity-type users
    --entity-name <user>`` on the destination cluster, as its administrator (Kafka's own
    tool: the project sets no quota itself)."""
    settings = secured.root / "quota-admin.properties"
    settings.write_text(
        f"security.protocol={SECURITY_PROTOCOL}\n"
        f"sasl.mechanism={SASL_MECHANISM}\n"
        f"sasl.jaas.config={jaas(BROKER_USER, secured.material.password(BROKER_USER))}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.material.ca_file}\n"
    )
    done = subprocess.run(
        [
            java(),
            "-Xmx256m",
            "-cp",
            str(kafka_libs() / "*"),
            "kafka.admin.ConfigCommand",
            "--bootstrap-server",
            secured.config.region(DESTINATION_REGION).kafka.bootstrap_servers,
            "--command-config",
            str(settings),
            "--alter",
            "--add-config",
            f"producer_byte_rate={rate}",
            "--entity-type",
            "users",
            "--entity-name",
            user,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def throttled_seconds(port: int) -> float:
    """``replicator_ingress_throttled_seconds_total`` at ingress's metrics port (summed
    over its processes); 0 when it does not answer yet, or ends mid-answer as it exits."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except (OSError, http.client.HTTPException):
        return 0.0
    found = re.findall(r"^replicator_ingress_throttled_seconds_total(?:\{.*\})? (\S+)$", text, re.M)
    return sum(float(value) for value in found)


def quota_config(secured: SecuredStack, metrics_port: int) -> Path:
    """The stack's config with ingress replaying :data:`QUOTA_SOURCE`, serving metrics."""
    path = secured.root / "quota.toml"
    path.write_text(
        secured.path.read_text()
        .replace(
            f'topic = "{TOPIC}"\ndestination_topic = "{INGRESS_COPY}"',
            f'topic = "{QUOTA_SOURCE}"\ndestination_topic = "{QUOTA_COPY}"',
        )
        .replace(
            'relist_interval = "1s"\n',
            'relist_interval = "1s"\n'
            f'transaction_timeout = "{TRANSACTION_TIMEOUT}s"\n'
            "processes = 1\n"
            f'metrics_port = {metrics_port}\nmetrics_host = "127.0.0.1"\n',
        )
    )
    return path


def test_ingress_under_a_producer_byte_rate_quota_stays_exactly_once_and_shows_the_throttle(
    secured: SecuredStack,
):
    users = {service: SERVICE_USERS[service] for service in ("ingress", "failover")}
    apply_acls(
        secured.admin(DESTINATION_REGION),
        acl_bindings(read_acl_table(), users, {QUOTA_SOURCE: QUOTA_COPY}),
    )
    store = SegmentStore.for_region(secured.config, DESTINATION_REGION)
    descriptor = describe(QUOTA_SOURCE, PARTITIONS, {}, SOURCE_REGION, {0: 0, 1: 0})
    store.put_json(topic_descriptor_s3_key("data", SOURCE_REGION, QUOTA_SOURCE), descriptor)
    for partition in range(PARTITIONS):
        for first in range(0, SEGMENTS * RECORDS_PER_SEGMENT, RECORDS_PER_SEGMENT):
            last = first + RECORDS_PER_SEGMENT - 1
            key = SegmentKey(SOURCE_REGION, QUOTA_SOURCE, partition, 0, first, last)
            store.write_segment(key, plain(RECORDS_PER_SEGMENT, first, VALUE_BYTES))
    set_producer_quota(secured, SERVICE_USERS["ingress"], RATE)

    port = free_port()
    path = quota_config(secured, port)
    started = time.monotonic()
    ingress, log = secured.start("ingress", "ingress", "--stop-at-end", config=path)
    seen = 0.0
    try:
        while ingress.poll() is None:
            seen = max(seen, throttled_seconds(port))
            assert time.monotonic() - started < 120, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        if ingress.poll() is None:
            ingress.terminate()
            ingress.wait(60)
    elapsed = time.monotonic() - started
    text = log.read_text()
    assert ingress.returncode == 0, text[-3000:]
    print(f"ingress under {RATE} B/s: {elapsed:.1f} s, throttled {seen:.1f} s (metric)")

    # The broker held ingress back, and its metric said so while it ran.
    assert seen > 0, text[-3000:]
    # No transaction timed out, was fenced or aborted; no worker was restarted.
    for sign in ("timed out", "TIMED_OUT", "FENCED", "EPOCH", "another instance", "abort"):
        assert sign not in text, f"{sign!r} in the ingress log:\n{text[-3000:]}"
    assert "restarting the worker" not in text and "halted" not in text, text[-3000:]
    # Every source offset exactly once, in order (read_committed).
    expected = [
        (b"key-%d" % i, (b"%08d" % i) * (VALUE_BYTES // 8))
        for i in range(SEGMENTS * RECORDS_PER_SEGMENT)
    ]
    assert records(secured, DESTINATION_REGION, QUOTA_COPY) == [expected] * PARTITIONS

    # status, as the operator's user, says ingress is being throttled.
    status = secured.run("failover", "status", config=path)
    assert status.returncode == 0, status.stderr[-3000:]
    rows = [line for line in status.stdout.splitlines() if QUOTA_SOURCE in line]
    print("\n".join(rows))
    assert len(rows) == PARTITIONS, status.stdout
    assert any("throttled: the broker held ingress back" in row for row in rows), status.stdout


RELAY_QUOTA_SOURCE = "refunds"
RELAY_QUOTA_COPY = "refunds.relayed"
RELAY_RATE = 40 * 1024
"""producer_byte_rate of the relay's user: bytes a second."""
RELAY_RECORDS = 300
"""Per partition, of :data:`VALUE_BYTES`: 600 KiB in all, 15 s at the quota, which the
broker's 11-sample window throttles by a few seconds (see :data:`VALUE_BYTES`)."""


def test_status_says_the_relay_is_throttled_under_a_producer_byte_rate_quota(
    secured: SecuredStack,
):
    users = {service: SERVICE_USERS[service] for service in ("relay", "failover")}
    bindings = acl_bindings(read_acl_table(), users, {RELAY_QUOTA_SOURCE: RELAY_QUOTA_COPY})
    for region in (SOURCE_REGION, DESTINATION_REGION):
        apply_acls(secured.admin(region), bindings)
    admin = secured.admin(SOURCE_REGION)
    admin.create_topics([NewTopic(RELAY_QUOTA_SOURCE, PARTITIONS)])[RELAY_QUOTA_SOURCE].result(
        timeout=30
    )
    producer = Producer(secured.admin_settings(SOURCE_REGION))
    expected = [(b"key-%d" % i, (b"%08d" % i) * (VALUE_BYTES // 8)) for i in range(RELAY_RECORDS)]
    for partition in range(PARTITIONS):
        for key, value in expected:
            producer.produce(RELAY_QUOTA_SOURCE, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0
    set_producer_quota(secured, SERVICE_USERS["relay"], RELAY_RATE)
    path = secured.root / "relay-quota.toml"
    path.write_text(
        secured.path.read_text().replace(
            f'source_topic = "{TOPIC}"\ndestination_topic = "{RELAY_COPY}"',
            f'source_topic = "{RELAY_QUOTA_SOURCE}"\ndestination_topic = "{RELAY_QUOTA_COPY}"',
        )
    )

    started = time.monotonic()
    relay = secured.run("relay", "relay", "--stop-at-end", config=path, timeout=180)
    print(f"relay under {RELAY_RATE} B/s: {time.monotonic() - started:.1f} s")
    assert relay.returncode == 0, relay.stderr[-3000:]
    assert records(secured, DESTINATION_REGION, RELAY_QUOTA_COPY) == [expected] * PARTITIONS

    # status, as the operator's user, says the relay caught up and was throttled.
    status = secured.run("failover", "status", config=path)
    assert status.returncode == 0, status.stderr[-3000:]
    rows = [line for line in status.stdout.splitlines() if f"/{RELAY_QUOTA_SOURCE} " in line]
    print("\n".join(rows))
    assert len(rows) == PARTITIONS, status.stdout
    assert all(f"{RELAY_QUOTA_COPY}/" in row and "caught up" in row for row in rows), status.stdout
    assert any("throttled: the broker held the relay back" in row for row in rows), status.stdout
