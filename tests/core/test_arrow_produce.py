"""The C producer takes a writer's librdkafka handle only when it is sure it is one.

confluent-kafka does not publish its ``Producer``'s handle: :func:`arrow_produce.attach`
reads it from the object's first field, after checking that the next two hold the
``error_cb`` and ``throttle_cb`` objects the producer was made with and that librdkafka
names the ``Producer`` as the handle's opaque. Anything else, and records go through
Python (what they are written as is in ``test_writer_paths.py``)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from replicator.core.kafka import arrow_produce


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
