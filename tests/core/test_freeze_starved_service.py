"""An ingress instance starved again and again — stopped (SIGSTOP) for well under its
group session, round after round, while a CPU hog spins — keeps its partitions and its
writers and replays every segment: a pause the group outlives is no freeze
(:mod:`replicator.core.freezes`).

Each round adds a segment to every partition and stops the instance; its writers, opened
before the stop and kept open (idle), begin their next transaction after it. Counted as a
freeze, that would make every writer refuse and every worker fail and wait out its
restart pause, round after round."""

from __future__ import annotations

import os
import re
import signal
import time

from bench.cpu_hog import cpu_hog
from infra.freeze import freeze, thaw
from replicator.core.config import load_config
from tests.fixtures.ingress import segment_batch, start_ingress
from tests.fixtures.takeover import (
    PARTITIONS,
    PER_SEGMENT,
    assert_exactly_once,
    owned,
    produced,
    stop,
    wait_until,
)

ROUNDS = 4
STOP_SECONDS = 2.5
"""Longer than the former freeze limit (2 s), well inside the group session (6 s) and
the limit (4 s), with room for a CPU hog's late ticks around it."""
RUN_SECONDS = 1.5
"""Between stops: long enough for a heartbeat (every 0.5 s) to reach the group."""


def put_segment(setup, index: int) -> None:
    start = index * PER_SEGMENT
    for partition in range(PARTITIONS):
        setup.put_segment(
            partition, start, start + PER_SEGMENT - 1, segment_batch(start, PER_SEGMENT)
        )


def test_an_instance_stopped_shorter_than_its_session_round_after_round_keeps_replaying(
    local_stack, ingress_setup, tmp_path
):
    setup = ingress_setup()
    # Writers stay open while idle between rounds (as they do for a minute by default).
    setup.path.write_text(
        setup.path.read_text().replace(
            'relist_interval = "1s"', 'relist_interval = "1s"\nwriter_idle_close = "10m"'
        )
    )
    setup.config = load_config(setup.path)
    setup.put_descriptor(PARTITIONS)
    put_segment(setup, 0)
    log = tmp_path / "ingress.log"
    instance = start_ingress(setup, log)
    try:
        wait_until(lambda: owned(log) == PARTITIONS, 60, "the instance to own everything", [log])
        wait_until(
            lambda: produced(local_stack, setup) == PARTITIONS * PER_SEGMENT,
            60,
            "the first segments",
            [log],
        )
        with cpu_hog(at_most_seconds=ROUNDS * (STOP_SECONDS + 60) + 60):
            for index in range(1, ROUNDS + 1):
                put_segment(setup, index)
                freeze(instance.pid)
                time.sleep(STOP_SECONDS)
                thaw(instance.pid)
                time.sleep(RUN_SECONDS)
                wait_until(
                    lambda i=index: (
                        produced(local_stack, setup) == PARTITIONS * PER_SEGMENT * (i + 1)
                    ),
                    60,
                    f"round {index} replayed",
                    [log],
                )
    finally:
        os.kill(instance.pid, signal.SIGCONT)
        stop(instance)
    text = log.read_text(errors="replace")
    assert instance.returncode == 0, text[-3000:]
    assert_exactly_once(local_stack, setup, segments=ROUNDS + 1)
    # No writer refused, no worker failed or started again, the group never moved.
    assert "refusing to" not in text, text[-3000:]
    assert "fenced" not in text, text[-3000:]
    assert len(re.findall(r"resumes at source offset", text)) == PARTITIONS, text[-3000:]
    assert re.findall(r"owning (\d+) source partitions", text) == [str(PARTITIONS)], text[-3000:]
