"""A frozen process notices it was frozen, and its writers refuse to go on: a thawed
"zombie"'s own defence, beside the broker's fencing. What counts as a freeze (a stall
longer than the limit, late gaps chained) is decided by pure functions, tested first;
``tests/core/test_freeze_limit.py`` runs the production limit on a real writer."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from itertools import pairwise

import pyarrow as pa
import pytest

from replicator.core.freezes import (
    COMMIT_MARGIN,
    FREEZE_LIMIT,
    GROUP_SESSION_SECONDS,
    HEARTBEAT_SECONDS,
    LATE,
    STEADY,
    Freeze,
    FreezeWatch,
    Stall,
    after_tick,
    freeze_limit,
    freeze_since,
)
from replicator.core.kafka.errors import OwnershipLostError
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import segment_batch
from tests.fixtures.writer import writer_destination

LIMIT = 1.0


def freeze_this_process(seconds: float) -> None:
    """SIGSTOP this process (every thread); a helper sends SIGCONT after ``seconds``."""
    subprocess.Popen(["sh", "-c", f"sleep {seconds}; kill -CONT {os.getpid()}"])
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


# -- the decision (pure) ------------------------------------------------------------------


def test_no_freeze_when_ticks_kept_coming():
    assert freeze_since(since=10.0, now=20.0, last_tick=19.95, last_freeze=None, limit=2) is None


def test_a_freeze_in_progress_is_seen_before_the_ticker_runs_again():
    assert freeze_since(10.0, now=40.0, last_tick=15.0, last_freeze=None, limit=2) == Freeze(
        40.0, 25.0
    )


def test_a_recorded_freeze_counts_only_if_it_ended_after_the_writer_opened():
    earlier = Freeze(ended_at=9.0, seconds=30.0)
    later = Freeze(ended_at=12.0, seconds=30.0)
    assert freeze_since(10.0, now=20.0, last_tick=19.9, last_freeze=earlier, limit=2) is None
    assert freeze_since(10.0, now=20.0, last_tick=19.9, last_freeze=later, limit=2) == later


def test_a_gap_at_the_limit_is_not_a_freeze():
    assert freeze_since(10.0, now=12.0, last_tick=10.0, last_freeze=None, limit=2) is None


def test_the_limit_leaves_a_heartbeat_and_the_margin_inside_the_group_session():
    assert FREEZE_LIMIT + HEARTBEAT_SECONDS + COMMIT_MARGIN <= GROUP_SESSION_SECONDS
    assert freeze_limit(6.0, heartbeat=0.5, margin=1.5) == 4.0
    assert freeze_limit(45.0) == 43.0  # a longer session tolerates longer stalls
    with pytest.raises(ValueError, match="leaves no room"):
        freeze_limit(2.0)


def stall_after(ticks: list[float], steady: float = 0.5, late: float = 0.5) -> Stall | None:
    """The stall once the ticker has ticked at each of ``ticks`` in turn."""
    stall = None
    for last, now in pairwise(ticks):
        stall = after_tick(stall, last, now, steady, late)
    return stall


def every(start: float, end: float, step: float = 0.1) -> list[float]:
    return [round(start + i * step, 6) for i in range(round((end - start) / step) + 1)]


def test_ticks_a_little_late_are_no_stall():
    assert stall_after([0.0, 0.4, 0.85, 1.3, 1.75, 2.2]) is None


def test_a_late_gap_starts_a_stall_that_ticks_on_time_end():
    ticks = [*every(0.0, 1.0), 4.0, 4.1, 4.2]
    assert stall_after(ticks) == Stall(began=1.0, last_late=4.0)
    assert stall_after([*ticks, *every(4.3, 4.6)]) is None


def test_late_gaps_with_short_runs_between_chain_into_one_stall():
    """A run too short to be sure a heartbeat went out does not end a stall: two stalls
    of 3 s each with 0.2 s between them are one of 6.2 s, longer than the session's
    limit."""
    chained = stall_after([*every(0.0, 1.0), 4.0, 4.1, 4.2, 7.2])
    assert chained == Stall(began=1.0, last_late=7.2)
    assert chained.seconds > FREEZE_LIMIT
    apart = stall_after([*every(0.0, 1.0), *every(4.0, 5.0), 8.0])
    assert apart == Stall(began=5.0, last_late=8.0)
    assert apart.seconds < FREEZE_LIMIT


def test_cpu_starvation_however_long_is_no_stall():
    """Ticks 0.6 s apart for a minute (the most a CPU hog delayed them, while librdkafka's
    threads went on heartbeating) at the services' settings: no stall, no freeze."""
    starved = every(0.0, 60.0, 0.6)
    assert stall_after(starved, STEADY, LATE) is None
    # The former rule (late past one heartbeat interval) chained them into a minute.
    assert stall_after(starved, STEADY, STEADY) == Stall(began=0.0, last_late=60.0)
    assert freeze_since(0.0, 60.5, 60.0, None, limit=FREEZE_LIMIT) is None


