"""Ingress keeps replaying exactly once while compaction merges and deletes the level-0
segments it reads (each region compacts its own bucket: here the destination's)."""

from __future__ import annotations

import threading
import time

from compaction.job import CompactionJob
from ingress.service import IngressService
from replicator.core.config import load_config
from tests.fixtures.independent import s3_segments
from tests.fixtures.ingress import provenance_offsets, segment_batch
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS, SEGMENTS, PER_SEGMENT = 2, 30, 400


def test_ingress_replays_exactly_once_while_compaction_deletes_its_inputs(
    local_stack, ingress_setup, spark
):
    setup = ingress_setup()
    setup.path.write_text(
        setup.path.read_text()
        + f"""
[compaction]
region = "{DESTINATION}"
parallelism = 2
[compaction.topics."{setup.topic}"]
min_segment_age = "0s"
min_segment_count = 2
max_segment_count = 5
"""
    )
    setup.config = load_config(setup.path)
    setup.put_descriptor(PARTITIONS)

    def write(first: int, last: int) -> None:
        for partition in range(PARTITIONS):
            for s in range(first, last):
                start = s * PER_SEGMENT
                setup.put_segment(
                    partition, start, start + PER_SEGMENT - 1, segment_batch(start, PER_SEGMENT)
                )

    def replayed(partition: int) -> int:
        try:
            return len(provenance_offsets(local_stack, setup, partition))
        except Exception:  # the destination topic is created by ingress
            return 0

    write(0, SEGMENTS // 2)
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run)
    runner.start()
    total = SEGMENTS * PER_SEGMENT
    try:
        deadline = time.monotonic() + 60
        while replayed(0) < PER_SEGMENT:
            assert time.monotonic() < deadline, "ingress did not start"
            time.sleep(0.2)
        write(SEGMENTS // 2, SEGMENTS)  # ingress is told of these while compaction runs
        report = CompactionJob(setup.config, spark=spark).run_once()
        assert report.segments_deleted >= SEGMENTS  # level-0 inputs went away under ingress
        deadline = time.monotonic() + 120
        while any(replayed(p) < total for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, "ingress did not finish"
            time.sleep(0.5)
    finally:
        service.request_stop()
        runner.join(60)
    for partition in range(PARTITIONS):
        assert provenance_offsets(local_stack, setup, partition) == list(range(total))
    left = s3_segments(local_stack.s3(), setup.store.bucket, "data", SOURCE, setup.topic)
    assert {s.level for p in left.values() for s in p} == {1}
