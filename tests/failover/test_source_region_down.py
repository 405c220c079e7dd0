"""``replicator failover`` when the source region's bucket does not answer, which is when
an operator runs it. The destination's partitions are reported (with what the
destination bucket holds), the source ends and RPO are unknown and the report says why,
and the source bucket is asked once per topic: each partition's listing used to ask it
again, and against an endpoint that does not answer each listing waited out its retries,
a report of 64 partitions most of an hour."""

from __future__ import annotations

from collections import Counter

import pytest

from replicator.core.segments.store import SegmentStore
from replicator.failover import collect, render
from tests.fixtures.ingress import segment_batch

PARTITIONS = 6


def test_a_source_bucket_that_does_not_answer_is_asked_once_and_named(
    local_stack, ingress_setup, unique, monkeypatch: pytest.MonkeyPatch
):
    missing = unique("gone-source")
    setup = ingress_setup()
    setup.put_descriptor(PARTITIONS, export_start=dict.fromkeys(range(PARTITIONS), 0))
    for partition in range(PARTITIONS):
        setup.put_segment(partition, 0, 9, segment_batch(0, 10))
    source_region = setup.config.ingress.sources[0].region
    regions = dict(setup.config.regions)
    regions[source_region] = regions[source_region].model_copy(update={"bucket": missing})
    config = setup.config.model_copy(update={"regions": regions})

    listed: Counter[str] = Counter()
    list_segments = SegmentStore.list_segments

    def counted(self: SegmentStore, region: str, topic: str, partition: int) -> object:
        listed[self.bucket] += 1
        return list_segments(self, region, topic, partition)

    monkeypatch.setattr(SegmentStore, "list_segments", counted)
    report = collect(config, ["app"])

    assert [row.source.partition for row in report.partitions] == list(range(PARTITIONS))
    assert all(row.available_end == 10 for row in report.partitions), report.partitions
    assert all(row.source_end is None for row in report.partitions), report.partitions
    assert listed[missing] == 0, listed  # the topic's listing failed: no partition asked
    assert listed[setup.store.bucket] == PARTITIONS, listed
    assert any(missing in note and "did not answer" in note for note in report.notes), report.notes
    # Not in what blocks readiness: the source region being down is why one fails over.
    assert not any(missing in what for what in report.unreachable), report.unreachable
    assert missing in render(report)
