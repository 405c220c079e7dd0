"""A backlog whose segments reach the destination bucket out of order, the first one last:
the first replay starts where the export started, whatever arrived first."""

from __future__ import annotations

import threading
import time

from ingress.service import IngressService
from tests.fixtures.ingress import provenance_offsets, segment_batch, wait_ready

RANGES = [(0, 9), (10, 19), (20, 29), (30, 39)]


def test_a_backlog_arriving_last_segment_first_is_replayed_from_its_first_offset(
    local_stack, ingress_setup
):
    setup = ingress_setup(first_segment_delay="5s", lost_segment_timeout="60s")
    # What replication delivers first: the newest segment, then the descriptor (which
    # names offset 0 as where the export began), then the others newest first, the first
    # one only after first_segment_delay: waiting that long and starting at the lowest
    # segment present would skip it.
    setup.put_segment(0, *RANGES[-1], segment_batch(RANGES[-1][0], 10))
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        wait_ready(service)
        setup.put_descriptor(1, export_start={0: 0})
        for start, end in reversed(RANGES[1:-1]):
            setup.put_segment(0, start, end, segment_batch(start, end - start + 1))
        time.sleep(8)
        setup.put_segment(0, *RANGES[0], segment_batch(0, 10))
        deadline = time.monotonic() + 60
        while len(provenance_offsets(local_stack, setup, 0)) < 40:
            assert time.monotonic() < deadline, provenance_offsets(local_stack, setup, 0)
            time.sleep(0.5)
    finally:
        service.request_stop()
        runner.join(30)
    assert provenance_offsets(local_stack, setup, 0) == list(range(40))


def test_a_stop_at_end_run_waits_for_the_descriptor_before_choosing_its_start(
    local_stack, ingress_setup
):
    # The later segments are in the bucket, the descriptor and the first segment not
    # yet: starting at the lowest listed would skip offsets 0..9 for good.
    setup = ingress_setup(lost_segment_timeout="20s")
    for start, end in RANGES[1:]:
        setup.put_segment(0, start, end, segment_batch(start, 10))

    def replicated_late() -> None:
        time.sleep(3)
        setup.put_segment(0, *RANGES[0], segment_batch(0, 10))
        setup.put_descriptor(1, export_start={0: 0})

    late = threading.Thread(target=replicated_late)
    late.start()
    code = IngressService(setup.config, stop_at_end=True, handle_signals=False).run()
    late.join()
    assert code == 0
    assert provenance_offsets(local_stack, setup, 0) == list(range(40)), (
        "the partition did not start where the export began"
    )


def test_a_descriptor_that_never_arrives_halts_the_partition_before_anything_is_written(
    local_stack, ingress_setup, caplog
):
    setup = ingress_setup(lost_segment_timeout="2s")
    setup.put_segment(0, *RANGES[1], segment_batch(10, 10))
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 1
    assert "lost topic descriptor" in caplog.text
    assert "partition 0 from offset 10" in caplog.text
    assert provenance_offsets(local_stack, setup, 0) == []
