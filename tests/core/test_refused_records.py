"""A record the destination broker refuses for its size, wherever it sits in what the
writer produced: named by its source offset, the same every time, so the partition halts
instead of failing and being restarted into the same refusal (a crash loop).

The writer asks for one delivery report per slice of records (on its last one), and the
broker refuses a whole batch: a refused record that is not a slice's last is heard of as
the batch's report or only as the commit's failure."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.core.kafka.errors import RecordTooLargeError
from replicator.core.kafka.writer import PartitionWriter
from replicator.core.segments.format import SCHEMA
from tests.fixtures.independent import read_partition
from tests.fixtures.writer import writer_destination

LIMIT = 20_000


def table(values: list[bytes]) -> pa.Table:
    n = len(values)
    return pa.Table.from_pydict(
        {
            "offset": list(range(n)),
            "timestamp": [1_700_000_000_000] * n,
            "timestamp_type": [1] * n,
            "key": [None] * n,
            "value": values,
            "headers": [[]] * n,
        },
        schema=SCHEMA,
    )


@pytest.mark.parametrize("big_at", [0, 5, 9])
def test_a_record_too_large_for_the_topic_is_named_wherever_it_is(local_stack, unique, big_at):
    where = writer_destination(local_stack, unique)
    # A destination whose limit the client does not know: the broker refuses.
    small = unique("small")
    topic = NewTopic(small, 1, config={"max.message.bytes": str(LIMIT)})
    admin = AdminClient(where.kafka)  # alive until the future resolves
    admin.create_topics([topic])[small].result(timeout=30)
    target = type(where.target)(where.target.source, small, 0)
    values = [b"small"] * 10
    values[big_at] = b"x" * (3 * LIMIT)
    for _attempt in range(2):  # the same answer after a restart
        writer = PartitionWriter(where.kafka, unique("g"), target, where.store, kind="ingress")
        writer.open()
        with pytest.raises(RecordTooLargeError, match=f"record at source offset {big_at} "):
            writer.write(table(values))
            writer.commit(10)
        writer.close()


BUFFER_KIB = 8 * 1024  # the writer's default queue.buffering.max.kbytes


@pytest.mark.parametrize("big_at", [1, 2], ids=["produced-in-c", "a-slice's-last"])
def test_a_value_larger_than_the_producer_buffers_is_named_not_offered_forever(
    local_stack, unique, big_at
):
    """librdkafka refuses a value larger than its queue's byte bound as "queue full", into
    an empty queue too: offered again after each poll, the writer spun forever (its
    partition stuck, nothing said). Now it is refused, named, with the setting to raise."""
    where = writer_destination(local_stack, unique)
    values = [b"small"] * 3
    values[big_at] = b"x" * (BUFFER_KIB * 1024 + 1)
    writer = PartitionWriter(where.kafka, unique("g"), where.target, where.store, kind="ingress")
    try:
        writer.open()
        refused = outcome_within(60, lambda: writer.write(table(values)))
        assert isinstance(refused, RecordTooLargeError), refused
        assert f"record at source offset {big_at} of us-east-1/t partition 0" in str(refused)
        assert "queue.buffering.max.kbytes" in str(refused)
    finally:
        writer.close()


def test_a_raised_buffer_writes_a_value_larger_than_the_default(local_stack, unique):
    where = writer_destination(local_stack, unique)
    large = unique("large")
    topic = NewTopic(large, 1, config={"max.message.bytes": str(12 * 1024**2)})
    admin = AdminClient(where.kafka)
    admin.create_topics([topic])[large].result(timeout=30)
    target = type(where.target)(where.target.source, large, 0)
    values = [b"small", b"x" * (BUFFER_KIB * 1024 + 1), b"small"]
    kafka = {**where.kafka, "queue.buffering.max.kbytes": 2 * BUFFER_KIB}
    writer = PartitionWriter(kafka, unique("g"), target, where.store, kind="ingress")
    try:
        writer.open()
        assert outcome_within(60, lambda: writer.write(table(values))) is None
        assert writer.commit(3) == 2
    finally:
        writer.close()
    written = read_partition(where.bootstrap, large, 0)
    assert [record[4] for record in written] == values


def outcome_within(seconds: float, action: Callable[[], object]) -> BaseException | None:
    """What ``action`` raised (None if nothing), failing the test if it has not ended
    within ``seconds``: a writer offering a record again and again never returns."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still offering the record after {seconds:.0f} s"
    return outcome[0]
