"""Reading one partition's records as Arrow batches of the segment schema.

Two readers keep one contract (:class:`PartitionReader`); :func:`open_reader` chooses:

- :class:`ArrowPartitionReader`, the C reader (``arrow_reader.c``, built by ``make setup``
  against the librdkafka of confluent-kafka's wheel): librdkafka's messages are copied
  straight into Arrow's column buffers, with no Python object per record. Reading was
  egress's largest cost per record (a confluent-kafka ``Message`` each, then one Python
  list per column: ~1.9 µs of ~4.1).
- :class:`MessagePartitionReader`, the same over confluent-kafka's ``Consumer`` and
  :func:`replicator.core.kafka.records.messages_to_records`: used where the C reader is not
  built (no compiler where the project was installed) or a client setting is a Python
  callable other than the logger (an OAuth token callback cannot cross into C).

Egress's ranges and the relay's partitions are read through them. The contract of
:meth:`PartitionReader.read`, which each caller builds its rules on (egress's
``read_range``, the relay's ``RelayWorker._read``: ends, losses, retries, halts):

- It returns the records taken, in offset order, all below ``end``; ``position``, the
  offset after the last record taken or passed over (a record carrying ``skip_header``,
  when given, is passed over), never less than the position asked from.
- It stops *before* an error event (end of partition, offset out of range, a transport
  error, a header name that is not UTF-8) and reports it with its offset; what the
  consumer fetched after it is handed out by the next call.
- A record at or past ``end`` ends the read: ``done``, position ``end``; what was fetched
  after it is dropped. :meth:`PartitionReader.assign` drops whatever is pending too.
- It waits up to its timeout for ``most`` records; an *eager* reader (``open_reader(...,
  eager=True)``, the relay's) waits only for the first and takes whatever else was already
  fetched: librdkafka's batch consume would hold a caught-up reader's records for the rest
  of the timeout (measured in the relay: every read took the full 50 ms).
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple, Protocol

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from replicator.core.kafka.client_logs import CLIENT_LOGGER
from replicator.core.kafka.clients import consume_available
from replicator.core.kafka.errors import BrokerError
from replicator.core.kafka.records import messages_to_records
from replicator.core.segments.format import SCHEMA

try:  # built by `make setup` (replicator.core.kafka.arrow_reader_build)
    from replicator.core.kafka._arrow_reader import ffi, lib  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - exercised where no compiler was available
    ffi = lib = None

log = logging.getLogger(__name__)

READ_ARGUMENTS = 9
"""The arguments ``ar_read`` takes in the C source beside this module."""


def declared_as_built(ffi: Any, lib: Any, function: str, arguments: int) -> bool:
    """Whether ``function`` of the built C half (its ``ffi`` and ``lib``) takes
    ``arguments`` arguments, as the source here declares it. A checkout updated without
    ``make setup`` keeps a C half built from older sources, which must not be called with
    the new arguments (cffi would refuse every call)."""
    if lib is None or not hasattr(lib, function):
        return False
    return len(ffi.typeof(ffi.addressof(lib, function)).args) == arguments


if not declared_as_built(ffi, lib, "ar_read", READ_ARGUMENTS):
    lib = None  # the slower reader, with the warning open_reader gives

MOST_BATCH_BYTES = 256 * 1024 * 1024
"""A read stops taking records once its keys, values and headers reach this many bytes:
Arrow's binary columns address at most 2 GiB, and a batch's memory stays bounded whatever
the records' sizes (the rest is handed out by the next read)."""
BAD_RECORD = -199
"""librdkafka's RD_KAFKA_RESP_ERR__BAD_MSG, which the C reader reports for a record whose
header name is not UTF-8 (the segment schema's header keys are strings)."""


class ReadChunk(NamedTuple):
    records: pa.RecordBatch | None
    """The records taken, in offset order (``None`` when there were none)."""
    position: int
    """The offset after the last record taken or passed over."""
    error: KafkaError | None = None
    """The error event the read stopped before."""
    error_offset: int = -1
    """The error event's offset (the log end, for an end of partition)."""
    done: bool = False
    """A record at or past ``end`` was met: the range is read."""


class PartitionReader(Protocol):
    def assign(self, topic: str, partition: int, offset: int) -> None:
        """Read ``topic``/``partition`` from ``offset``; whatever was pending is dropped."""

    def read(self, most: int, timeout: float, position: int, end: int) -> ReadChunk:
        """Up to ``most`` records, waiting at most ``timeout`` seconds for them (see the
        module's docstring for what a read stops at)."""

    def watermarks(self, topic: str, partition: int, timeout: float) -> tuple[int, int]:
        """The partition's log start and log end, asked of its leader."""

    def close(self) -> None: ...


