"""Compaction on the local stack, checked with an independent reader."""

from __future__ import annotations

import os
import subprocess
import sys

from compaction.job import CompactionJob
from compaction.merge import run_merge
from compaction.planning import Merge
from replicator.core.segments.key import SegmentKey
from tests.fixtures.compaction import records, segments
from tests.fixtures.hostile import dictionary_bomb
from tests.fixtures.independent import assert_tiles, s3_segment_ranges
from tests.fixtures.stack import SOURCE


def test_small_level_0_segments_become_level_1_with_identical_records(
    local_stack, compaction_setup, spark
):
    setup = compaction_setup(max_segment_count=4)
    setup.fill(partitions=3, segments=12, per_segment=50)
    before = segments(local_stack, setup)

    report = CompactionJob(setup.config, spark=spark).run_once()

    after = segments(local_stack, setup)
    assert (report.segments_read, report.segments_written, report.segments_deleted) == (36, 9, 36)
    assert report.listed_by_level == {0: 36}
    for partition in range(3):
        assert [s.level for s in after[partition]] == [1, 1, 1]  # 4 + 4 + 4 inputs
        assert [(s.start, s.end) for s in after[partition]] == [(0, 199), (200, 399), (400, 599)]
        assert_tiles(after[partition], 0, 599)
        assert records(after[partition]) == records(before[partition])
    head = local_stack.s3().head_object(Bucket=setup.bucket, Key=after[0][0].s3_key)
    assert head["StorageClass"] == "STANDARD_IA"  # [compaction.storage_class] 1

    again = CompactionJob(setup.config, spark=spark).run_once()
    assert (again.segments_written, again.segments_deleted) == (0, 0)
    assert again.listed_by_level == {1: 9}
    assert [s.s3_key for p in segments(local_stack, setup).values() for s in p] == [
        s.s3_key for p in after.values() for s in p
    ]


def test_manual_level_1_to_2_touches_only_the_named_partitions(
    local_stack, compaction_setup, spark
):
    setup = compaction_setup()
    setup.fill(partitions=4, segments=4, per_segment=20, level=1)
    before = segments(local_stack, setup)
    report = CompactionJob(
        setup.config, spark=spark, partitions=[1, 3], from_level=1, to_level=2
    ).run_once()
    assert report.segments_written == 2
    after = segments(local_stack, setup)
    for partition in (0, 2):
        assert [s.s3_key for s in after[partition]] == [s.s3_key for s in before[partition]]
    for partition in (1, 3):
        assert [(s.level, s.start, s.end) for s in after[partition]] == [(2, 0, 79)]
        assert records(after[partition]) == records(before[partition])
    head = local_stack.s3().head_object(Bucket=setup.bucket, Key=after[1][0].s3_key)
    assert head["StorageClass"] == "GLACIER_IR"


