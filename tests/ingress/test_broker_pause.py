"""A destination broker paused mid-transaction for longer than the transaction timeout:
no partition is left stopped and the destination is exact afterwards.

The pause surfaces as produce requests timing out ("requires epoch bump") or, once the
coordinator has aborted the transaction after its timeout, as fencing: the worker fails
and is restarted, and resumes from the destination."""

from __future__ import annotations

import threading
import time

from infra.freeze import freeze, thaw
from ingress.service import IngressService
from replicator.core.config import load_config
from tests.fixtures.ingress import fast_refresh, provenance_offsets, segment_batch, wait_for
from tests.fixtures.stack import DESTINATION

PARTITIONS = 2
SEGMENTS = 6
PER_SEGMENT = 20_000


def broker_pid(local_stack) -> int:
    state = next(s for s in local_stack.stack.status() if s.service.name == f"kafka-{DESTINATION}")
    assert state.running and state.pid is not None
    return state.pid


def test_a_paused_destination_broker_leaves_no_partition_stopped(local_stack, ingress_setup):
    setup = ingress_setup()
    fast_refresh(setup)
    text = setup.path.read_text().replace(
        'relist_interval = "1s"', 'relist_interval = "1s"\ntransaction_timeout = "3s"'
    )
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    setup.put_descriptor(PARTITIONS, export_start={p: 0 for p in range(PARTITIONS)})
    for partition in range(PARTITIONS):
        for s in range(SEGMENTS):
            start = s * PER_SEGMENT
            setup.put_segment(
                partition, start, start + PER_SEGMENT - 1, segment_batch(start, PER_SEGMENT)
            )
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    pid = broker_pid(local_stack)
    try:
        wait_for(
            lambda: any(w.status.state == "replaying" for w in service.workers.workers.values()),
            "no worker started replaying",
        )
        freeze(pid)  # mid-replay: transactions are open
        time.sleep(8)  # past the 3 s transaction timeout
    finally:
        thaw(pid)
    try:
        total = SEGMENTS * PER_SEGMENT
        wait_for(
            lambda: all(
                len(provenance_offsets(local_stack, setup, p)) >= total for p in range(PARTITIONS)
            ),
            "the replay did not finish after the broker came back",
            timeout=180,
        )
        states = {str(k): w.status.state for k, w in service.workers.workers.items()}
        assert "stopped" not in states.values() and "halted" not in states.values(), states

    finally:
        service.request_stop()
        runner.join(60)
    for partition in range(PARTITIONS):
        assert provenance_offsets(local_stack, setup, partition) == list(range(total))
