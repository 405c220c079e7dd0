"""A record the destination broker refuses for its size, wherever it sits in what the
writer produced: named by its source offset, the same every time, so the partition halts
instead of failing and being restarted into the same refusal (a crash loop).

The writer asks for one delivery report per slice of records (on its last one), and the
broker refuses a whole batch: a refused record that is not a slice's last is heard of as
the batch's report or only as the commit's failure."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.core.kafka.errors import RecordTooLargeError
from replicator.core.kafka.writer import PartitionWriter
from replicator.core.segments.format import SCHEMA
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
