"""Destination topics follow their sources while ingress runs: partitions added to a
source are replayed, configs follow, and a restart after growth works."""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.kafka.topics import destination_configs
from tests.fixtures.ingress import (
    destination_configs_now,
    fast_refresh,
    provenance_offsets,
    segment_batch,
    wait_for,
    wait_ready,
)
from tests.fixtures.stack import DESTINATION

CENTURY_MS = str(100 * 365 * 86_400_000)


def test_partitions_added_while_running_are_replayed_and_configs_follow(local_stack, ingress_setup):
    setup = ingress_setup()
    fast_refresh(setup)
    setup.put_descriptor(4, {"retention.ms": CENTURY_MS}, export_start={p: 0 for p in range(4)})
    for partition in range(4):
        setup.put_segment(partition, 0, 9, segment_batch(0, 10))
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        wait_for(
            lambda: all(len(provenance_offsets(local_stack, setup, p)) == 10 for p in range(4)),
            "the first four partitions were not replayed",
        )
        # The source grows to six partitions and its retention changes (to a century: the
        # records are stamped in 2023, and the broker applies retention to their stamps).
        configs = {"retention.ms": CENTURY_MS, "message.timestamp.type": "LogAppendTime"}
        setup.put_descriptor(6, configs, export_start={p: 0 for p in range(6)})
        for partition in (4, 5):
            setup.put_segment(partition, 0, 4, segment_batch(0, 5))
        setup.put_segment(0, 10, 19, segment_batch(10, 10))
        wait_for(
            lambda: (
                [len(provenance_offsets(local_stack, setup, p)) for p in range(6)]
                == [20, 10, 10, 10, 5, 5]
            ),
            "the added partitions were not replayed",
        )
        wait_for(
            lambda: (
                destination_configs_now(local_stack, setup.destination).get("retention.ms")
                == CENTURY_MS
            ),
            "retention.ms did not follow the source",
        )
    finally:
        service.request_stop()
        runner.join(30)
    assert runner.is_alive() is False
    assert provenance_offsets(local_stack, setup, 0) == list(range(20))
    assert [provenance_offsets(local_stack, setup, p) for p in (4, 5)] == [list(range(5))] * 2
    now = destination_configs_now(local_stack, setup.destination)
    # LogAppendTime would overwrite every source timestamp: the destination keeps CreateTime.
    assert now.get("message.timestamp.type") == "CreateTime"

    # A restart after the growth works and replays nothing twice.
    setup.put_segment(5, 5, 9, segment_batch(5, 5))
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    assert provenance_offsets(local_stack, setup, 5) == list(range(10))
    assert provenance_offsets(local_stack, setup, 4) == list(range(5))


def test_growth_is_followed_while_source_partition_0_is_idle(local_stack, ingress_setup):
    # Partition 0 never had a record: it has no checkpoint, partition 1 has.
    setup = ingress_setup()
    setup.put_descriptor(2, export_start={0: 0, 1: 0})
    setup.put_segment(1, 0, 9, segment_batch(0, 10))
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    assert provenance_offsets(local_stack, setup, 1) == list(range(10))

    setup.put_descriptor(3, export_start={0: 0, 1: 0, 2: 0})
    setup.put_segment(2, 0, 4, segment_batch(0, 5))
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    assert provenance_offsets(local_stack, setup, 2) == list(range(5)), (
        "the partition added to the source was not replayed"
    )
    assert provenance_offsets(local_stack, setup, 1) == list(range(10))