def open_reader(
    conf: dict[str, Any], skip_header: str | None = None, *, eager: bool = False
) -> PartitionReader:
    """The C reader when it is built and ``conf`` holds no callable but the logger; else
    the confluent-kafka one. ``skip_header``: records carrying it are passed over;
    ``eager``: see the module's docstring."""
    if lib is not None and c_reader_takes(conf):
        return ArrowPartitionReader(conf, skip_header, eager=eager)
    if not _fallback_told:
        _fallback_told.append(True)
        log.warning(
            "reading partitions through confluent-kafka's Python objects, several times "
            "slower than the C range reader: %s",
            "a client setting is a Python callable"
            if lib is not None
            else "the C range reader is not built, or was built from older sources "
            "(`make setup` builds it)",
        )
    return MessagePartitionReader(conf, skip_header)


_fallback_told: list[bool] = []


def c_reader_available() -> bool:
    return lib is not None


def c_reader_takes(conf: dict[str, Any]) -> bool:
    """Whether every setting of ``conf`` can be given to librdkafka as text. Pure."""
    return all(name == "logger" or not callable(value) for name, value in conf.items())


def conf_text(value: Any) -> str:
    """A setting as librdkafka's text (booleans as ``true``/``false``). Pure."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# librdkafka logs at syslog levels; confluent-kafka maps them the same way.
_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR,
           4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}  # fmt: skip
_client_logger: list[logging.Logger] = [logging.getLogger(CLIENT_LOGGER)]


if lib is not None:

    @ffi.def_extern()
    def ar_log(rk: Any, level: int, fac: Any, buf: Any) -> None:
        """librdkafka's log lines (from its own threads), as confluent-kafka logs them."""
        _client_logger[0].log(
            _LEVELS.get(level, logging.DEBUG),
            "%s [%s] %s",
            ffi.string(fac).decode(errors="replace"),
            ffi.string(lib.ar_client_name(rk)).decode(errors="replace"),
            ffi.string(buf).decode(errors="replace"),
        )


class ArrowPartitionReader:
    """The C reader: see the module's docstring."""

    def __init__(
        self, conf: dict[str, Any], skip_header: str | None = None, *, eager: bool = False
    ) -> None:
        self._eager = 1 if eager else 0
        settings = {k: conf_text(v) for k, v in conf.items() if k != "logger"}
        logger = conf.get("logger")
        if isinstance(logger, logging.Logger):
            _client_logger[0] = logger
        names = [ffi.new("char[]", k.encode()) for k in settings]
        values = [ffi.new("char[]", v.encode()) for v in settings.values()]
        errstr = ffi.new("char[512]")
        handle = lib.ar_open(
            ffi.new("const char *[]", names),
            ffi.new("const char *[]", values),
            len(settings),
            1 if logger is not None else 0,
            errstr,
            512,
        )
        if handle == ffi.NULL:
            raise BrokerError(f"cannot create a Kafka consumer: {ffi.string(errstr).decode()}")
        self._handle = handle
        self._batch = lib.ar_batch_new()
        if self._batch == ffi.NULL:
            lib.ar_close(handle)
            raise MemoryError("the C range reader could not allocate its batch")
        self._skip = ffi.new("char[]", skip_header.encode()) if skip_header else ffi.NULL

    def assign(self, topic: str, partition: int, offset: int) -> None:
        code = lib.ar_assign(self._handle, topic.encode(), partition, offset)
        if code:
            raise BrokerError.from_kafka(
                f"assigning {topic} partition {partition}", KafkaError(code)
            )

    def read(self, most: int, timeout: float, position: int, end: int) -> ReadChunk:
        batch = self._batch
        if lib.ar_read(
            self._handle, batch, most, int(timeout * 1000), position, end, self._skip,
            MOST_BATCH_BYTES, self._eager,
        ):  # fmt: skip
            raise MemoryError("the C range reader ran out of memory")
        records = arrow_batch(batch) if batch.count else None
        error = None
        if batch.error:
            text = ffi.string(batch.error_text).decode(errors="replace")
            error = KafkaError(batch.error, text)
        return ReadChunk(records, batch.position, error, batch.error_offset, bool(batch.done))

    def watermarks(self, topic: str, partition: int, timeout: float) -> tuple[int, int]:
        low, high = ffi.new("int64_t *"), ffi.new("int64_t *")
        code = lib.ar_watermarks(
            self._handle, topic.encode(), partition, int(timeout * 1000), low, high
        )
        if code:
            raise BrokerError.from_kafka(
                f"reading the log bounds of {topic} partition {partition}", KafkaError(code)
            )
        return int(low[0]), int(high[0])

    def close(self) -> None:
        if self._handle is not None:
            lib.ar_close(self._handle)
            lib.ar_batch_free(self._batch)
            self._handle = self._batch = None


