import pytest

from egress.planning import (
    Limits,
    PendingClock,
    assign_tasks,
    check_position,
    decode_offsets,
    encode_offsets,
    plan_end,
)

LIMITS = Limits(max_messages=100, max_bytes=10_000, max_age=60.0)


def plan(start, high, waited=None, bytes_per_offset=None, drain=False, limits=LIMITS):
    return plan_end(
        start, high, limits, waited=waited, bytes_per_offset=bytes_per_offset, drain=drain
    )


def test_offsets_encode_with_sorted_string_keys_and_round_trip():
    offsets = {("b", 10): 5, ("a", 2): 7, ("a", 10): 1}
    encoded = encode_offsets(offsets)
    assert list(encoded) == ["a", "b"]
    assert list(encoded["a"]) == ["2", "10"]
    assert decode_offsets(encoded) == offsets


def test_idle_partition_plans_nothing():
    assert plan(50, 50, waited=1e9, drain=True) == 50


def test_count_closes_a_segment_of_exactly_max_messages_offsets():
    assert plan(1000, 1250) == 1100
    assert plan(1000, 1100) == 1100


def test_below_every_limit_nothing_closes():
    assert plan(0, 99, waited=59.9, bytes_per_offset=10) == 0


def test_age_closes_everything_pending():
    assert plan(0, 42, waited=60.0) == 42


def test_age_closes_when_the_next_planning_would_be_too_late():
    assert plan_end(0, 42, LIMITS, waited=59.0, bytes_per_offset=None, drain=False) == 0
    assert (
        plan_end(0, 42, LIMITS, waited=59.0, bytes_per_offset=None, drain=False, lookahead=1.0)
        == 42
    )
    assert (
        plan_end(0, 42, LIMITS, waited=58.0, bytes_per_offset=None, drain=False, lookahead=1.0) == 0
    )


def test_unknown_age_does_not_close():
    assert plan(0, 42, waited=None) == 0


def test_estimated_bytes_close_a_segment_of_about_max_bytes():
    # 50 pending offsets x 250 bytes = 12,500 >= 10,000: close after 40 offsets.
    assert plan(0, 50, bytes_per_offset=250.0) == 40


def test_drain_closes_everything_up_to_the_end():
    assert plan(0, 42, drain=True) == 42
    assert plan(0, 420, drain=True) == 100  # but never beyond max_messages


def test_pending_clock_tracks_when_each_offset_was_first_seen():
    clock = PendingClock()
    clock.observe(10.0, 5)
    clock.observe(11.0, 5)  # no growth: nothing new seen
    clock.observe(12.0, 9)
    assert clock.first_seen(0) == 10.0
    assert clock.first_seen(4) == 10.0
    assert clock.first_seen(5) == 12.0
    assert clock.first_seen(9) is None
    clock.forget_before(5)
    assert clock.first_seen(5) == 12.0
    assert clock.observations == [(12.0, 9)]


def test_a_quiet_partition_does_not_hold_back_a_busy_one():
    # Each partition decides alone: a busy one closes by count, a quiet one waits.
    assert plan(0, 500) == 100
    assert plan(0, 3, waited=1.0) == 0


def test_position_inside_the_log_is_fine():
    assert check_position("t", 0, 5, 0, 10) is None
    assert check_position("t", 0, 10, 0, 10) is None


def test_retention_outrunning_egress_reports_the_lost_range_and_resumes_at_log_start():
    problem = check_position("orders", 3, 100, 250, 900)
    assert problem is not None
    assert (problem.lost_first, problem.lost_last, problem.resume_at) == (100, 249, 250)
    assert problem.describe().startswith("topic orders partition 3: retention removed")
    assert "offsets 100..249 (150 offsets) will not be exported" in problem.describe()


def test_log_shorter_than_what_was_exported_never_goes_back():
    # A re-created topic: going back would write segments overlapping the old ones.
    problem = check_position("orders", 0, 500, 0, 20)
    assert problem is not None
    assert problem.resume_at == 500
    assert (problem.lost_first, problem.lost_last) == (0, 19)
    assert "re-created" in problem.reason


@pytest.mark.parametrize("waited", [None, 0.0])
def test_age_measures_waiting_in_egress_not_record_timestamps(waited):
    # Records with old timestamps do not close a segment at once: only waiting does.
    assert plan(0, 10, waited=waited) == 0


def test_ranges_spread_over_tasks_by_size_and_keep_their_order():
    assert assign_tasks([100, 10, 10, 90, 5], 2) == [[0, 2], [1, 3, 4]]
    assert assign_tasks([1, 1, 1], 8) == [[0], [1], [2]]
    assert assign_tasks([5, 5, 5, 5], 1) == [[0, 1, 2, 3]]
    assert assign_tasks([], 4) == []


def test_every_range_lands_in_exactly_one_task():
    sizes = [(i * 37) % 101 + 1 for i in range(40)]
    groups = assign_tasks(sizes, 3)
    assert sorted(i for g in groups for i in g) == list(range(40))
    loads = [sum(sizes[i] for i in g) for g in groups]
    assert max(loads) - min(loads) <= max(sizes)


def test_tasks_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        assign_tasks([1], 0)