def test_plan_prints_what_would_happen_and_changes_nothing(local_stack, compaction_setup):
    setup = compaction_setup()
    setup.fill(partitions=1, segments=4, per_segment=10)
    before = segments(local_stack, setup)
    result = subprocess.run(
        [sys.executable, "-m", "replicator", "compact", "--config", str(setup.path), "--plan"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"{setup.topic} partition 0: merge 4 segments" in result.stdout
    assert f"data/{SOURCE}/{setup.topic}/0/1/00000000000000000000-00000000000000000039" in (
        result.stdout
    )
    assert [s.s3_key for s in segments(local_stack, setup)[0]] == [s.s3_key for s in before[0]]


def test_compaction_runs_on_a_standalone_cluster(
    local_stack, compaction_setup, standalone_cluster, tmp_path
):
    setup = compaction_setup(max_segment_count=4)
    setup.fill(partitions=2, segments=8, per_segment=50)
    before = segments(local_stack, setup)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "replicator",
            "compact",
            "--config",
            str(setup.path),
            "--once",
            "--master",
            standalone_cluster,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        start_new_session=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 written" in result.stdout
    after = segments(local_stack, setup)
    for partition in (0, 1):
        assert [s.level for s in after[partition]] == [1, 1]
        assert records(after[partition]) == records(before[partition])
    assert list((tmp_path / "work").glob("app-*/*/stderr")), "no executor ran on the worker"
    # The worker's Python has nothing installed: the merge code came in the shipped archive.
    assert list((tmp_path / "work").glob("app-*/*/replicator-env/compaction/merge.py"))


def test_overlapping_versions_are_merged_once_and_nothing_is_stranded(
    local_stack, compaction_setup, spark
):
    """Two splits of the same offsets side by side (an egress replay that cut differently,
    a level-1 segment next to level-0 versions of part of it): one run leaves one segment
    per level with every record once; level 1 -> 2 then consolidates everything."""
    from replicator.core.segments.key import SegmentKey
    from tests.fixtures.ingress import segment_batch

    setup = compaction_setup(max_level=0, min_segment_count=2)

    def put(level: int, start: int, end: int) -> None:
        key = SegmentKey(SOURCE, setup.topic, 0, level, start, end)
        setup.store.write_segment(key, segment_batch(start, end - start + 1))

    put(1, 0, 9)
    for start, end in ((0, 4), (5, 14), (5, 9), (15, 24), (25, 34)):
        put(0, start, end)
    CompactionJob(setup.config, spark=spark).run_once()
    after = segments(local_stack, setup)[0]
    assert [(s.level, s.start, s.end) for s in after] == [(1, 0, 9), (1, 5, 34)]
    CompactionJob(setup.config, spark=spark, from_level=1, to_level=2).run_once()
    final = segments(local_stack, setup)[0]
    assert [(s.level, s.start, s.end) for s in final] == [(2, 0, 34)]
    assert [r[0] for r in records(final)] == list(range(35))


def test_a_loss_at_the_source_recorded_by_an_input_stays_recorded(local_stack, compaction_setup):
    setup = compaction_setup()
    setup.fill(partitions=1, segments=1, per_segment=10)  # 0..9
    lost = setup.store.spooled(SegmentKey(SOURCE, setup.topic, 0, 0, 10, 19))
    lost.writer.source_data_loss = True
    lost.close()
    inputs = tuple(setup.store.list_segments(SOURCE, setup.topic, 0))
    output = SegmentKey(SOURCE, setup.topic, 0, 1, 0, 19)
    run_merge(setup.config, SOURCE, Merge(output, inputs), None, delete=False)
    footer = setup.store.open(output).footer
    assert footer.source_data_loss and footer.record_count == 10


def test_a_hostile_input_fails_only_its_merge_naming_the_key(local_stack, compaction_setup, spark):
    setup = compaction_setup(max_segment_count=4)
    setup.fill(partitions=2, segments=4, per_segment=10)
    key = SegmentKey(SOURCE, setup.topic, 1, 0, 10, 19)
    s3_key = key.to_s3_key("data")
    local_stack.s3().put_object(Bucket=setup.bucket, Key=s3_key, Body=dictionary_bomb(key))

    report = CompactionJob(setup.config, spark=spark).run_once()

    assert len(report.failed) == 1 and s3_key in report.failed[0], report.failed
    assert "dictionary-encoded" in report.failed[0]
    assert "FAILED: 1" in report.summary()
    # From the keys alone: decoding the bomb is what the merge refused to do.
    after = s3_segment_ranges(local_stack.s3(), setup.bucket, "data", SOURCE, setup.topic)
    assert after[0] == [(1, 0, 39)]
    assert [level for level, _, _ in after[1]] == [0, 0, 0, 0]  # untouched, for an operator


def test_a_stop_during_a_run_lets_the_running_merge_finish_and_starts_no_other(
    local_stack, compaction_setup, spark, monkeypatch
):
    """SIGTERM's path: the stop is set while the first result is counted, when the second
    merge is already running (2 slots); the other two partitions are left for the next
    run, whole."""
    setup = compaction_setup()
    setup.fill(partitions=4, segments=3, per_segment=50)
    before = segments(local_stack, setup)
    job = CompactionJob(setup.config, spark=spark)
    count = CompactionJob._count

    def count_then_stop(result, report):
        count(result, report)
        job.stop.set()

    monkeypatch.setattr(job, "_count", count_then_stop)
    report = job.run_once()

    assert report.stopped_early
    assert (report.segments_written, report.segments_read, report.segments_deleted) == (2, 6, 6)
    after = segments(local_stack, setup)
    levels = sorted(tuple(s.level for s in after[p]) for p in range(4))
    assert levels == [(0, 0, 0), (0, 0, 0), (1,), (1,)]
    for partition in range(4):
        assert records(after[partition]) == records(before[partition])

    rest = CompactionJob(setup.config, spark=spark).run_once()
    assert not rest.stopped_early and rest.segments_written == 2
