"""kill -9 of a compaction job during a merge, after its output, during a merge's deletes
and during a later run's clean-up: each kill is shown to have hit its moment (the marker,
and the objects in the bucket), records stay readable exactly once, and the next run
completes the work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from compaction.job import CompactionJob
from replicator.core.faults import (
    COMPACTION_AFTER_OUTPUT,
    COMPACTION_DURING_CLEANUP,
    COMPACTION_DURING_DELETES,
    COMPACTION_DURING_MERGE,
    marker,
)
from replicator.core.segments.key import SegmentKey
from tests.fixtures.compaction import records, segments
from tests.fixtures.independent import assert_tiles
from tests.fixtures.stack import SOURCE


def read_by_covered_range(parts):
    """Like ingress: from the next offset, read the covering segment reaching furthest."""
    result: list[tuple] = []
    next_offset = 0
    while True:
        covering = [s for s in parts if s.start <= next_offset <= s.end]
        if not covering:
            return result
        best = max(covering, key=lambda s: (s.end, s.level))
        result += [r for r in best.records() if r[0] >= next_offset]
        next_offset = best.end + 1


def compact_once(setup, crash_point: str | None, crash_dir: Path | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLICATOR_CRASH_")}
    if crash_point:
        env["REPLICATOR_CRASH_POINT"] = crash_point
    if crash_dir:
        env["REPLICATOR_CRASH_DIR"] = str(crash_dir)
    process = subprocess.run(
        [sys.executable, "-m", "replicator", "compact", "--config", str(setup.path), "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )
    return process.returncode


def half_deleted_merges(parts) -> list[tuple[int, int]]:
    """Level-1 outputs beside which some of their level-0 inputs survive and some are gone
    (inputs are 100 offsets each here)."""
    found = []
    for output in (s for s in parts if s.level == 1):
        inputs = {s.start for s in parts if s.level == 0 and output.start <= s.start <= output.end}
        expected = set(range(output.start, output.end + 1, 100))
        if inputs and inputs != expected:
            found.append((output.start, output.end))
    return found


def at_crash(point: str, parts: dict[int, list]) -> bool:
    """Whether the bucket holds the state ``point`` claims."""
    everything = [s for p in parts.values() for s in p]
    level_0 = sum(1 for s in everything if s.level == 0)
    level_1 = sum(1 for s in everything if s.level == 1)
    if point == COMPACTION_DURING_MERGE:  # an output being written is not an object yet
        return level_0 == 16 and level_1 == 0
    if point == COMPACTION_AFTER_OUTPUT:  # a complete output, every input still there
        return level_0 == 16 and level_1 >= 1
    return any(half_deleted_merges(p) for p in parts.values())  # during deletes


@pytest.mark.parametrize(
    ("point", "arrival"),
    [(COMPACTION_DURING_MERGE, 2), (COMPACTION_AFTER_OUTPUT, 1), (COMPACTION_DURING_DELETES, 3)],
)
def test_a_killed_run_loses_nothing_and_the_next_completes(
    local_stack, compaction_setup, point, arrival, spark, tmp_path
):
    setup = compaction_setup(max_segment_count=4)
    setup.fill(partitions=2, segments=8, per_segment=100)
    original = segments(local_stack, setup)

    assert compact_once(setup, f"{point}:{arrival}", tmp_path) == -9
    hit = marker(tmp_path, point)  # counted over the job's processes (driver, workers)
    assert hit is not None and hit["arrival"] == arrival, hit

    after_crash = segments(local_stack, setup)
    assert at_crash(point, after_crash), {
        p: [(s.level, s.start, s.end) for s in parts] for p, parts in after_crash.items()
    }
    for partition in (0, 1):
        assert read_by_covered_range(after_crash[partition]) == records(original[partition])

    report = CompactionJob(setup.config, spark=spark).run_once()  # the next run
    assert report.segments_written >= 1
    final = segments(local_stack, setup)
    for partition in (0, 1):
        assert [s.level for s in final[partition]] == [1, 1], [
            (s.level, s.start, s.end) for s in final[partition]
        ]
        assert_tiles(final[partition], 0, 799)
        assert records(final[partition]) == records(original[partition])


def test_a_run_killed_during_its_clean_up_leaves_it_to_the_next(
    local_stack, compaction_setup, spark, tmp_path
):
    """The bucket as a run leaves it when it dies after its outputs and before deleting
    any input (each partition: a verified level-1 output beside its 8 level-0 inputs). The
    next run deletes the covered inputs (clean-up) and dies between the two partitions'
    deletes; the run after finishes."""
    setup = compaction_setup(max_segment_count=8)
    setup.fill(partitions=2, segments=8, per_segment=100)
    original = segments(local_stack, setup)
    for partition in (0, 1):  # the merged output, from the inputs' own records
        inputs = [
            setup.store.read_segment(SegmentKey(SOURCE, setup.topic, partition, 0, s.start, s.end))
            for s in original[partition]
        ]
        merged = SegmentKey(SOURCE, setup.topic, partition, 1, 0, 799)
        setup.store.write_segment(merged, pa.concat_tables(inputs))

    assert compact_once(setup, f"{COMPACTION_DURING_CLEANUP}:2", tmp_path) == -9
    hit = marker(tmp_path, COMPACTION_DURING_CLEANUP)
    assert hit is not None and hit["arrival"] == 2, hit
    second = segments(local_stack, setup)
    remaining = sorted(sum(1 for s in second[p] if s.level == 0) for p in (0, 1))
    assert remaining == [0, 8], remaining  # one partition cleaned up, the other not yet
    for partition in (0, 1):
        assert read_by_covered_range(second[partition]) == records(original[partition])

    report = CompactionJob(setup.config, spark=spark).run_once()
    assert (report.segments_written, report.segments_deleted) == (0, 8)
    final = segments(local_stack, setup)
    for partition in (0, 1):
        assert [(s.level, s.start, s.end) for s in final[partition]] == [(1, 0, 799)]
        assert records(final[partition]) == records(original[partition])