def test_a_destination_that_cannot_grow_is_reported_and_the_rest_keeps_replaying(
    local_stack, ingress_setup, caplog
):
    setup = ingress_setup()
    fast_refresh(setup)
    setup.put_descriptor(2, export_start={0: 0, 1: 0})
    for partition in range(2):
        setup.put_segment(partition, 0, 9, segment_batch(0, 10))
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        wait_for(
            lambda: [len(provenance_offsets(local_stack, setup, p)) for p in range(2)] == [10, 10],
            "the partitions were not replayed",
        )
        deny_alter(local_stack, setup.destination)  # the broker refuses CreatePartitions
        setup.put_descriptor(3, export_start={0: 0, 1: 0, 2: 0})
        setup.put_segment(2, 0, 9, segment_batch(0, 10))
        wait_for(
            lambda: any(
                "now has 3, and adding partitions failed" in r.getMessage() for r in caplog.records
            ),
            "growth failure was not reported",
        )
        setup.put_segment(1, 10, 19, segment_batch(10, 10))
        wait_for(
            lambda: len(provenance_offsets(local_stack, setup, 1)) == 20,
            "partition 1 stopped replaying",
        )
    finally:
        service.request_stop()
        runner.join(30)
    assert not runner.is_alive()
    message = next(
        r.getMessage() for r in caplog.records if "adding partitions failed" in r.getMessage()
    )
    assert f"destination topic {setup.destination} has 2 partitions" in message
    assert "authorization failed" in message.lower(), message


def deny_alter(local_stack, topic: str) -> None:
    """ACLs that let every client (``User:ANONYMOUS`` on the plaintext listener) do all on
    ``topic`` but ALTER: adding partitions to it is refused. (The ALLOW is needed: once a
    resource has an ACL, ``allow.everyone.if.no.acl.found`` no longer opens it.)"""
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:ANONYMOUS",
            "*",
            operation,
            permission,
        )
        for operation, permission in (
            (AclOperation.ALL, AclPermissionType.ALLOW),
            (AclOperation.ALTER, AclPermissionType.DENY),
        )
    ]
    admin = local_stack.admin(DESTINATION)
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def test_destination_configs_keep_create_time_and_room_for_uncompressed_records():
    configs = destination_configs(
        {"message.timestamp.type": "LogAppendTime", "max.message.bytes": "2000000", "x": "1"}
    )
    assert configs["message.timestamp.type"] == "CreateTime"
    assert int(configs["max.message.bytes"]) == 8 * 2_000_000 + 1024**2
    assert "x" not in configs
    assert int(destination_configs({"max.message.bytes": "50000000"})["max.message.bytes"]) == (
        64 * 1024**2
    )
    assert int(destination_configs({})["max.message.bytes"]) == 8 * 1_048_588 + 1024**2


def test_a_source_that_appears_after_ingress_started_is_picked_up(local_stack, ingress_setup):
    setup = ingress_setup()
    fast_refresh(setup)
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()  # nothing in the bucket yet: egress has not started
    try:
        wait_ready(service)
        setup.put_descriptor(2, export_start={0: 0, 1: 0})
        for partition in range(2):
            setup.put_segment(partition, 0, 9, segment_batch(0, 10))
        wait_for(
            lambda: (
                [provenance_offsets(local_stack, setup, p) for p in range(2)]
                == [list(range(10))] * 2
            ),
            "the late source was not replayed",
        )
    finally:
        service.request_stop()
        runner.join(30)
    assert not runner.is_alive()


def test_a_new_source_is_replayed_without_waiting_for_the_relist(local_stack, ingress_setup):
    # Notifications work, so the periodic re-list is rare (as the cost advice says).
    setup = ingress_setup()
    fast_refresh(setup)
    text = setup.path.read_text().replace('relist_interval = "1s"', 'relist_interval = "10m"')
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()  # nothing in the bucket yet: egress has not started
    try:
        wait_ready(service)
        # As egress writes a new topic: the descriptor first, then the first segments,
        # then (seconds later) the export starts in the descriptor.
        setup.put_descriptor(2, export_start={})
        for partition in range(2):
            setup.put_segment(partition, 0, 9, segment_batch(0, 10))
        time.sleep(2)  # the workers exist and wait for the export starts
        setup.put_descriptor(2, export_start={0: 0, 1: 0})
        wait_for(
            lambda: (
                [provenance_offsets(local_stack, setup, p) for p in range(2)]
                == [list(range(10))] * 2
            ),
            "the new source was not replayed before the re-list",
            timeout=30,
        )
    finally:
        service.request_stop()
        runner.join(30)
    assert not runner.is_alive()
