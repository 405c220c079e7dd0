"""The C producer takes a writer's librdkafka handle only when it is sure it is one.

confluent-kafka does not publish its ``Producer``'s handle: :func:`arrow_produce.attach`
reads it from the object's first field, after checking that the next two hold the
``error_cb`` and ``throttle_cb`` objects the producer was made with and that librdkafka
names the ``Producer`` as the handle's opaque. Anything else, and records go through
Python (what they are written as is in ``test_writer_paths.py``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from confluent_kafka import Producer

from replicator.core.kafka import arrow_produce
from tests.fixtures.records import plain


def producer(error_cb: Any, throttle_cb: Any) -> Producer:
    return Producer(
        {"bootstrap.servers": "127.0.0.1:1", "error_cb": error_cb, "throttle_cb": throttle_cb}
    )


def on_error(error: Any) -> None: ...


def on_throttle(event: Any) -> None: ...


def test_the_handle_is_taken_from_a_producer_holding_the_callbacks_named() -> None:
    made = producer(on_error, on_throttle)
    attached = arrow_produce.attach(made, on_error, on_throttle)
    assert isinstance(attached, arrow_produce.ColumnProducer)


def test_a_producer_holding_other_callbacks_is_declined(caplog: Any) -> None:
    made = producer(on_error, on_throttle)
    arrow_produce._declines_told.clear()
    assert arrow_produce.attach(made, on_throttle, on_error) is None
    assert arrow_produce.attach(made, on_error, lambda event: None) is None
    assert "callbacks are not where" in caplog.text


def test_an_object_that_is_not_a_producer_is_declined(caplog: Any) -> None:
    class Holder:
        __slots__ = ("a", "b", "c")

        def __init__(self) -> None:
            self.a, self.b, self.c = object(), on_error, on_throttle

    arrow_produce._declines_told.clear()
    # The two fields after its first hold the callbacks, but that first is no librdkafka
    # handle: refused before it is dereferenced.
    assert arrow_produce.attach(Holder(), on_error, on_throttle) is None
    assert "Holder is not a confluent-kafka Producer" in caplog.text


def test_a_source_topic_of_the_longest_name_kafka_allows_is_produced_in_c() -> None:
    """The provenance header names the source topic, up to 249 bytes of it."""
    made = producer(on_error, on_throttle)
    attached = arrow_produce.attach(made, on_error, on_throttle)
    assert attached is not None
    table = pa.Table.from_batches([plain(3, start=2**62)])
    prefix = f"us-east-1/{'t' * 249}/2147483647/".encode()
    # all queued; the three equally large, so the first is the largest
    assert attached.produce("destination", 0, table, prefix) == (3, 0, 0)
    made.purge()


def test_the_largest_record_produced_is_named_by_its_index() -> None:
    """What a size refusal of the transaction names: the most bytes of key and value (a
    null counting none), the first of equals, among the records produced from ``start``."""
    made = producer(on_error, on_throttle)
    attached = arrow_produce.attach(made, on_error, on_throttle)
    assert attached is not None
    batch = plain(6)
    keys = [b"k", None, b"kkkk", b"", b"kk", b"kkkk"]
    values = [b"vvv", b"vvvvvvv", b"vvv", None, b"vvvvv", b"vvv"]
    table = (
        pa.Table.from_batches([batch])
        .set_column(3, "key", pa.array(keys, pa.binary()))
        .set_column(4, "value", pa.array(values, pa.binary()))
    )
    prefix = b"us-east-1/t/0/"
    assert attached.produce("destination", 0, table, prefix) == (6, 0, 1)  # 7 bytes, first
    assert attached.produce("destination", 0, table, prefix, 2) == (6, 0, 2)  # 7, first of two
    assert attached.produce("destination", 0, table, prefix, 3) == (6, 0, 4)
    assert attached.produce("destination", 0, table, prefix, 6) == (6, 0, -1)  # none produced
    made.purge()


def test_a_closed_producer_is_not_produced_to() -> None:
    made = producer(on_error, on_throttle)
    attached = arrow_produce.attach(made, on_error, on_throttle)
    assert attached is not None
    made.close()
    table = pa.Table.from_batches([plain(3)])
    assert attached.produce("destination", 0, table, b"us-east-1/t/0/") == (
        0,
        arrow_produce.CLOSED,
        -1,
    )


def test_a_c_half_built_before_the_producer_is_declined(monkeypatch: Any, caplog: Any) -> None:
    class ReaderOnly:
        def ap_client_opaque(self, handle: Any) -> Any:
            raise AssertionError("never asked")

    monkeypatch.setattr(arrow_produce, "lib", ReaderOnly())
    arrow_produce._declines_told.clear()
    assert arrow_produce.attach(producer(on_error, on_throttle), on_error, on_throttle) is None
    assert "built before it had a producer" in caplog.text


def test_a_c_half_built_from_older_sources_is_declined(monkeypatch: Any, caplog: Any) -> None:
    """A checkout updated without ``make setup``: its ``ap_produce`` takes other arguments
    than the source declares, and is never called with the new ones."""
    monkeypatch.setattr(arrow_produce, "PRODUCE_ARGUMENTS", arrow_produce.PRODUCE_ARGUMENTS - 1)
    arrow_produce._declines_told.clear()
    assert arrow_produce.attach(producer(on_error, on_throttle), on_error, on_throttle) is None
    assert "built from older sources" in caplog.text
