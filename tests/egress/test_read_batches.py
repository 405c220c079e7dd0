"""The data source's read of a planned range, batch by batch: exactly the range's records
where transaction markers make a batch reach past its end, and none that a replicator
wrote when egress skips them."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from egress.kafka_source import read_range
from egress.planning import OffsetRange
from replicator.core.kafka import arrow_reads, provenance
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.provenance import SourcePartition
from tests.fixtures.egress import create_topic
from tests.fixtures.raw_produce import produce_raw, record_batch
from tests.fixtures.stack import SOURCE


def transactions_of_three(bootstrap: str, topic: str, transactions: int) -> None:
    """``transactions`` committed transactions of three records: records at 0-2, 4-6,
    8-10, ... and a commit marker after each (3, 7, 11, ...)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    producer.init_transactions(30)
    for t in range(transactions):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=b"%d-%d" % (t, i), partition=0)
        producer.commit_transaction(30)


def offsets_read(config, rng: OffsetRange) -> list[int]:
    batches = [b for b in read_range(config, rng) if isinstance(b, pa.RecordBatch)]
    return [o for b in batches for o in b.column("offset").to_pylist()]


def test_a_range_ending_among_markers_reads_exactly_its_records(local_stack, egress_config, unique):
    """Markers make a range of N offsets hold fewer than N records, so the batch asked for
    (at most what the range still holds) reaches records past its end: they are not the
    range's."""
    topic = unique("markers")
    create_topic(local_stack, topic, 1)
    transactions_of_three(local_stack.bootstrap(SOURCE), topic, 10)  # log end 40
    config, _ = egress_config({topic: {}})
    # [0, 10): records 0-2, 4-6, 8-9 (10 is the third transaction's last record).
    assert offsets_read(config, OffsetRange(topic, 0, 0, 10)) == [0, 1, 2, 4, 5, 6, 8, 9]
    # [9, 24): ends on a marker (23).
    assert offsets_read(config, OffsetRange(topic, 0, 9, 24)) == [
        9, 10, 12, 13, 14, 16, 17, 18, 20, 21, 22
    ]  # fmt: skip
    # To the log end: the end-of-partition event comes in the last batch.
    assert offsets_read(config, OffsetRange(topic, 0, 30, 40)) == [30, 32, 33, 34, 36, 37, 38]


def test_records_the_relay_wrote_are_skipped_in_a_batch_of_records_only(
    local_stack, egress_config, unique
):
    topic = unique("relayed")
    create_topic(local_stack, topic, 1)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    relayed: list[tuple[str, str | bytes | None]] = [
        (provenance.HEADER, provenance.encode(SourcePartition("us-west-1", "orders", 0), 7))
    ]
    for i in range(6):  # the odd ones came through a relay
        producer.produce(topic, value=b"%d" % i, partition=0, headers=relayed if i % 2 else None)
    producer.flush(30)
    config, _ = egress_config({topic: {}}, skip_replicated=True)
    assert offsets_read(config, OffsetRange(topic, 0, 0, 5)) == [0, 2, 4]


@pytest.mark.parametrize("reader", ["C", "confluent-kafka"])
def test_a_record_whose_header_name_is_not_utf8_stops_the_read_naming_it(
    local_stack, egress_config, unique, monkeypatch, reader
):
    """Forged input: a header name that is not UTF-8 (no client library writes one) cannot
    be kept in a segment's string column; the read stops at it with an error naming the
    partition and offset, and never passes over it — whichever reader egress has
    (confluent-kafka's own error was a bare ``SystemError`` naming neither)."""
    if reader != "C":
        monkeypatch.setattr(arrow_reads, "lib", None)
    topic = unique("forged")
    create_topic(local_stack, topic, 1)
    bootstrap = local_stack.bootstrap(SOURCE)
    # The forging itself is sound: a batch with a UTF-8 name is read back as sent (offset 0).
    assert produce_raw(bootstrap, topic, 0, record_batch(b"fine", [(b"n\xc3\xa9", b"1")])) == 0
    assert produce_raw(bootstrap, topic, 0, record_batch(b"bad", [(b"\xff\xfe", b"2")])) == 0
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"after", partition=0)  # offset 2
    producer.flush(30)
    config, _ = egress_config({topic: {}})
    read = [b for b in read_range(config, OffsetRange(topic, 0, 0, 1))]
    assert isinstance(read[0], pa.RecordBatch)
    assert read[0].to_pylist()[0]["headers"] == [{"key": "n\u00e9", "value": b"1"}]
    with pytest.raises(
        BrokerError,
        match=rf"reading {topic} partition 0: the record at offset 1 cannot be archived: "
        "a header name is not UTF-8",
    ):
        list(read_range(config, OffsetRange(topic, 0, 0, 3)))
