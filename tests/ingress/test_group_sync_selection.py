"""Which exported groups ingress moves in the destination: only those ``[ingress]
consumer_groups`` names, never past the segments the bucket holds, at most
``max_groups`` a topic. A bucket writer's forged ``_groups/<group>.json`` for any other
destination group moves nothing; ``replicator failover`` without ``--group`` reports (and
``--apply`` commits) the configured groups only."""

from __future__ import annotations

import logging

from ingress.group_sync import group_sync
from ingress.metrics import IngressMetrics
from ingress.service import IngressService
from replicator.core.config import required
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.offsets_file import GroupOffsets, group_offsets_s3_key
from replicator.core.kafka.clients import client_config
from replicator.failover import apply, collect
from tests.fixtures.ingress import segment_batch
from tests.fixtures.stack import DESTINATION, SOURCE


def test_only_configured_groups_within_the_segments_are_moved(ingress_setup, unique, caplog):
    setup = ingress_setup()
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    app, forged, victim = unique("app"), unique("app-forged"), unique("victim")
    ingress = required(setup.config, "ingress")
    config = setup.config.model_copy(
        update={"ingress": ingress.model_copy(update={"consumer_groups": ["app.*"]})}
    )
    assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0
    for group, offset in ((app, 5), (forged, 10**12), (victim, 10)):
        setup.store.put_json(
            group_offsets_s3_key("data", SOURCE, setup.topic, group),
            GroupOffsets(SOURCE, setup.topic, group, {0: offset}, 1.0).to_json(),
        )
    kafka = client_config(config.region(DESTINATION).kafka)
    sync = group_sync(
        config,
        kafka,
        IngressMetrics(),
        partitions=lambda: {(SOURCE, setup.topic): 1},
        sources=lambda: list(required(config, "ingress").sources),
        leading=lambda: True,
    )
    with caplog.at_level(logging.WARNING):
        outcome = sync.sync_once()
    admin = GroupAdmin(kafka, DESTINATION)
    assert outcome == {app: (1, 0)}, outcome
    assert admin.committed(app) == {(setup.destination, 0): 5}
    assert admin.committed(victim) == {}  # not named: its forged object moves nothing
    assert admin.committed(forged) == {}  # named, but beyond every segment in the bucket
    assert any(
        forged in r.getMessage() and "beyond the segments" in r.getMessage() for r in caplog.records
    )

    report = collect(config)  # no --group: the configured groups
    assert sorted(g.group for g in report.groups) == [app], [g.group for g in report.groups]
    apply(config, report)
    assert admin.committed(victim) == {}
    named = collect(config, [victim])  # an operator naming a group gets it
    assert [g.group for g in named.groups] == [victim]


def test_no_group_is_synced_until_named(ingress_setup, unique):
    setup = ingress_setup()
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    group = unique("any")
    setup.store.put_json(
        group_offsets_s3_key("data", SOURCE, setup.topic, group),
        GroupOffsets(SOURCE, setup.topic, group, {0: 3}, 1.0).to_json(),
    )
    kafka = client_config(setup.config.region(DESTINATION).kafka)
    sync = group_sync(
        setup.config,
        kafka,
        IngressMetrics(),
        partitions=lambda: {(SOURCE, setup.topic): 1},
        sources=lambda: list(required(setup.config, "ingress").sources),
        leading=lambda: True,
    )
    assert sync.sync_once() == {}
    assert GroupAdmin(kafka, DESTINATION).committed(group) == {}
