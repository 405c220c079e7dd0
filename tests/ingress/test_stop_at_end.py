"""``replicator ingress --stop-at-end`` through a rebalance: a group rebalance revokes a
member's whole share before it assigns the new one, and a member that took owning
nothing for having finished exited mid-replay with status 0, leaving its partitions
half replayed (found as a kill -9 test whose second instance stopped at a segment
boundary). Here another member joins the segment-events group while the instance
replays and leaves as soon as it has its share: two rebalances, and the instance must
still replay every record before it exits."""

from __future__ import annotations

from tests.fixtures.groups import join_and_leave
from tests.fixtures.stack import DESTINATION, log_end
from tests.fixtures.takeover import (
    PARTITIONS,
    PER_SEGMENT,
    SEGMENTS,
    assert_exactly_once,
    fill,
    replay_started,
    start,
    wait_until,
)


def test_a_rebalance_during_a_stop_at_end_run_does_not_end_it_early(
    local_stack, ingress_setup, tmp_path
):
    segments = 5 * SEGMENTS
    # 60,000 records per partition at 3,000 a second while the gate is there (20 s: the
    # instance's share after the first rebalance is not done before the joining member
    # has left, however loaded the machine), at full speed once the test removes it.
    gate = tmp_path / "paced"
    gate.touch()
    setup = ingress_setup(
        'filters = [{ plugin = "tests.fixtures.filter_plugins:paced",'
        f' config = {{ records_per_second = 3000, while_exists = "{gate}" }} }}]\n'
    )
    fill(setup, segments)
    log = tmp_path / "ingress.log"
    instance = start(setup, log, "--stop-at-end")
    try:
        wait_until(lambda: replay_started(local_stack, setup), 120, "replay to start", [log])
        ingress = setup.config.ingress
        join_and_leave(
            local_stack.bootstrap(DESTINATION),
            ingress.group_id,
            ingress.segment_events_topic,
            lambda: instance.poll() is None,
        )
        # The log ends count transaction markers too: below the records' count, the
        # replay was still under way when the joining member had its share.
        ends = sum(log_end(local_stack, setup.destination, p) for p in range(PARTITIONS))
        assert ends < PARTITIONS * segments * PER_SEGMENT, (
            "the replay ended before the rebalance: the test showed nothing"
        )
        gate.unlink()
        assert instance.wait(240) == 0, log.read_text()[-3000:]
    finally:
        if instance.poll() is None:
            instance.kill()
            instance.wait(10)
    assert_exactly_once(local_stack, setup, segments)
