"""The production freeze limit on a real writer: a pause the group outlives (a long
collection holding the interpreter, a short stop, a starved host) leaves the writer
writing; a stop past the group session still stops it; and a stop past the writer's
transaction timeout is refused by the broker's own fencing, which needs no help from
the watch (:mod:`replicator.core.freezes` says why)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

from replicator.core.freezes import GROUP_SESSION_SECONDS, STEADY, FreezeWatch
from replicator.core.kafka.errors import OwnershipLostError
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import segment_batch
from tests.fixtures.writer import writer_destination

SHORT_PAUSE = GROUP_SESSION_SECONDS / 2
"""A pause the group outlives: no heartbeat for half the session does not remove the
member, so the partition cannot have moved."""
STRICT_LIMIT = 1.0
"""A limit every pause of these tests crosses: a watch with it shows the pause was seen."""


def stop_this_process(seconds: float) -> None:
    """SIGSTOP this process (every thread); a helper sends SIGCONT after ``seconds``."""
    subprocess.Popen(["sh", "-c", f"sleep {seconds}; kill -CONT {os.getpid()}"])
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def hold_the_interpreter(seconds: float) -> None:
    """What a long collection of a large heap does: this thread keeps the interpreter
    lock, so no other Python thread runs (librdkafka's threads do). ``PyDLL`` calls keep
    the lock; ``usleep`` just waits."""
    ctypes.PyDLL(None).usleep(int(seconds * 1_000_000))


PAUSES: dict[str, Callable[[float], None]] = {
    "interpreter held (a long collection)": hold_the_interpreter,
    "process stopped (SIGSTOP)": stop_this_process,
}


def table(start: int, count: int) -> pa.Table:
    return pa.Table.from_batches([segment_batch(start, count)])


@pytest.fixture
def production_writer(local_stack, unique):
    """A writer guarded by a watch with the production limit; the destination's
    bootstrap and topic."""
    where = writer_destination(local_stack, unique)
    group = unique("g")

    def open_writer(watch: FreezeWatch, transaction_timeout: float = 60.0) -> PartitionWriter:
        writer = PartitionWriter(
            where.kafka,
            group,
            where.target,
            where.store,
            kind="ingress",
            transaction_timeout=transaction_timeout,
            freezes=watch,
        )
        writer.open()
        return writer

    return where.bootstrap, where.target.destination_topic, open_writer


@pytest.mark.parametrize("pause", PAUSES)
def test_a_pause_the_group_outlives_leaves_the_writer_writing(production_writer, pause):
    bootstrap, destination, open_writer = production_writer
    watch, strict = FreezeWatch(), FreezeWatch(limit=STRICT_LIMIT, late=STEADY)
    writer = open_writer(watch)
    opened = writer._opened_at
    writer.write(table(0, 1500))
    writer.commit(1500)
    PAUSES[pause](SHORT_PAUSE)  # between transactions
    writer.write(table(1500, 1500))
    writer._producer.flush(30)  # produced, transaction open
    time.sleep(2 * STEADY)  # running on time between them: two pauses, not one stall
    PAUSES[pause](SHORT_PAUSE)  # inside one
    writer.commit(3000)
    writer.close()
    assert len(read_partition(bootstrap, destination, 0)) == 3000
    # The pauses did reach the ticker: a watch with a limit below them saw a freeze.
    seen = strict.frozen_since(opened)
    assert seen is not None and seen.seconds >= SHORT_PAUSE - 0.5, seen


def test_a_stop_past_the_group_session_still_stops_the_writer(production_writer):
    bootstrap, destination, open_writer = production_writer
    writer = open_writer(FreezeWatch())
    writer.write(table(0, 1500))
    writer.commit(1500)
    writer.write(table(1500, 1500))
    writer._producer.flush(30)
    stop_this_process(GROUP_SESSION_SECONDS + 0.5)
    with pytest.raises(OwnershipLostError, match=r"this process was frozen for \d+\.\d s"):
        writer.commit(3000)
    assert not writer._in_transaction  # aborted, not committed
    writer.close()
    assert len(read_partition(bootstrap, destination, 0)) == 1500


def test_a_stop_past_the_transaction_timeout_is_refused_by_the_broker(production_writer):
    """The transaction timeout fences on its own: the coordinator aborts the transaction
    and bumps the producer's epoch, and the thawed commit is answered as fenced, although
    the stop was shorter than the freeze limit."""
    bootstrap, destination, open_writer = production_writer
    writer = open_writer(FreezeWatch(), transaction_timeout=1.0)
    writer.write(table(0, 1500))
    writer._producer.flush(30)
    stop_this_process(SHORT_PAUSE)  # the local broker looks for timed-out ones every second
    with pytest.raises(OwnershipLostError, match="is now written by another instance"):
        writer.commit(1500)
    writer.close()
    assert len(read_partition(bootstrap, destination, 0, "read_uncommitted")) == 1500
    assert read_partition(bootstrap, destination, 0) == []
