"""The pure parts of the failover report: where the relay writes a source partition, the
RPO of a partition whose destination listing failed, and a group's translation once
where the replay began is known."""

from __future__ import annotations

from replicator.core.config import RelayConfig, RelayTopic
from replicator.core.groups.translation import Translation, replayed_from, translate
from replicator.core.kafka.provenance import SourcePartition
from replicator.failover import PartitionReadiness, relayed_to

EAST = "us-east-1"


def test_the_relay_target_of_a_merged_topic_is_its_destination_partition():
    relay = RelayConfig(
        sources=[EAST],
        destination="us-west-1",
        topics=[
            RelayTopic(source_topic="audit", destination_topic="all", destination_partition=2),
            RelayTopic(source_topic="orders"),
        ],
    )
    merged = relayed_to(relay, SourcePartition(EAST, "audit", 5))
    assert merged is not None
    assert (merged.destination_topic, merged.destination_partition) == ("all", 2)
    assert merged.checkpoint_key == "all/2/us-east-1/audit/5"  # the relay's key
    same = relayed_to(relay, SourcePartition(EAST, "orders", 3))
    assert same is not None and (same.destination_topic, same.destination_partition) == (
        "orders",
        3,
    )
    assert relayed_to(relay, SourcePartition(EAST, "other", 0)) is None
    row = PartitionReadiness(merged.source, merged.destination_topic, 2)
    assert row.target == merged
    assert PartitionReadiness(same.source, "orders").target == same


def test_an_unlisted_destination_has_no_rpo_rather_than_all_of_it():
    source = SourcePartition(EAST, "orders", 0)
    assert PartitionReadiness(source, "orders", source_end=10).rpo_records == 10  # no segment
    unknown = PartitionReadiness(source, "orders", source_end=10, available_known=False)
    assert unknown.rpo_records is None


def records_from(first: int, count: int):
    """A destination partition whose offsets 0.. hold source offsets first.. in order."""

    def probe(d: int) -> tuple[int, int] | None:
        return (d, first + d) if d < count else None

    return probe


def test_a_group_before_the_first_record_is_exact_only_at_or_after_the_replay_start():
    probe = records_from(4, 6)  # source offsets 0..3 held no record (a marker at 3)
    at_marker = translate(3, probe, 0, 10, 5)
    assert (at_marker.destination_offset, at_marker.exact, at_marker.behind_records) == (
        0,
        False,
        1,
    )
    assert replayed_from(at_marker, None) == at_marker  # not known where the replay began
    exact = replayed_from(at_marker, 0)
    assert (exact.destination_offset, exact.exact, exact.behind_records) == (0, True, 0)
    assert replayed_from(at_marker, 3).exact
    assert not replayed_from(at_marker, 4).exact  # began after the group: 3 is not known
    assert replayed_from(translate(0, probe, 0, 10, 5), 0).exact


def test_a_destination_whose_log_start_moved_keeps_the_group_behind():
    # Destination offsets 0..1 removed (retention): 2 holds source offset 6.
    def probe(d: int) -> tuple[int, int] | None:
        return (max(d, 2), 4 + max(d, 2)) if d < 6 else None

    trimmed = translate(3, probe, 2, 10, 5)
    assert (trimmed.log_start, trimmed.missing_before) == (2, 3)
    assert replayed_from(trimmed, 0) == trimmed  # 4 and 5 were there and are gone


def test_exact_and_past_the_end_translations_are_left_as_they_are():
    probe = records_from(4, 6)
    on_record = translate(5, probe, 0, 10, 5)
    assert on_record.exact and replayed_from(on_record, 0) == on_record
    ahead = translate(20, probe, 0, 10, 5)
    assert not ahead.exact and replayed_from(ahead, 0) == ahead  # behind the replay, not before
    assert replayed_from(Translation(3, 0, False, None), 0).exact is False
