"""Producing segment-schema records from their Arrow columns in C, through a writer's own
producer.

Why: between an Arrow table and ``Producer.produce`` the writer made Python objects of
every record — its source offset, record key, value, timestamp, a header list with the
provenance header's bytes and tuples — then a ``produce`` call that took them apart
again: 3.0 to 3.5 µs of CPU a record of the benchmark's shape, against 0.95 µs for the
same records produced from C (both measured apart, against a producer with no broker;
docs/performance.md). :class:`ColumnProducer` hands the columns'
buffers to ``ap_produce`` (``arrow_producer.c``), which calls librdkafka's ``produceva`` on
the same client the writer's transactions run on: the records go into the open
transaction, in order, as :meth:`PartitionWriter._produce_columns` would have produced
them, byte for byte (``tests/core/test_writer_paths.py`` compares the two).

The producer's librdkafka handle is not public in confluent-kafka: it is the first field
after the object header of its ``Producer`` (``Handle.rk`` in its C source). It is taken
only from a ``Producer``, only when the two fields beside it hold the very ``error_cb``
and ``throttle_cb`` objects the writer configured, and librdkafka then names that
``Producer`` as the handle's opaque (confluent-kafka sets it so): a confluent-kafka whose
layout changed fails those checks, and the writer produces through Python as before
(:func:`attach` returns None). So does a process where the C half was not built.

What stays in Python, and why: the delivery report a slice's last record carries (a
Python callback, the destination offset the checkpoint records), so the writer produces
that record itself; and every decision on a refusal (queue full: serve deliveries and go
on from the record refused; anything else: the writer's error for that record).
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer

from replicator.core.kafka import provenance
from replicator.core.kafka.arrow_reads import declared_as_built

try:  # built by `make setup` (replicator.core.kafka.arrow_reader_build)
    from replicator.core.kafka._arrow_reader import ffi, lib  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - exercised where no compiler was available
    ffi = lib = None

log = logging.getLogger(__name__)

_POINTER = ctypes.sizeof(ctypes.c_void_p)
_OBJECT_HEADER = ctypes.sizeof(ctypes.c_ssize_t) + _POINTER  # ob_refcnt, ob_type
_HANDLE_FIELDS = ("rk", "error_cb", "throttle_cb")
"""The first fields of confluent-kafka's ``Handle``, in order, after the object header."""
PRODUCE_ARGUMENTS = 11
"""The arguments ``ap_produce`` takes in the C source beside this module."""
CLOSED = -197
"""librdkafka's RD_KAFKA_RESP_ERR__DESTROY: what a produce on a closed ``Producer``
reports."""


def _field(obj: object, index: int) -> int:
    """The pointer-sized field ``index`` after ``obj``'s object header."""
    value = ctypes.c_void_p.from_address(id(obj) + _OBJECT_HEADER + index * _POINTER).value
    return value or 0


