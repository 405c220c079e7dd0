"""The replay loop's processes share the partitions as evenly as they can."""

from bench.baselines import share_of


def test_every_partition_is_replayed_by_exactly_one_process():
    shares = [share_of(8, 3, i) for i in range(3)]
    assert shares == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert sorted(p for share in shares for p in share) == list(range(8))
    assert share_of(2, 4, 3) == []
