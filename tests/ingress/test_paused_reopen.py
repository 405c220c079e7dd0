"""A destination broker paused while a worker opens its writer again: the failure is one
warning line without a traceback, the worker is restarted, and the destination is exact.

Issue 46: with the broker stopped (SIGSTOP), the resume read of a writer opening again
failed in ``settled_end`` with a raw ``KafkaException`` ("Failed to get watermark
offsets"), which the worker logged as an unknown failure, traceback and all; then, as a
BrokerError, as an ERROR line like a failure an operator must look at. Nothing was lost:
a transient broker state is to read as one warning line saying it is retried, like the
others (:func:`replicator.core.kafka.errors.transient_state`).

The pause is placed deterministically: the resume read's ends are asked through a wrapper
that stops the broker just before the first of them once the writer is due to open again
(after its idle close), with a 1 s client timeout instead of 30 s to keep the test short."""

from __future__ import annotations

import logging
import os
import signal
import threading

from infra.freeze import freeze, thaw
from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.kafka import checkpoints
from replicator.core.kafka.checkpoints import WriteTarget, checkpoint_partition
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.tail import SETTLE_WAIT, WATERMARK_TIMEOUT
from tests.fixtures.ingress import provenance_offsets, segment_batch, wait_for, wait_ready
from tests.fixtures.stack import DESTINATION, SOURCE

PER_SEGMENT = 500
PAUSE = 3.0
"""Longer than the 1 s the paused ends are asked for."""


def test_a_paused_broker_at_a_writer_reopen_is_one_warning_and_nothing_twice(
    local_stack, ingress_setup, monkeypatch, caplog
):
    setup = ingress_setup()
    text = setup.path.read_text().replace("[ingress]\n", '[ingress]\nwriter_idle_close = "1s"\n')
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    assert setup.config.ingress is not None
    checkpoint_topic = setup.config.ingress.checkpoint_topic
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, PER_SEGMENT - 1, segment_batch(0, PER_SEGMENT))

    pid = local_stack.pid(f"kafka-{DESTINATION}")
    settled_end = checkpoints.settled_end
    armed = threading.Event()
    paused: list[threading.Timer] = []

    def paused_at_the_reopen(
        committed, uncommitted, tp, wait=SETTLE_WAIT, timeout=WATERMARK_TIMEOUT
    ):
        if armed.is_set() and not paused:
            freeze(pid)
            paused.append(threading.Timer(PAUSE, thaw, (pid,)))
            paused[0].start()
            timeout = 1.0
        return settled_end(committed, uncommitted, tp, wait, timeout)

    monkeypatch.setattr(checkpoints, "settled_end", paused_at_the_reopen)
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    total = 2 * PER_SEGMENT
    try:
        wait_ready(service)
        wait_for(
            lambda: provenance_offsets(local_stack, setup, 0) == list(range(PER_SEGMENT)),
            "the first segment was not replayed",
        )
        wait_for(lambda: service._writer_slots.in_use() == 0, "the idle writer to close")
        armed.set()
        setup.put_segment(0, PER_SEGMENT, total - 1, segment_batch(PER_SEGMENT, PER_SEGMENT))
        wait_for(
            lambda: len(provenance_offsets(local_stack, setup, 0)) >= total,
            "the second segment was not replayed after the broker came back",
            timeout=90,
        )
    finally:
        os.kill(pid, signal.SIGCONT)
        for timer in paused:
            timer.join()
        service.request_stop()
        runner.join(60)
    assert paused, "the writer did not open again (nothing was paused)"
    with_traceback = [r.getMessage() for r in caplog.records if r.exc_info]
    assert not with_traceback and "Traceback" not in caplog.text, with_traceback
    target = WriteTarget(SourcePartition(SOURCE, setup.topic, 0), setup.destination, 0)
    cp_partition = checkpoint_partition(
        target.checkpoint_key, setup.config.ingress.checkpoint_partitions
    )
    failed = [
        r
        for r in caplog.records
        if f"{checkpoint_topic} partition {cp_partition}" in r.getMessage()
    ]
    assert len(failed) == 1, [r.getMessage() for r in caplog.records]
    line = failed[0]
    assert line.levelno == logging.WARNING, (line.levelname, line.getMessage())
    assert "will be retried" in line.getMessage(), line.getMessage()
    assert provenance_offsets(local_stack, setup, 0) == list(range(total))
    opens = service.metrics.registry.get_sample_value(
        "replicator_ingress_writer_opens_total",
        {"region": SOURCE, "topic": setup.topic, "partition": "0"},
    )
    assert opens is not None and opens >= 2, opens
