"""The C partition reader against the confluent-kafka one, on the same records of a real
broker: the same Arrow batches (every column, nulls apart from empties, headers in order),
and the same stops (end of partition, a range's end, skipped provenance, byte caps)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.core.kafka import arrow_reads, provenance
from replicator.core.kafka.arrow_reads import (
    ArrowPartitionReader,
    MessagePartitionReader,
    PartitionReader,
    c_reader_available,
    conf_text,
)
from replicator.core.kafka.clients import client_config
from tests.fixtures.egress import create_topic
from tests.fixtures.stack import SOURCE

READERS: list[Callable[..., PartitionReader]] = [ArrowPartitionReader, MessagePartitionReader]


def test_make_setup_built_the_c_reader():
    """Egress would fall back to the slower reader silently: the build must have run."""
    assert c_reader_available()


def reader_conf(local_stack: Any, **overrides: Any) -> dict[str, Any]:
    return client_config(
        local_stack.config.region(SOURCE).kafka,
        group_id="arrow-reads",
        enable_auto_commit=False,
        enable_partition_eof=True,
        auto_offset_reset="error",
        isolation_level="read_committed",
        **overrides,
    )


def read_all(
    reader: PartitionReader, topic: str, start: int, end: int, most: int = 7
) -> tuple[pa.Table, list]:
    """Everything in [start, end) and the stops met on the way."""
    reader.assign(topic, 0, start)
    position, batches, stops = start, [], []
    try:
        for _ in range(200):
            chunk = reader.read(most, 1.0, position, end)
            assert chunk.position >= position
            position = chunk.position
            if chunk.records is not None:
                batches.append(chunk.records)
            if chunk.error is not None:
                stops.append((chunk.error.code(), chunk.error_offset))
                if chunk.error.code() == KafkaError._PARTITION_EOF:
                    position = max(position, chunk.error_offset)
                    break
            if chunk.done or position >= end:
                break
    finally:
        reader.close()
    table = pa.Table.from_batches(batches, schema=arrow_reads.SCHEMA)
    return table, stops


RECORDS: list[dict[str, Any]] = [
    {"key": None, "value": None},
    {"key": b"", "value": b""},
    {"key": b"k", "value": b"v" * 5000, "headers": [("a", b"1"), ("a", None), ("\u00e9", b"")]},
    {"key": b"\x00\xff", "value": b"x", "headers": [], "timestamp": 0},
    {"key": None, "value": b"y", "headers": [("only", None)], "timestamp": 1_000_000_000_000},
    {"key": b"z", "value": None, "headers": [("h", b"h" * 300)]},
]


def produce(local_stack: Any, topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), **conf})
    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    for record in records:
        producer.produce(topic, partition=0, on_delivery=delivered, **record)
    assert producer.flush(30) == 0
    assert not failed


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_both_readers_give_the_same_batches(local_stack, unique, timestamp_type):
    topic = unique("arrow-same")
    create_topic(local_stack, topic, 1, **{"message.timestamp.type": timestamp_type})
    produce(local_stack, topic, RECORDS * 4)
    tables = [read_all(reader(reader_conf(local_stack)), topic, 0, 24) for reader in READERS]
    (c_table, c_stops), (py_table, py_stops) = tables
    assert c_table.num_rows == 24
    assert c_table.equals(py_table), (c_table.to_pylist()[:3], py_table.to_pylist()[:3])
    assert c_stops == py_stops == [(KafkaError._PARTITION_EOF, 24)]
    assert set(c_table.column("timestamp_type").to_pylist()) == {
        1 if timestamp_type == "CreateTime" else 2
    }
    first = c_table.slice(2, 1).to_pylist()[0]
    assert first["headers"] == [
        {"key": "a", "value": b"1"},
        {"key": "a", "value": None},
        {"key": "\u00e9", "value": b""},
    ]


def test_a_range_end_provenance_and_aborted_transactions(local_stack, unique):
    """Offsets past the range's end are not taken; provenance-carrying records are passed
    over; aborted records and markers never appear (read_committed)."""
    topic = unique("arrow-stops")
    create_topic(local_stack, topic, 1)
    relayed = [(provenance.HEADER, b"us-west-1/orders/0@7")]
    produce(local_stack, topic, [{"value": b"%d" % i, "headers": relayed if i % 3 == 1 else None}
                                 for i in range(6)])  # fmt: skip
    producer = Producer(
        {"bootstrap.servers": local_stack.bootstrap(SOURCE), "transactional.id": topic}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, partition=0, value=b"aborted")
    producer.flush(30)  # written before the abort, not purged by it
    producer.abort_transaction(30)  # offset 6, marker 7
    producer.begin_transaction()
    producer.produce(topic, partition=0, value=b"committed")
    producer.commit_transaction(30)  # offset 8, marker 9
    produce(local_stack, topic, [{"value": b"after"}])  # offset 10
    for reader in READERS:
        table, _ = read_all(reader(reader_conf(local_stack), provenance.HEADER), topic, 0, 10)
        assert table.column("offset").to_pylist() == [0, 2, 3, 5, 8], (reader, table.to_pylist())
        table, stops = read_all(reader(reader_conf(local_stack)), topic, 3, 11)
        assert table.column("offset").to_pylist() == [3, 4, 5, 8, 10], reader
        assert stops == [(KafkaError._PARTITION_EOF, 11)]


def test_a_read_stops_at_its_byte_cap_and_the_next_read_goes_on(local_stack, unique, monkeypatch):
    topic = unique("arrow-cap")
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, [{"value": b"v" * 1000} for _ in range(20)])
    monkeypatch.setattr(arrow_reads, "MOST_BATCH_BYTES", 2500)
    reader = ArrowPartitionReader(reader_conf(local_stack))
    reader.assign(topic, 0, 0)
    try:
        sizes, position = [], 0
        while position < 20:
            chunk = reader.read(20, 1.0, position, 20)
            if chunk.records is not None:
                sizes.append(chunk.records.num_rows)
                assert chunk.records.column("offset")[0].as_py() == position
            position = chunk.position
        assert sizes == [3] * 6 + [2]
    finally:
        reader.close()


def test_an_unknown_setting_is_a_clear_error(local_stack):
    conf = reader_conf(local_stack)
    conf["no.such.setting"] = "1"
    with pytest.raises(Exception, match=r"no\.such\.setting"):
        ArrowPartitionReader(conf)


def test_settings_are_given_as_librdkafka_text():
    assert [conf_text(v) for v in (True, False, 10, "x")] == ["true", "false", "10", "x"]
    assert arrow_reads.c_reader_takes({"logger": object(), "a": 1})
    assert not arrow_reads.c_reader_takes({"oauth_cb": lambda *_: None})


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=12))
def test_header_names_are_judged_utf8_as_python_does(data):
    try:
        data.decode("utf-8")
        expected = True
    except UnicodeDecodeError:
        expected = False
    assert bool(arrow_reads.lib.ar_utf8_valid(data, len(data))) is expected


def test_without_the_c_reader_partitions_are_read_through_confluent_kafka(monkeypatch, caplog):
    """What an install without a compiler gets: the same contract, and one warning."""
    monkeypatch.setattr(arrow_reads, "lib", None)
    monkeypatch.setattr(arrow_reads, "_fallback_told", [])
    conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    with caplog.at_level(logging.WARNING, logger=arrow_reads.__name__):
        readers = [arrow_reads.open_reader(conf) for _ in range(2)]
    try:
        assert all(isinstance(r, MessagePartitionReader) for r in readers)
        warnings = [r.getMessage() for r in caplog.records]
        assert warnings == [
            "reading partitions through confluent-kafka's Python objects, several times "
            "slower than the C range reader: the C range reader is not built, or was built "
            "from older sources (`make setup` builds it)"
        ]
    finally:
        for reader in readers:
            reader.close()


HEADER_NAMES = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
GENERATED_RECORD = st.fixed_dictionaries(
    {
        "key": st.none() | st.binary(max_size=40),
        "value": st.none() | st.binary(max_size=3000),
        "headers": st.none()
        | st.lists(st.tuples(HEADER_NAMES, st.none() | st.binary(max_size=40)), max_size=5),
    }
)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(records=st.lists(GENERATED_RECORD, min_size=1, max_size=60), most=st.integers(1, 25))
def test_generated_records_read_the_same_through_both_readers(local_stack, unique, records, most):
    """Whatever the records (nulls, empties, any header names and counts) and however many
    a read may take, both readers give the same table, record for record."""
    topic = unique("arrow-generated")
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, records)
    tables = []
    for reader in READERS:
        table, stops = read_all(reader(reader_conf(local_stack)), topic, 0, len(records), most)
        assert stops in ([], [(KafkaError._PARTITION_EOF, len(records))])
        tables.append(table)
    assert tables[0].num_rows == len(records)
    assert tables[0].equals(tables[1])
    assert tables[0].column("value").to_pylist() == [r["value"] for r in records]


@pytest.mark.parametrize("make_reader", READERS)
def test_an_eager_read_hands_over_what_is_there_without_waiting_for_a_full_batch(
    local_stack, unique, make_reader
):
    """The relay's reads: a caught-up partition's records must not wait out the read's
    timeout for a batch that is not coming (librdkafka's batch consume would hold them
    the whole 60 s here)."""
    topic = unique("eager")
    create_topic(local_stack, topic, 1)
    produce(local_stack, topic, [{"value": b"%d" % i} for i in range(5)])
    reader = make_reader(reader_conf(local_stack), eager=True)
    reader.assign(topic, 0, 0)
    try:
        values: list[bytes] = []
        position = 0
        started = time.monotonic()
        while len(values) < 5:
            chunk = reader.read(1000, 60.0, position, 2**63 - 1)
            position = chunk.position
            if chunk.records is not None:
                values += chunk.records.column("value").to_pylist()
        assert time.monotonic() - started < 30
        assert values == [b"%d" % i for i in range(5)]
        produce(local_stack, topic, [{"value": b"5"}])
        chunk = reader.read(1000, 60.0, position, 2**63 - 1)
        while chunk.records is None:  # the end of partition first
            assert chunk.error is not None and chunk.error.code() == KafkaError._PARTITION_EOF
            chunk = reader.read(1000, 60.0, position, 2**63 - 1)
        assert chunk.records.column("value").to_pylist() == [b"5"]
        assert time.monotonic() - started < 30
    finally:
        reader.close()


def test_the_c_reader_is_used_only_as_its_source_declares_it():
    """A C half built from older sources (a checkout updated without ``make setup``) is
    not called with the new arguments: the slower reader is used instead."""
    ffi, lib = arrow_reads.ffi, arrow_reads.lib
    assert arrow_reads.declared_as_built(ffi, lib, "ar_read", arrow_reads.READ_ARGUMENTS)
    assert not arrow_reads.declared_as_built(ffi, lib, "ar_read", arrow_reads.READ_ARGUMENTS - 1)
    assert not arrow_reads.declared_as_built(ffi, lib, "ar_read_gone", 1)
    assert not arrow_reads.declared_as_built(None, None, "ar_read", arrow_reads.READ_ARGUMENTS)
