from infra.drill_report import (
    TopicSummary,
    compare_partition,
    coverage_gaps,
    percentile,
    progress_bar,
    render_summary,
)


def rec(offset, value=b"v", key=b"k", ts=1_000, headers=()):
    return (offset, key, value, ts, headers)


SOURCE = [rec(0), rec(1, value=None), rec(2, value=b""), rec(5, headers=(("h", None),))]


def test_identical_partitions_have_no_problems():
    assert compare_partition(SOURCE, list(SOURCE)) == []


def test_missing_record_is_named_by_source_offset():
    assert compare_partition(SOURCE, [SOURCE[0], SOURCE[1], SOURCE[3]]) == [
        "1 missing (first at offset 2)"
    ]


def test_duplicated_record_is_reported():
    copied = [SOURCE[0], SOURCE[1], SOURCE[1], SOURCE[2], SOURCE[3]]
    assert compare_partition(SOURCE, copied) == ["1 duplicated (first at offset 1)"]


def test_reordered_records_are_reported():
    copied = [SOURCE[0], SOURCE[2], SOURCE[1], SOURCE[3]]
    assert compare_partition(SOURCE, copied) == ["out of order at offset 1"]


def test_tombstone_turned_empty_is_a_content_difference():
    copied = [SOURCE[0], rec(1, value=b""), SOURCE[2], SOURCE[3]]
    assert compare_partition(SOURCE, copied) == ["1 differ in content (first at offset 1)"]


def test_null_header_value_turned_empty_is_a_content_difference():
    copied = [*SOURCE[:3], rec(5, headers=(("h", b""),))]
    assert compare_partition(SOURCE, copied) == ["1 differ in content (first at offset 5)"]


def test_record_from_nowhere_is_reported():
    copied = [*SOURCE, rec(-1)]
    assert compare_partition(SOURCE, copied) == ["1 not in the source (first at offset -1)"]


def test_coverage_gaps_allow_overlap_and_name_holes():
    assert coverage_gaps([(0, 9), (5, 19), (20, 29)], 0, 30) == []
    assert coverage_gaps([(0, 9), (15, 29)], 0, 30) == ["10..14"]
    assert coverage_gaps([(0, 9)], 0, 30) == ["10..29"]
    assert coverage_gaps([(3, 9)], 0, 10) == ["0..2"]
    assert coverage_gaps([], 0, 0) == []


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) is None


def test_summary_shows_failure_reasons_and_lag():
    ok = TopicSummary("a", "a", partitions=2, records=10, segments={0: 1, 1: 2}, s3_bytes=2048)
    ok.lags = [1.0, 2.0, 3.0]
    bad = TopicSummary("b", "b.copy", partitions=1, records=5, problems=["partition 0: x"])
    text = render_summary([ok, bad])
    assert "OK: 2 partitions identical" in text
    assert "L0:1 L1:2" in text and "2.0 KiB" in text and "2.0s" in text
    assert "b -> b.copy" in text and "FAILED: partition 0: x" in text
    assert not TopicSummary("c", "c").verified  # no records is not a pass


def test_progress_bar():
    assert progress_bar(0, 10, width=10) == "[..........]   0%"
    assert progress_bar(5, 10, width=10) == "[#####.....]  50%"
    assert progress_bar(20, 10, width=10) == "[##########] 100%"
