"""``replicator failover`` before ingress has ever run in the destination region: its
checkpoint topic does not exist yet. The report must say that nothing was replayed and
that the region is not ready, never end in a Kafka traceback (it did: the checkpoint read
raised ``_UNKNOWN_PARTITION`` out of the report)."""

from __future__ import annotations

from replicator.failover import collect, render
from tests.fixtures.ingress import segment_batch


def test_failover_before_ingress_ran_reports_nothing_replayed(local_stack, ingress_setup):
    setup = ingress_setup()
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    report = collect(setup.config, ["app"])
    assert [(row.source.partition, row.replayed_until) for row in report.partitions] == [(0, None)]
    assert not report.ready
    checkpoint_topic = setup.config.ingress.checkpoint_topic
    assert any(checkpoint_topic in note for note in report.notes), report.notes
    assert [(g.group, g.rows) for g in report.groups] == [("app", [])]  # named, not ready
    assert checkpoint_topic in render(report)
