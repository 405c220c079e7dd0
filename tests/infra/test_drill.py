"""The short version of `make demo`: the same drill with fewer records."""

import io

import pytest

from infra.drill import TOPICS, DrillOptions, run_drill

pytestmark = pytest.mark.integration  # starts its own local stack


def test_drill_survives_ingress_kill_and_status_matches_the_stack(tmp_path):
    out = io.StringIO()
    result = run_drill(
        DrillOptions(workdir=tmp_path / "drill", records=20_000, seconds=20, partitions=2), out
    )
    text = out.getvalue()
    assert result.passed, text
    assert "killed ingress" in text and "Drill PASSED" in text, text
    # The application group failed over: committed, and read exactly on in the destination.
    assert "1 of 1 groups ready (offsets committed)" in text, text
    assert "read first exactly the records it had not read in the source" in text, text
    for summary in result.summaries:
        assert summary.records == 10_000  # half the workload
        assert summary.lags, "the destination tail saw no records arrive"
        assert set(summary.segments) == {1}, text

    # `replicator status`, with the services running and after they stopped, agrees with
    # the source partitions as a plain consumer read them at the end.
    for rows in (result.status_running, result.status_stopped):
        assert sorted((r.topic, r.partition) for r in rows) == sorted(result.source_ends)
        for row in rows:
            assert row.partition is not None
            end = result.source_ends[(row.topic, row.partition)]
            assert (row.source_end, row.exported_end, row.replayed_end) == (end, end, end)
            assert (row.egress_lag_records, row.ingress_lag_records) == (0, 0)
            assert row.segments and set(row.segments) == {0} and not row.halted
    assert {t for t, _ in result.source_ends} == set(TOPICS)
