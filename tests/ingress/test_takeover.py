"""Several ingress instances: they share the partitions, and when one is killed with
SIGKILL (mid-replay while it still owns unreplayed records, or at a crash point of its
writer: records flushed, checkpoint not written; or records and checkpoint flushed, not
committed) the others take over and the destination ends up holding each source record
exactly once. Each crash-point kill is shown to have hit its moment: the marker names the
partition, whose log then holds records beyond the last checkpoint (or a checkpoint that
names them, flushed and never committed)."""

from __future__ import annotations

import signal

import pytest

from infra.freeze import freeze_group
from replicator.core.faults import (
    WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT,
    WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT,
    marker,
)
from replicator.core.kafka.provenance import SourcePartition, source_offset
from tests.fixtures.independent import read_partition, watermarks
from tests.fixtures.ingress import start_ingress as start_instance
from tests.fixtures.stack import DESTINATION, SOURCE, log_end
from tests.fixtures.takeover import (
    PARTITIONS,
    PER_SEGMENT,
    SEGMENTS,
    assert_exactly_once,
    fill,
    kill,
    last_checkpoint,
    owned,
    produced,
    replaying,
    stop,
    wait_until,
)


def test_two_instances_share_and_survive_a_kill_9_mid_replay(local_stack, ingress_setup, tmp_path):
    segments = 5 * SEGMENTS  # enough that the victim is killed with work of its own left
    setup = ingress_setup()
    fill(setup, segments)
    full = segments * PER_SEGMENT
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    a = start_instance(setup, logs[0])
    b = start_instance(setup, logs[1])

    def victim_mid_replay() -> bool:
        """A partition of a's has records and is not half replayed yet (its log end,
        which counts transaction markers too, is below half the partition's records):
        far enough from its end that the moments until the freeze cannot finish it."""
        ends = [log_end(local_stack, setup.destination, p) for p in replaying(logs[0])]
        return owned(logs[1]) > 0 and any(0 < end < full // 2 for end in ends)

    try:
        wait_until(victim_mid_replay, 120, "a to be mid-replay beside b", logs)
        freeze_group(a.pid)  # frozen while what it left is counted, then killed
        # The victim still had work: a partition of its own not fully replayed at the kill.
        # Counted by log ends (they bound the records from above) while it is frozen:
        # reading every record can outlast its group session under load, and b, taking
        # the partitions over meanwhile, may finish them (the count once read full ones).
        ends = {p: log_end(local_stack, setup.destination, p) for p in replaying(logs[0])}
        kill(a)
        assert any(end < full for end in ends.values()), ends
        wait_until(lambda: owned(logs[1]) == PARTITIONS, 60, "b to take over", logs)
        total = PARTITIONS * full
        wait_until(lambda: produced(local_stack, setup) >= total, 180, "replay to finish", logs)
    finally:
        for process in (a, b):
            stop(process)
    assert_exactly_once(local_stack, setup, segments)


@pytest.mark.parametrize(
    "point", [WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT, WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT]
)
def test_a_kill_at_a_writer_crash_point_then_another_kill(
    local_stack, ingress_setup, tmp_path, point
):
    setup = ingress_setup()
    fill(setup)
    logs = [tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"]
    crash_dir = tmp_path / "crash"
    # a, alone, kills itself (SIGKILL) at its 3rd arrival at the point; b takes over.
    a = start_instance(setup, logs[0], crash_point=f"{point}:3", crash_dir=crash_dir)
    b = c = None
    try:
        a.wait(120)
        assert a.returncode == -signal.SIGKILL, logs[0].read_text()[-2000:]
        hit = marker(crash_dir, point)
        assert hit is not None and hit["arrival"] == 3, hit
        topic, _, partition = str(hit["where"]).rpartition(" partition ")
        assert topic == setup.destination
        partition_number = int(partition)
        source = SourcePartition(SOURCE, setup.topic, partition_number)
        in_log = read_partition(
            local_stack.bootstrap(DESTINATION), topic, partition_number, "read_uncommitted"
        )  # what the broker holds, committed or not
        replayed = [source_offset(list(r[5]), source) or 0 for r in in_log]
        checkpointed = last_checkpoint(local_stack, setup, partition_number)
        if point == WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT:
            # The moment: records are in the log beyond the last checkpoint written.
            assert replayed and max(replayed) >= checkpointed, (max(replayed), checkpointed)
        else:
            # The moment: the checkpoint written (flushed) names the records after them.
            assert checkpointed == max(replayed) + 1, (max(replayed), checkpointed)
        # ... in a transaction left open: read_committed readers stop at its first record.
        committed_end = watermarks(local_stack.bootstrap(DESTINATION), topic, partition_number)[1]
        assert committed_end < log_end(local_stack, topic, partition_number), committed_end
        b = start_instance(setup, logs[1])
        total = PARTITIONS * SEGMENTS * PER_SEGMENT
        # 180 s: a flush or commit the broker does not answer takes 60 s + 60 s to fail
        # and its worker 5 s to restart.
        wait_until(lambda: produced(local_stack, setup) > total // 2, 180, "b to go on", logs)
        kill(b)  # a second moment: mid-replay
        c = start_instance(setup, logs[2])
        wait_until(lambda: produced(local_stack, setup) >= total, 120, "c to finish", logs)
    finally:
        for process in (a, b, c):
            if process is not None:
                stop(process)
    assert_exactly_once(local_stack, setup)