def test_a_stall_in_progress_counts_from_where_it_began():
    stall = Stall(began=1.0, last_late=4.0)
    # 0.2 s on time after the first late gap, then nothing since 4.2: 5 s of stall by 6.0
    assert freeze_since(0.0, 6.0, 4.2, None, limit=4, stall=stall, late=0.5) == Freeze(6.0, 5.0)
    # without the stall before it the same gap is short
    assert freeze_since(0.0, 6.0, 4.2, None, limit=4, late=0.5) is None
    # on time now: the stall so far (3 s) is within the limit
    assert freeze_since(0.0, 4.3, 4.2, None, limit=4, stall=stall, late=0.5) is None


# -- a real freeze ------------------------------------------------------------------------


def test_the_watch_sees_a_real_freeze_and_only_after_it_began():
    watch = FreezeWatch(limit=LIMIT, tick=0.05, late=0.5)
    before = time.monotonic()
    time.sleep(0.3)
    assert watch.frozen_since(before) is None
    freeze_this_process(2.5)
    seen = watch.frozen_since(before)
    assert seen is not None and seen.seconds >= 2.0, seen
    time.sleep(0.3)
    assert watch.frozen_since(time.monotonic()) is None  # a writer opened after it: clean


@pytest.fixture
def writer_setup(local_stack, unique):
    where = writer_destination(local_stack, unique)
    group = unique("g")
    watch = FreezeWatch(limit=LIMIT, tick=0.05, late=0.5)

    def open_writer() -> tuple[PartitionWriter, int | None]:
        writer = PartitionWriter(
            where.kafka, group, where.target, where.store, kind="ingress", freezes=watch
        )
        return writer, writer.open().next_source_offset

    return where.bootstrap, where.target.destination_topic, open_writer


def table(start: int, count: int) -> pa.Table:
    return pa.Table.from_batches([segment_batch(start, count)])


def test_a_writer_frozen_between_transactions_writes_nothing_after_the_thaw(writer_setup):
    bootstrap, destination, open_writer = writer_setup
    writer, _ = open_writer()
    writer.write(table(0, 1500))
    writer.commit(1500)
    freeze_this_process(2.5)
    with pytest.raises(OwnershipLostError, match=r"frozen for \d+\.\d s"):
        writer.write(table(1500, 1500))
    writer.close()
    assert len(read_partition(bootstrap, destination, 0, "read_uncommitted")) == 1500
    # The partition's next writer (here, or in the new owner) opens after the freeze: clean.
    successor, resume_at = open_writer()
    assert resume_at == 1500
    successor.write(table(1500, 1500))
    successor.commit(3000)
    successor.close()
    assert len(read_partition(bootstrap, destination, 0)) == 3000


def test_a_writer_frozen_with_an_open_transaction_does_not_commit_it(writer_setup):
    _, _, open_writer = writer_setup
    writer, _ = open_writer()
    writer.write(table(0, 1500))
    writer._producer.flush(30)  # produced, transaction open
    freeze_this_process(2.5)
    with pytest.raises(OwnershipLostError, match="frozen"):
        writer.commit(1500)
    assert not writer._in_transaction  # aborted, not committed
    writer.close()
