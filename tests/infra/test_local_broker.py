"""What the local broker (Tansu) does with overlapping transactions, as the README's "How
exactly-once is achieved" says: a commit is held while another transaction that wrote
earlier to a partition it shares is open, the partition's committed end stays at the
held transaction's first offset, a new ``init_transactions`` of the same id leaves it
held, and a later transaction overlapping it completes it. A broker that stops doing so
fails this test, and the README's account of hanging transactions is due for a change."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.independent import watermarks
from tests.fixtures.stack import DESTINATION
from tests.ingress.test_takeover import log_end


def committed_and_log_end(local_stack, topic: str) -> tuple[int, int]:
    bootstrap = local_stack.bootstrap(DESTINATION)
    return watermarks(bootstrap, topic, 0)[1], log_end(local_stack, topic, 0)


def test_a_commit_is_held_while_an_overlapping_transaction_is_open(local_stack, unique):
    bootstrap = local_stack.bootstrap(DESTINATION)
    records, shared = unique("records"), unique("shared")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(records, 1), NewTopic(shared, 1)]).values():
        future.result(30)

    def producer(transactional_id: str) -> Producer:
        made = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        made.init_transactions(30)
        return made

    first_id = unique("first")
    first, other = producer(first_id), producer(unique("other"))
    other.begin_transaction()
    other.produce(shared, b"other's checkpoint", partition=0)
    other.flush(10)
    first.begin_transaction()
    first.produce(records, b"a record", partition=0)
    first.produce(shared, b"first's checkpoint", partition=0)
    first.flush(10)
    first.commit_transaction(30)  # answered as done
    assert committed_and_log_end(local_stack, records) == (0, 2)  # held: record and marker

    successor = producer(first_id)  # as a new owner after a kill: still held
    assert committed_and_log_end(local_stack, records) == (0, 2)

    successor.begin_transaction()
    successor.produce(records, b"the next record", partition=0)
    successor.flush(10)
    successor.commit_transaction(30)  # overlaps the held one in its partition
    assert committed_and_log_end(local_stack, records) == (4, 4)
    other.abort_transaction(30)
