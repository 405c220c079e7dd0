"""kill -9 of a compaction job during a merge, after its output, and during deletes:
records stay readable exactly once, and the next run completes the work."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from compaction.job import CompactionJob
from replicator.core.faults import (
    COMPACTION_AFTER_OUTPUT,
    COMPACTION_DURING_DELETES,
    COMPACTION_DURING_MERGE,
)
from tests.fixtures.compaction import records, segments
from tests.fixtures.independent import assert_tiles


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


def compact_once(setup, crash_point: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "REPLICATOR_CRASH_POINT"}
    if crash_point:
        env["REPLICATOR_CRASH_POINT"] = crash_point
    process = subprocess.run(
        [sys.executable, "-m", "replicator", "compact", "--config", str(setup.path), "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )
    return process.returncode


@pytest.mark.parametrize(
    "crash_point",
    [
        f"{COMPACTION_DURING_MERGE}:2",
        f"{COMPACTION_AFTER_OUTPUT}:1",
        f"{COMPACTION_DURING_DELETES}:3",
    ],
)
def test_a_killed_run_loses_nothing_and_the_next_completes(
    local_stack, compaction_setup, crash_point, spark
):
    setup = compaction_setup(max_segment_count=4)
    setup.fill(partitions=2, segments=8, per_segment=100)
    original = segments(local_stack, setup)

    assert compact_once(setup, crash_point) == -9

    after_crash = segments(local_stack, setup)
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
