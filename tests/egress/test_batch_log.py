"""The batch log line: Spark's phases of a micro-batch, in order, and what is left over."""

from egress.job import batch_phases


def test_a_batch_is_told_phase_by_phase_in_seconds_with_the_rest_as_other():
    durations = {
        "latestOffset": 12,
        "walCommit": 30,
        "getBatch": 0,
        "queryPlanning": 45,
        "addBatch": 810,
        "commitOffsets": 25,
        "triggerExecution": 1_000,
    }
    assert batch_phases(durations) == (
        "planning 0.01s, offset log 0.03s, ranges 0.00s, query plan 0.04s, "
        "writing 0.81s, commit 0.03s, other 0.08s"
    )


def test_phases_spark_did_not_report_count_as_zero_and_other_is_never_negative():
    assert batch_phases({"addBatch": 500, "triggerExecution": 400}) == (
        "planning 0.00s, offset log 0.00s, ranges 0.00s, query plan 0.00s, "
        "writing 0.50s, commit 0.00s, other 0.00s"
    )
