"""Consumer-group offsets: the exported object, translation and forward-only commits."""

from __future__ import annotations

import pytest

from replicator.core.groups.admin import forward_moves, matching
from replicator.core.groups.errors import GroupOffsetsError
from replicator.core.groups.offsets_file import (
    GroupOffsets,
    GroupSelection,
    group_history_s3_key,
    group_of_s3_key,
    group_offsets_s3_key,
    history_entry,
)
from replicator.core.groups.translation import first_at_or_after, translate
from replicator.core.segments.errors import SegmentKeyError
from replicator.core.segments.key import SegmentKey


class Partition:
    """A destination partition as probes see it: destination offset -> source offset."""

    def __init__(self, records: dict[int, int]) -> None:
        self.records = records
        self.probes = 0

    def probe(self, destination_offset: int) -> tuple[int, int] | None:
        self.probes += 1
        later = [d for d in self.records if d >= destination_offset]
        return (min(later), self.records[min(later)]) if later else None


# Source offsets 0..99 with every third one missing (compacted away, transaction markers,
# filtered), at destination offsets 10.. (retention removed what was below).
SPARSE = {10 + i: s for i, s in enumerate(s for s in range(100) if s % 3 != 1)}


@pytest.mark.parametrize("x", range(0, 100))
def test_first_record_at_or_after_every_source_offset(x: int) -> None:
    partition = Partition(SPARSE)
    found = first_at_or_after(x, partition.probe, 10, 10 + len(SPARSE))
    expected = min((d for d, s in SPARSE.items() if s >= x), default=None)
    assert found == expected
    assert partition.probes <= 10


def test_translation_is_exact_on_a_record_and_between_records() -> None:
    partition = Partition(SPARSE)
    on_record = translate(3, partition.probe, 10, 100, 10 + len(SPARSE) - 1)
    assert (on_record.destination_offset, on_record.exact) == (12, True)
    # Source offset 4 held no record: the group starts at the record with offset 5.
    gap = translate(4, partition.probe, 10, 100, 10 + len(SPARSE) - 1)
    assert (gap.destination_offset, gap.exact) == (13, True)
    assert SPARSE[13] == 5


def test_offsets_past_the_last_record_are_exact_only_up_to_the_replay() -> None:
    partition = Partition(SPARSE)
    last = 10 + len(SPARSE) - 1
    # Replay reached 120 (offsets 100..119 held no records): a group at 110 is exact.
    caught_up = translate(110, partition.probe, 10, 120, last)
    assert (caught_up.destination_offset, caught_up.exact, caught_up.behind_records) == (
        last + 1,
        True,
        0,
    )
    behind = translate(150, partition.probe, 10, 120, last)
    assert (behind.destination_offset, behind.exact, behind.behind_records) == (last + 1, False, 30)


def test_empty_destination() -> None:
    empty = Partition({})
    assert translate(0, empty.probe, 0, None, -1).exact
    nothing = translate(5, empty.probe, 0, None, -1)
    assert (nothing.destination_offset, nothing.exact, nothing.behind_records) == (0, False, 5)


def test_records_of_the_same_source_offset_seen_twice_keep_the_first() -> None:
    # A broker that shows aborted records: the same source offsets appear twice in a row.
    doubled = Partition({0: 0, 1: 1, 2: 1, 3: 2, 4: 3})
    assert first_at_or_after(1, doubled.probe, 0, 5) == 1
    assert first_at_or_after(2, doubled.probe, 0, 5) == 3


def test_group_offsets_object_round_trip_and_key() -> None:
    offsets = GroupOffsets("us-east-1", "orders", "pay/ments 1", {0: 5, 2: 0}, 12.5)
    assert GroupOffsets.from_json(offsets.to_json(), "k") == offsets
    key = group_offsets_s3_key("data", "us-east-1", "orders", "pay/ments 1")
    assert key == "data/us-east-1/orders/_groups/pay%2Fments%201.json"
    assert group_of_s3_key(key) == "pay/ments 1"
    assert group_of_s3_key("data/us-east-1/orders/_topic.json") is not None  # name only
    assert group_of_s3_key("data/us-east-1/orders/_groups/x.txt") is None
    with pytest.raises(SegmentKeyError):
        SegmentKey.from_s3_key(key, "data")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"offsets": {"a": 1}}, "partition 'a' is not a number"),
        ({"offsets": {"²": 1}}, "partition '²' is not a number"),
        ({"offsets": {"\u0661": 1}}, "partition '\u0661' is not a number"),
        ({"offsets": {"01": 1}}, "partition '01' is not a number"),
        ({"offsets": {"0": -1}}, "offset -1 of partition 0"),
        ({"offsets": {"0": True}}, "offset True"),
        ({"offsets": []}, "'offsets' is not an object"),
        ({"format_version": 2}, "format_version 2"),
        ({"group": ""}, "'group' is missing"),
        ({"time": "now"}, "'time' is not a number"),
    ],
)
def test_bad_group_offsets_objects_are_named(change: dict, message: str) -> None:
    data = {**GroupOffsets("r", "t", "g", {0: 1}, 1.0).to_json(), **change}
    with pytest.raises(GroupOffsetsError, match="the/key") as raised:
        GroupOffsets.from_json(data, "the/key")
    assert message in str(raised.value)


def test_groups_match_whole_ids_and_move_only_forward() -> None:
    assert matching(
        ["payments-a", "payments", "x-payments-b", "audit"], ["payments-.*", "audit"]
    ) == [
        "audit",
        "payments-a",
    ]
    current = {("t", 0): 10, ("t", 1): 5}
    proposed = {("t", 0): 8, ("t", 1): 6, ("t", 2): 0}
    assert forward_moves(current, proposed) == {("t", 1): 6, ("t", 2): 0}


def test_a_group_before_the_first_replicated_record_is_behind_not_exact() -> None:
    # The export began at source offset 100: source offsets 50..99 were never replicated.
    partition = Partition({i: 100 + i for i in range(50)})
    translation = translate(50, partition.probe, 0, 150, 49)
    assert (translation.destination_offset, translation.exact) == (0, False)
    assert translation.behind_records == 50
    # At the first replicated record, and after it: exact.
    assert translate(100, partition.probe, 0, 150, 49).exact
    assert translate(120, partition.probe, 0, 150, 49).destination_offset == 20


@pytest.mark.parametrize(
    "stamp",
    [
        "²²²²²²²²²²²²²",
        "\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661\u0662\u0663",
        "123",
        "-000000000001",
        "000000000001\n",
    ],
)
def test_history_keys_with_other_digits_are_not_history(stamp: str) -> None:
    good = group_history_s3_key("data", "r", "t", "g", 1)
    assert history_entry(good) == ("g", 1)
    assert history_entry(good.replace("0000000000001", stamp)) is None


def test_group_selection_names_win_over_patterns_and_the_limit_takes_the_first() -> None:
    groups = ["pay-2", "pay-1", "other", "pay-3"]
    assert GroupSelection().choose(groups) == (sorted(groups), 0)
    assert GroupSelection(patterns=()).choose(groups) == ([], 0)  # none named: none
    assert GroupSelection(patterns=("pay-.*",)).choose(groups) == (["pay-1", "pay-2", "pay-3"], 0)
    assert GroupSelection(patterns=("pay",)).choose(groups) == ([], 0)  # whole ids
    assert GroupSelection(patterns=("pay-.*",), limit=2).choose(groups) == (["pay-1", "pay-2"], 1)
    named = GroupSelection(patterns=("pay-.*",), names=frozenset({"other", "gone"}))
    assert named.choose(groups) == (["other"], 0)
