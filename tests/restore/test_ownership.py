"""Which services of a config write a destination topic (pure): restore refuses to write
beside them while they run, whatever the topic holds."""

from __future__ import annotations

from replicator.core.config import IngressConfig, IngressSource, RelayConfig, RelayTopic
from restore.ownership import ingress_writes, relay_writes, source_writes


def test_a_named_source_writes_its_destination_only():
    assert source_writes(IngressSource(region="east", topic="orders"), "orders")
    renamed = IngressSource(region="east", topic="orders", destination_topic="orders.copy")
    assert source_writes(renamed, "orders.copy")
    assert not source_writes(renamed, "orders")
    templated = IngressSource(region="east", topic="orders", destination_topic="dr.{topic}")
    assert source_writes(templated, "dr.orders")


def test_a_pattern_writes_the_rendered_destinations_of_the_topics_it_matches():
    same_names = IngressSource(region="east", topic_pattern="orders-[0-9]+")
    assert source_writes(same_names, "orders-12")
    assert not source_writes(same_names, "orders-x")
    copies = IngressSource(
        region="east", topic_pattern="(orders|payments)", destination_topic="{topic}.copy"
    )
    assert source_writes(copies, "payments.copy")
    assert not source_writes(copies, "payments")  # the source topic, not its copy
    assert not source_writes(copies, "refunds.copy")  # not matched
    twice = IngressSource(region="east", topic_pattern="a.*", destination_topic="{topic}-{topic}")
    assert source_writes(twice, "ab-ab")
    assert not source_writes(twice, "ab-ac")


def test_ingress_writes_a_topic_any_of_its_sources_writes():
    ingress = IngressConfig(
        region="west",
        sources=[
            IngressSource(region="east", topic="orders"),
            IngressSource(region="south", topic_pattern="p.*", destination_topic="{topic}.s"),
        ],
    )
    assert ingress_writes(ingress, "orders")
    assert ingress_writes(ingress, "payments.s")
    assert not ingress_writes(ingress, "payments")
    assert not ingress_writes(IngressConfig(region="west"), "orders")


def test_the_relay_writes_its_destinations_merged_or_not():
    relay = RelayConfig(
        sources=["east"],
        destination="west",
        topics=[
            RelayTopic(source_topic="orders", destination_topic="orders.relayed"),
            RelayTopic(source_topic="audit-a", destination_topic="audit", destination_partition=0),
            RelayTopic(source_topic="payments"),
        ],
    )
    assert relay_writes(relay, "orders.relayed")
    assert relay_writes(relay, "audit")
    assert relay_writes(relay, "payments")
    assert not relay_writes(relay, "orders")
