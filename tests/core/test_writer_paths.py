"""The exactly-once writer's two paths write the same records: a table of the segment schema
(ingress, restore, the relay) produced from its columns in C (``arrow_produce``) or, where
that is not built, through confluent-kafka's Python calls. Every record shape, every
timestamp type, on Apache Kafka, read back with a read_committed reader."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError

from replicator.core.kafka import arrow_produce, provenance
from replicator.core.kafka import writer as writer_module
from replicator.core.kafka.writer import PRODUCE_SLICE_ROWS, PartitionWriter
from replicator.core.segments.format import TIMESTAMP_NONE
from tests.fixtures.independent import read_partition
from tests.fixtures.records import every_shape, to_batch
from tests.fixtures.writer import WriterDestination, writer_destination


def shapes() -> list[dict[str, Any]]:
    """Every shape, then enough more to span two of the writer's slices."""
    records = every_shape(start=5, step=3)
    plain = records[0]
    next_offset = records[-1]["offset"] + 1
    for offset in range(next_offset, next_offset + PRODUCE_SLICE_ROWS):
        records.append({**plain, "offset": offset, "value": b"%d" % offset})
    return records


ENTRIES = ("table", "table through Python")


def write(where: WriterDestination, group: str, how: str, records: list[dict]) -> int:
    writer = PartitionWriter(where.kafka, group, where.target, where.store, kind="relay")
    assert writer._columns is not None  # the C producer is built and attached
    if how == "table through Python":
        writer._columns = None
    try:
        writer.open()
        writer.write(pa.Table.from_batches([to_batch(records)]))
        return writer.commit(records[-1]["offset"] + 1)
    finally:
        writer.close()


def test_both_paths_write_a_table_as_the_same_records(local_stack, unique):
    assert_both_paths_write(local_stack, unique, shapes())


def test_a_full_producer_queue_loses_and_repeats_no_record(local_stack, unique, monkeypatch):
    """librdkafka's queue holding seven records: ``produce`` finds it full again and again
    in every slice, and each record that did is produced again once deliveries made room
    (``_produce_again``; in C, the call made again from the record refused). Every path
    still writes every record once, in order, and the commit knows the last destination
    offset (the delivery report of a slice's last record, which found the queue full as
    often as any)."""
    monkeypatch.setattr(writer_module, "PRODUCER_BUFFER_RECORDS", 7)
    retried: list[int] = []
    refused_in_c: list[int] = []
    produce_again = PartitionWriter._produce_again
    produce_in_c = arrow_produce.ColumnProducer.produce

    def counted(self: PartitionWriter, offset: int, row: tuple[Any, ...]) -> None:
        retried.append(offset)
        produce_again(self, offset, row)

    def counted_in_c(self: arrow_produce.ColumnProducer, *args: Any) -> tuple[int, int, int]:
        stopped, code, largest = produce_in_c(self, *args)
        if code:
            assert code == KafkaError._QUEUE_FULL, code
            refused_in_c.append(stopped)
        return stopped, code, largest

    monkeypatch.setattr(PartitionWriter, "_produce_again", counted)
    monkeypatch.setattr(arrow_produce.ColumnProducer, "produce", counted_in_c)
    records = shapes()
    assert_both_paths_write(local_stack, unique, records)
    assert len(retried) > 100, len(retried)
    assert len(refused_in_c) > 100, len(refused_in_c)


def assert_both_paths_write(local_stack: Any, unique: Any, records: list[dict]) -> None:
    copies = {}
    for how in ENTRIES:
        where = writer_destination(local_stack, unique)
        last_destination_offset = write(where, unique("g"), how, records)
        assert last_destination_offset == len(records) - 1, how
        resume = where.store.resume_point(where.target)
        assert (resume.next_source_offset, resume.destination_offset) == (
            records[-1]["offset"] + 1,
            len(records) - 1,
        ), how
        copies[how] = read_partition(where.bootstrap, where.target.destination_topic, 0)

    by_table, by_python = (copies[how] for how in ENTRIES)
    assert len(by_table) == len(by_python) == len(records)
    source = provenance.SourcePartition("us-east-1", "t", 0)
    for record, a, p in zip(records, by_table, by_python, strict=True):
        want_headers = (
            *((h["key"], h["value"]) for h in record["headers"]),
            (provenance.HEADER, provenance.encode(source, record["offset"])),
        )
        assert (
            (a[3], a[4], a[5])
            == (p[3], p[4], p[5])
            == (
                record["key"],
                record["value"],
                want_headers,
            )
        ), record["offset"]
        if record["timestamp_type"] != TIMESTAMP_NONE and record["timestamp"] > 0:
            # (none, or 0: the producer stamps its clock)
            assert a[1] == p[1] == record["timestamp"], record["offset"]