def _buffer(buffer: Any) -> pa.Buffer:
    """A C buffer's filled part as an Arrow buffer that owns it (freed with the last Arrow
    array that holds it); the C side starts a new one for the next read."""
    length = buffer.len
    if not length:
        return pa.py_buffer(b"")
    owner = ffi.gc(lib.ar_detach(ffi.addressof(buffer)), lib.free)
    return pa.foreign_buffer(int(ffi.cast("uintptr_t", owner)), length, base=owner)


def _binary(column: Any, kind: pa.DataType) -> pa.Array:
    validity = _buffer(column.validity) if column.nulls else None
    return pa.Array.from_buffers(
        kind,
        column.count,
        [validity, _buffer(column.offsets), _buffer(column.data)],
        null_count=column.nulls,
    )


_HEADERS_TYPE: pa.ListType = SCHEMA.field("headers").type


def arrow_batch(batch: Any) -> pa.RecordBatch:
    """The C reader's filled buffers as a batch of the segment schema."""
    n = batch.count
    header_structs = pa.StructArray.from_arrays(
        [_binary(batch.header_keys, pa.string()), _binary(batch.header_values, pa.binary())],
        fields=list(_HEADERS_TYPE.value_type),
    )
    headers = pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, _buffer(batch.header_counts)]),
        header_structs,
        type=_HEADERS_TYPE,
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.Array.from_buffers(pa.int64(), n, [None, _buffer(batch.offsets)]),
            pa.Array.from_buffers(
                SCHEMA.field("timestamp").type, n, [None, _buffer(batch.timestamps)]
            ),
            pa.Array.from_buffers(pa.int8(), n, [None, _buffer(batch.timestamp_types)]),
            _binary(batch.keys, pa.binary()),
            _binary(batch.values, pa.binary()),
            headers,
        ],
        schema=SCHEMA,
    )


class MessagePartitionReader:
    """The confluent-kafka reader: see the module's docstring."""

    def __init__(
        self, conf: dict[str, Any], skip_header: str | None = None, *, eager: bool = False
    ) -> None:
        self._consumer = Consumer(conf)
        self._eager = eager
        self._skip_header = skip_header
        self._pending: list[Any] = []

    def assign(self, topic: str, partition: int, offset: int) -> None:
        self._pending = []
        self._consumer.assign([TopicPartition(topic, partition, offset)])

    def read(self, most: int, timeout: float, position: int, end: int) -> ReadChunk:
        messages = self._pending or self._fetched(most, timeout)
        self._pending = []
        taken: list[Any] = []
        for index, message in enumerate(messages):
            error = message.error()
            if error is not None:
                self._pending = messages[index + 1 :]
                offset = message.offset()
                return ReadChunk(_records(taken), position, error, -1 if offset is None else offset)
            offset = message.offset()
            if offset >= end:
                return ReadChunk(_records(taken), end, done=True)
            try:
                headers = message.headers()
            except (SystemError, UnicodeDecodeError):  # how confluent-kafka fails on it
                self._pending = messages[index:]
                bad = KafkaError(BAD_RECORD, "a header name is not UTF-8")
                return ReadChunk(_records(taken), position, bad, offset)
            if not (self._skip_header and _carries(headers, self._skip_header)):
                taken.append(message)
            position = offset + 1
        return ReadChunk(_records(taken), position)

    def _fetched(self, most: int, timeout: float) -> list[Any]:
        if self._eager:
            return consume_available(self._consumer, most, timeout)
        return self._consumer.consume(num_messages=most, timeout=timeout)

    def watermarks(self, topic: str, partition: int, timeout: float) -> tuple[int, int]:
        low, high = self._consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=timeout
        )
        return int(low), int(high)

    def close(self) -> None:
        self._consumer.close()


def _carries(headers: Any, name: str) -> bool:
    """Whether confluent-kafka ``headers`` hold one named ``name`` (as
    :func:`replicator.core.kafka.provenance.is_replicated` asks of provenance)."""
    return bool(headers) and any(header == name for header, _ in headers)


def _records(messages: list[Any]) -> pa.RecordBatch | None:
    return messages_to_records(messages) if messages else None