class ColumnProducer:
    """Produces slices of segment-schema records through one librdkafka producer."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self._error = ffi.new("int32_t *")
        self._largest = ffi.new("int64_t *")
        self._header_name = ffi.new("char[]", provenance.HEADER.encode())

    def produce(
        self,
        topic: str,
        partition: int,
        table: pa.Table,
        header_prefix: bytes,
        start: int = 0,
    ) -> tuple[int, int, int]:
        """Produce rows ``start``.. of ``table`` (segment schema) to ``topic``/``partition``
        with the provenance header ``header_prefix`` + source offset appended. Returns the
        index of the first row not produced (``len(table)`` when all were), the code
        librdkafka refused it with (0 when all were produced), and the index of the
        produced row with the most bytes of key and value (-1 when none was)."""
        batch = table.combine_chunks().to_batches()
        if not batch:
            return len(table), 0, -1
        # Read again at every call: a Producer closed meanwhile holds none (it destroyed
        # its handle), and confluent-kafka's own calls refuse then too.
        handle = _field(self._producer, 0)
        if not handle:
            return start, CLOSED, -1
        records, keep = _records(batch[0])
        prefix = ffi.new("char[]", header_prefix)
        stopped = lib.ap_produce(
            ffi.cast("void *", handle),
            topic.encode(),
            partition,
            records,
            start,
            len(table),
            self._header_name,
            prefix,
            len(header_prefix),
            self._error,
            self._largest,
        )
        del keep  # the buffers are copied by librdkafka: released once the call returned
        return int(stopped), int(self._error[0]), int(self._largest[0])


def attach(producer: Any, error_cb: object, throttle_cb: object) -> ColumnProducer | None:
    """A :class:`ColumnProducer` over ``producer`` (a confluent-kafka ``Producer`` created
    with these very ``error_cb`` and ``throttle_cb`` objects), or None where the C half is
    not built or the handle cannot be taken safely (see the module docstring)."""
    if lib is None:
        return _declined("the C producer is not built (`make setup` builds it)")
    if not hasattr(lib, "ap_produce"):
        return _declined("the C half was built before it had a producer (`make setup`)")
    if not declared_as_built(ffi, lib, "ap_produce", PRODUCE_ARGUMENTS):
        return _declined("the C half was built from older sources (`make setup`)")
    if not isinstance(producer, Producer):
        return _declined(f"{type(producer).__name__} is not a confluent-kafka Producer")
    if type(producer).__basicsize__ < _OBJECT_HEADER + len(_HANDLE_FIELDS) * _POINTER:
        return _declined("its objects are smaller than the fields it must hold")
    if _field(producer, 1) != id(error_cb) or _field(producer, 2) != id(throttle_cb):
        return _declined("its callbacks are not where its handle's layout puts them")
    handle = _field(producer, 0)
    named = lib.ap_client_opaque(ffi.cast("void *", handle)) if handle else ffi.NULL
    if int(ffi.cast("uintptr_t", named)) != id(producer):
        return _declined("its librdkafka handle does not name it")
    return ColumnProducer(producer)


def _declined(why: str) -> ColumnProducer | None:
    """None, said once per process and reason: a process opens a writer per partition."""
    if why not in _declines_told:
        _declines_told.add(why)
        log.warning(
            "producing records through confluent-kafka's Python calls, about three times "
            "the CPU a record of the C producer: %s",
            why,
        )
    return None


_declines_told: set[str] = set()


def _binary(array: pa.Array, keep: list[Any]) -> Any:
    """``array`` (binary or string) as an ``ap_binary``: its buffers, as they are."""
    validity, offsets, data = array.buffers()[:3]
    keep.append(array)
    return {
        "validity": ffi.cast("const uint8_t *", 0 if validity is None else validity.address),
        "validity_offset": array.offset,
        "offsets": ffi.cast("const int32_t *", offsets.address) + array.offset,
        "data": ffi.cast("const uint8_t *", 0 if data is None else data.address),
    }


def _fixed(array: pa.Array, ctype: str, keep: list[Any]) -> Any:
    """A null-free fixed-width ``array``'s values, from its first element."""
    keep.append(array)
    return ffi.cast(f"const {ctype} *", array.buffers()[1].address) + array.offset


def _records(batch: pa.RecordBatch) -> tuple[Any, list[Any]]:
    """``batch`` as an ``ap_records``, and the arrays its pointers point into."""
    keep: list[Any] = []
    headers = batch.column("headers")
    entries = headers.values  # every entry, indexed by the list offsets as they are
    records = ffi.new(
        "struct ap_records *",
        {
            "offsets": _fixed(batch.column("offset"), "int64_t", keep),
            "timestamps": _fixed(batch.column("timestamp"), "int64_t", keep),
            "timestamp_types": _fixed(batch.column("timestamp_type"), "int8_t", keep),
            "keys": _binary(batch.column("key"), keep),
            "values": _binary(batch.column("value"), keep),
            "header_bounds": _fixed(headers.offsets, "int32_t", keep),
            "header_keys": _binary(entries.field("key"), keep),
            "header_values": _binary(entries.field("value"), keep),
        },
    )
    return records, keep
