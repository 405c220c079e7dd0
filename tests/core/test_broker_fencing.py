"""What Apache Kafka's transactions do for the exactly-once writer, without the project's
freeze defence: a new writer of the same destination partition fences the old one (its
``init_transactions`` bumps the producer epoch and aborts the old writer's open
transaction), and everything the old writer does after that is refused by the broker.

These are the broker's half of the "How exactly-once is achieved" (docs/operations/ingress.md);
the freeze
watch (:mod:`replicator.core.freezes`) is the other half and is not given to any writer
here."""

from __future__ import annotations

import pytest

from replicator.core.kafka.errors import OwnershipLostError
from replicator.core.kafka.writer import PartitionWriter
from tests.fixtures.independent import read_partition, watermarks
from tests.fixtures.ingress import segment_table as table
from tests.fixtures.writer import writer_destination


def test_a_successor_fences_an_open_transaction_and_the_zombie_commits_nothing(local_stack, unique):
    where = writer_destination(local_stack, unique)
    group = unique("g")
    zombie = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    assert zombie.open().next_source_offset is None  # nothing written yet
    zombie.write(table(0, 1000))
    zombie.commit(1000)
    zombie.write(table(1000, 1000))
    zombie._producer.flush(30)  # on the broker, in a transaction still open
    assert watermarks(where.bootstrap, where.target.destination_topic, 0)[1] < 2002

    successor = PartitionWriter(where.kafka, group, where.target, where.store, kind="ingress")
    resume = successor.open()  # fences the zombie and aborts its open transaction
    assert resume.next_source_offset == 1000

    with pytest.raises(OwnershipLostError, match="written by another instance"):
        zombie.commit(2000)
    with pytest.raises(OwnershipLostError):
        zombie.write(table(2000, 1000))
        zombie.commit(3000)
    zombie.close()  # a fenced writer's close does not raise

    successor.write(table(1000, 1000))
    successor.commit(2000)
    successor.close()
    committed = read_partition(where.bootstrap, where.target.destination_topic, 0)
    assert [int(r[5][0][1]) for r in committed] == list(range(2000))  # the "h" header
    # read_uncommitted shows the aborted copy of 1000..1999 too: the broker kept it out.
    everything = read_partition(
        where.bootstrap, where.target.destination_topic, 0, "read_uncommitted"
    )
    assert len(everything) == 3000
