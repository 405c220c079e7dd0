"""A writer killed (SIGKILL) with a transaction open, on Apache Kafka.

With no successor, the broker's transaction coordinator aborts the transaction once it is
older than the writer's ``transaction.timeout.ms`` (the local stack checks every second),
and read_committed readers of the partition move past it then, not before. With a
successor (the same ``transactional.id``), ``init_transactions`` aborts it at once. Either
way the successor resumes exactly after the last committed record.

The recovery times are printed (``-s``) and bounded loosely: they measure the broker, and
the services' ``transaction_timeout`` (60 s by default) is the longest a partition's
readers wait behind a killed writer that nobody replaces (docs/operations/ingress.md, "How
exactly-once is achieved")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pyarrow as pa

from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.independent import read_partition, watermarks
from tests.fixtures.ingress import segment_batch
from tests.fixtures.stack import LocalStack, log_end
from tests.fixtures.writer import WriterDestination, writer_destination

TIMEOUT_SECONDS = 5.0

KILLED_WRITER = """
import json, os, signal, sys
import pyarrow as pa
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.ingress import segment_batch

args = json.loads(sys.argv[1])
store = CheckpointStore(args["kafka"], args["checkpoints"], 1)
target = WriteTarget(SourcePartition("us-east-1", "t", 0), args["destination"], 0)
writer = PartitionWriter(
    args["kafka"], args["group"], target, store, kind="ingress", transaction_timeout=args["timeout"]
)
writer.open()
writer.write(pa.Table.from_batches([segment_batch(0, 1000)]))
writer.commit(1000)
writer.write(pa.Table.from_batches([segment_batch(1000, 1000)]))
writer._producer.flush(30)  # on the broker, in a transaction still open
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_mid_transaction(where: WriterDestination, group: str) -> None:
    args = {
        "kafka": where.kafka,
        "checkpoints": where.store.topic,
        "destination": where.target.destination_topic,
        "group": group,
        "timeout": TIMEOUT_SECONDS,
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_WRITER), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -9, done.stdout + done.stderr


def committed_end(where: WriterDestination) -> int:
    return watermarks(where.bootstrap, where.target.destination_topic, 0)[1]


def resume_and_finish(where: WriterDestination, group: str) -> tuple[int | None, float]:
    started = time.monotonic()
    successor = PartitionWriter(
        where.kafka,
        group,
        where.target,
        where.store,
        kind="ingress",
        transaction_timeout=TIMEOUT_SECONDS,
    )
    resume = successor.open().next_source_offset
    opened_in = time.monotonic() - started
    successor.write(pa.Table.from_batches([segment_batch(1000, 1000)]))
    successor.commit(2000)
    successor.close()
    return resume, opened_in


def assert_exact(where: WriterDestination) -> None:
    committed = read_partition(where.bootstrap, where.target.destination_topic, 0)
    assert [int(r[5][0][1]) for r in committed] == list(range(2000))  # the "h" header


def test_the_broker_aborts_a_killed_writers_transaction_after_its_timeout(
    local_stack: LocalStack, unique
):
    where = writer_destination(local_stack, unique)
    group = unique("g")
    killed_mid_transaction(where, group)
    killed_at = time.monotonic()
    topic = where.target.destination_topic
    # Held: the records of the open transaction are in the log, readers stop before them.
    assert committed_end(where) == 1001  # 1,000 records and their commit marker
    assert log_end(local_stack, topic, 0) == 2001
    while committed_end(where) < log_end(local_stack, topic, 0):
        assert time.monotonic() - killed_at < TIMEOUT_SECONDS + 30, "never aborted"
        time.sleep(0.1)
    waited = time.monotonic() - killed_at
    print(f"readers waited {waited:.1f} s behind the killed writer (timeout {TIMEOUT_SECONDS} s)")
    # The coordinator counts the timeout from the transaction's start, a moment before the
    # kill, and checks for expired transactions every second.
    assert TIMEOUT_SECONDS - 2 <= waited <= TIMEOUT_SECONDS + 10, waited
    assert len(read_partition(where.bootstrap, topic, 0)) == 1000  # the aborted ones hidden

    resume, _ = resume_and_finish(where, group)
    assert resume == 1000
    assert_exact(where)


def test_a_successor_aborts_a_killed_writers_transaction_at_once(local_stack: LocalStack, unique):
    where = writer_destination(local_stack, unique)
    group = unique("g")
    killed_mid_transaction(where, group)
    resume, opened_in = resume_and_finish(where, group)
    print(f"the successor opened in {opened_in:.2f} s (timeout {TIMEOUT_SECONDS} s)")
    assert resume == 1000
    assert opened_in < TIMEOUT_SECONDS, opened_in  # it did not wait for the timeout
    assert_exact(where)
