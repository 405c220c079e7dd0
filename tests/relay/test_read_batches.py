"""The relay's pure steps between a read's Arrow batch and its writer: which records are
the relay's to write, the ``bytes`` metric, the record relayed last as failover compares
it, and the reader's settings. No services."""

from __future__ import annotations

import pyarrow as pa
from confluent_kafka import Consumer

from relay.failover import last_record, record_ref
from relay.worker import READ_BATCH, from_offset, key_and_value_bytes, reader_settings
from tests.fixtures.records import every_shape, to_batch


def test_records_before_the_next_offset_are_not_the_relays_to_write():
    batch = to_batch(every_shape(start=10, step=2))  # offsets 10, 12, ..., 28
    from_16 = batch.slice(3).to_pylist()
    assert from_offset(None, 10) is None
    assert from_offset(batch, 10) is batch
    assert from_offset(batch, 5) is batch
    kept = from_offset(batch, 15)
    assert kept is not None
    assert kept.column("offset").to_pylist() == list(range(16, 30, 2))
    assert kept.to_pylist() == from_16
    assert from_offset(batch, 29) is None


def test_the_bytes_metric_counts_keys_and_values_nulls_as_nothing():
    records = every_shape()
    expected = sum(len(r["key"] or b"") + len(r["value"] or b"") for r in records)
    assert key_and_value_bytes(pa.Table.from_batches([to_batch(records)])) == expected
    table = pa.Table.from_batches([to_batch(records)])
    assert key_and_value_bytes(table.slice(0, 0)) == 0
    for start, stop in ((3, 7), (0, 1), (9, 10)):  # a slice counts its own records only
        part = records[start:stop]
        want = sum(len(r["key"] or b"") + len(r["value"] or b"") for r in part)
        assert key_and_value_bytes(table.slice(start, stop - start)) == want
    two_chunks = pa.Table.from_batches([to_batch(records[:4]), to_batch(records[4:])])
    assert key_and_value_bytes(two_chunks) == expected


def test_the_last_record_is_described_as_it_was_read_every_shape_and_timestamp_type():
    records = every_shape(start=7)
    for last in range(len(records)):
        r = records[last]
        described = last_record(to_batch(records[: last + 1]))
        assert described == record_ref(
            r["offset"], r["key"], r["value"], r["timestamp_type"], r["timestamp"]
        ), r
        assert (described.timestamp is None) == (r["timestamp_type"] == 0), r


def test_a_readers_read_ahead_is_bounded_and_the_clusters_own_config_overrides_it():
    plain = reader_settings({"bootstrap.servers": "127.0.0.1:1"}, "relay")
    # librdkafka's defaults (100,000 records, 64 MiB a partition) held most of the
    # process: 670 MiB of RSS for one relay of 8 partitions (docs/performance.md).
    assert plain["queued.min.messages"] == 4 * READ_BATCH
    assert plain["queued.max.messages.kbytes"] == 16 * 1024
    assert plain["fetch.queue.backoff.ms"] == 10
    Consumer(plain).close()  # librdkafka takes them together
    raw = {"bootstrap.servers": "127.0.0.1:1", "queued.min.messages": 50_000}
    raw |= {"isolation.level": "read_uncommitted", "group.id": "theirs"}
    tuned = reader_settings(raw, "relay")
    assert tuned["queued.min.messages"] == 50_000
    # What the relay's reading relies on is not the cluster's to change.
    assert (tuned["isolation.level"], tuned["group.id"]) == ("read_committed", "relay-reader")
