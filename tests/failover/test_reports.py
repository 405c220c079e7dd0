"""What ``replicator failover`` reports, on the local stack: relay topics merged into one
destination partition, a destination bucket that fails a partition's listing, and a
group committed where the source held no record before the first one replicated."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from ingress.service import IngressService
from relay.service import RelayService
from replicator.core.aws.errors import StorageError
from replicator.core.groups.offsets_file import GroupOffsets, group_offsets_s3_key
from replicator.core.segments.store import SegmentStore
from replicator.failover import collect, render
from tests.fixtures.independent import watermarks
from tests.fixtures.ingress import segment_batch
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import SOURCE


def test_relay_topics_merged_into_one_partition_are_reported_with_it(local_stack, relay_setup):
    setup = relay_setup(topic_options="destination_partition = 0")
    source = local_stack.bootstrap(SOURCE)
    create_topic(source, setup.source, 3)
    producer = Producer({"bootstrap.servers": source})
    for i in range(30):
        producer.produce(setup.source, key=b"%d" % i, value=b"v%d" % i, partition=i % 3)
    producer.flush(30)
    ends = {p: watermarks(source, setup.source, p)[1] for p in range(3)}
    assert RelayService(setup.config, stop_at_end=True, handle_signals=False).run() == 0

    report = collect(setup.config)
    rows = [
        (r.source.partition, r.destination_topic, r.destination_partition, r.replayed_until)
        for r in report.partitions
    ]
    assert rows == [(p, setup.destination, 0, ends[p]) for p in range(3)]
    assert all(r.rpo_records == 0 for r in report.partitions), report.partitions
    text = render(report)
    cells = [line.split() for line in text.splitlines()[4:7]]  # topic part destination part …
    assert [c[1:5] for c in cells] == [
        [str(p), setup.destination, "0", str(ends[p])] for p in range(3)
    ], text


def test_a_destination_bucket_that_fails_a_listing_is_unreachable_not_empty(
    local_stack, ingress_setup, monkeypatch: pytest.MonkeyPatch
):
    setup = ingress_setup()
    setup.put_descriptor(2, export_start={0: 0, 1: 0})
    at_source = SegmentStore.for_region(setup.config, SOURCE)
    for partition in range(2):
        key = setup.put_segment(partition, 0, 9, segment_batch(0, 10))
        at_source.write_segment(key, segment_batch(0, 10))
    list_segments = SegmentStore.list_segments

    def failing(self: SegmentStore, region: str, topic: str, partition: int) -> object:
        if self.bucket == setup.store.bucket and partition == 1:
            raise StorageError("list", self.bucket, f"{topic}/{partition}/", "SlowDown")
        return list_segments(self, region, topic, partition)

    monkeypatch.setattr(SegmentStore, "list_segments", failing)
    report = collect(setup.config, ["app"])

    rows = {r.source.partition: r for r in report.partitions}
    assert (rows[0].available_end, rows[0].source_end, rows[0].rpo_records) == (10, 10, 0)
    # Partition 1 is not known to hold nothing: what it holds is unknown, and so its RPO.
    assert (rows[1].available_end, rows[1].source_end, rows[1].rpo_records) == (None, 10, None)
    assert any(
        setup.store.bucket in what and "partition 1" in what for what in report.unreachable
    ), report.unreachable
    assert not report.ready


def test_a_group_committed_where_no_record_precedes_the_first_replicated_is_exact(
    local_stack, ingress_setup
):
    """The source's partitions begin with a transaction that was aborted: offsets 0..2
    aborted records, 3 the abort marker; the first record is at 4. A group committed at
    the marker (or at 0) reads record 4 first in the source and in the destination: exact.
    Where the export began at 4 (the offsets before it were never exported), the same
    group is behind: what was at 3 is not known."""
    setup = ingress_setup()
    setup.put_descriptor(2, export_start={0: 0, 1: 4})
    setup.put_segment(0, 0, 9, segment_batch(4, 6))  # offsets 0..3 hold no record
    setup.put_segment(1, 4, 9, segment_batch(4, 6))
    for group, offsets in (("at-marker", {0: 3}), ("at-start", {0: 0}), ("before-export", {1: 3})):
        exported = GroupOffsets(SOURCE, setup.topic, group, offsets, 1.0).to_json()
        setup.store.put_json(group_offsets_s3_key("data", SOURCE, setup.topic, group), exported)
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0

    report = collect(setup.config, ["at-marker", "at-start", "before-export"])
    found = {
        g.group: [
            (r.target.destination_partition, r.translation.destination_offset, r.translation.exact)
            for r in g.rows
        ]
        for g in report.groups
    }
    assert found == {
        "at-marker": [(0, 0, True)],
        "at-start": [(0, 0, True)],
        "before-export": [(1, 0, False)],
    }, render(report)
    behind = next(g for g in report.groups if g.group == "before-export").rows[0].translation
    assert behind.behind_records == 1
