"""The segment file format: Parquet (zstd) with one row per Kafka record and a footer that
names what the file is.

Columns: ``offset`` int64, ``timestamp`` timestamp[ms, UTC], ``timestamp_type`` int8
(0 none, 1 CreateTime, 2 LogAppendTime, as in librdkafka), ``key`` and ``value`` nullable
binary (null and empty stay different, so tombstones survive), ``headers``
list<struct<key: string, value: binary nullable>> in record order, duplicates kept.

The footer (Parquet key-value metadata ``replicator.segment``, JSON) repeats the key's
identity and covered range, the record count, the first and last record offsets, and a
SHA-256 checksum of every row group's *logical* content. Checksums are per row group so
that a streaming reader verifies each row group *before* handing its records on: a
consumer never acts on records that later turn out to be corrupt. The file checksum is the
hash of the row-group checksums.

Writing and reading work on any file-like object; :mod:`replicator.core.segments.store` supplies
S3 multipart sinks and ranged-read sources. Memory is bounded by one row group.

Reading, in order, each step before the next: the Parquet footer's length (from the last
eight bytes) against its cap; the footer's raw bytes are read and, where the deployment
signs segments, their signature checked (:mod:`replicator.core.segments.signing`) before
anything parses them; the row-group count, read from the raw bytes, against its cap; only
then does Arrow parse the footer (Thrift), and the replicator footer (JSON) is checked
against the key; then per row group
the sizes the footer declares, the sizes its page headers declare (what Arrow allocates
by, :mod:`replicator.core.segments.pages`: the footer's sizes are the writer's word
only), decoding, the expansion of header keys, the checksum and the offsets. Nothing
from a row group is handed on before all of its checks passed. A row group's column
chunks are read once: the page walk and Arrow share the bytes.

Why the footer's bytes first: parsing a Parquet footer costs about 16 times its size in
memory (a forged 7.6 MiB footer of 20,000 row groups cost 120 MiB), so a footer is
authenticated as bytes, and its row groups counted from the bytes, before Arrow builds
anything from it. The caps are what the writers produce (:data:`MAX_ROW_GROUPS`,
:data:`MAX_PARQUET_FOOTER_BYTES`); the writer refuses to pass them, so that nothing a
writer makes is refused by a reader.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replicator import __version__
from replicator.core.segments.errors import (
    CorruptSegmentError,
    SegmentMismatchError,
    SegmentSignatureError,
)
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.pages import (
    BINARY,
    BOOL_FALSE,
    BOOL_TRUE,
    BYTE,
    DOUBLE,
    I16,
    I32,
    I64,
    LIST,
    MAP,
    MAX_DEPTH,
    SET,
    STRUCT,
    Compact,
    chunk_cost,
)
from replicator.core.segments.signing import (
    SIGNATURE_KEY,
    UNSIGNED,
    SigningKeys,
    check_footer_signature,
    sign_footer,
)
from replicator.core.untrusted_json import Kinds, check_fields, json_object

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
FOOTER_KEY = b"replicator.segment"

TIMESTAMP_NONE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

HEADER_TYPE = pa.struct(
    [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]
)
SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("timestamp_type", pa.int8(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field(
            "headers", pa.list_(pa.field("element", HEADER_TYPE, nullable=False)), nullable=False
        ),
    ]
)

DEFAULT_ROW_GROUP_BYTES = 8 * 1024**2
"""Uncompressed bytes buffered before a row group is written. It bounds the memory of
everyone who handles segments: the writer buffers one row group, and a reader verifies
and hands on one at a time. 32 MiB cost ingress ~100 MiB more per concurrent read
(measured) for no gain in replay speed."""
DEFAULT_ROW_GROUP_ROWS = 1_000_000

MAX_ROW_GROUP_ROWS = 4 * DEFAULT_ROW_GROUP_ROWS
MAX_ROW_GROUP_BYTES = 256 * 1024**2
"""Caps a reader checks before decoding a row group, against what its footer declares and
then against what its page headers declare (the bound that holds): a small file must not
be able to make every reader allocate gigabytes. A row group holds at least one record,
so the byte cap is above the largest record a destination accepts (64 MiB)."""
MAX_ROW_GROUPS = 8_192
"""The most row groups a segment has: the writer refuses to write more, a reader refuses
a footer declaring more before Arrow parses it. Row groups close at
:data:`DEFAULT_ROW_GROUP_BYTES` of records as Arrow holds them (8 MiB), so 8,192 of them
hold 64 GiB: an egress segment (``max_segment_bytes``, 100 MiB by default) has about
twenty, and a compaction output (at most ``max_segment_bytes`` = 4 GiB of stored segments
by default) reaches the cap only if zstd shrank its records sixteenfold. Each costs a
reader about 6 KiB while the footer is parsed: 48 MiB at the cap."""
MAX_FOOTER_BYTES = 1024**2
"""The largest replicator footer (JSON) a reader parses (8,192 row-group checksums take
550 KB)."""
MAX_PARQUET_FOOTER_BYTES = 6 * 1024**2
"""The largest Parquet footer (Thrift) a reader reads, checked from the file's last eight
bytes before anything else: a segment of :data:`MAX_ROW_GROUPS` row groups has a footer
of about 4.6 MiB (583 bytes a row group, measured in
``tests/core/test_footer_authentication.py``)."""
MAX_SCHEMA_ELEMENTS = 64
"""A segment's schema has 11 elements; more is not a segment (refused unparsed)."""
WRITER_PREFIX = "parquet-cpp"
"""What every segment's ``created_by`` starts with. Arrow reads past a column chunk's end
for files that say an old parquet-mr wrote them; a segment never says so."""
HEADER_KEY_COLUMN = "headers.list.element.key"
FOOTER_READ_BYTES = 64 * 1024
"""How much of a file's end Arrow reads to find its footer (its default)."""
DICTIONARY_COLUMNS = frozenset({"timestamp_type", "headers.list.element.key"})
"""The only columns the writer dictionary-encodes: a dictionary elsewhere lets a few bytes
stand for any number of copies of a large value."""
DICTIONARY_ENCODINGS = frozenset({"PLAIN_DICTIONARY", "RLE_DICTIONARY"})
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SegmentFooter:
    """What a segment says about itself; checked against its key on every read."""

    format_version: int
    region: str
    topic: str
    partition: int
    level: int
    start_offset: int
    end_offset: int
    record_count: int
    first_record_offset: int | None
    last_record_offset: int | None
    created_at: str
    writer_version: str
    checksum: str
    row_group_checksums: tuple[str, ...]
    source_data_loss: bool = False
    """Offsets this segment covers were gone from the source log before egress read them
    (``on_data_loss = "skip"``): readers report the loss instead of calling it a gap."""
    topic_id: str | None = None
    """The Kafka topic id of the topic generation the records were read from (None: the
    source broker reports none). Signed with the footer: a signed segment of an earlier
    generation of the topic (deleted and created again) names that generation's id, and
    readers compare it with the (signed) topic descriptor's
    (:meth:`replicator.core.segments.store.SegmentStore.open`)."""

    def to_json(self) -> bytes:
        data = asdict(self)
        data["row_group_checksums"] = list(self.row_group_checksums)
        for optional in _OPTIONAL_FIELDS:
            if not data[optional]:
                del data[optional]  # footers without them stay as they were
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> SegmentFooter:
        """Parse and type-check a footer; ``ValueError`` naming the first field that is
        missing, unknown or of the wrong type."""
        data = check_fields(
            json_object(raw, MAX_FOOTER_BYTES),
            {name: (kinds, name not in _OPTIONAL_FIELDS) for name, kinds in _FOOTER_TYPES.items()},
        )
        checksums = data["row_group_checksums"]
        if not all(isinstance(c, str) and _HEX_DIGEST.fullmatch(c) for c in checksums):
            raise ValueError("row_group_checksums are not all SHA-256 hex digests")
        if not data["checksum"].startswith("sha256:") or not _HEX_DIGEST.fullmatch(
            data["checksum"][len("sha256:") :]
        ):
            raise ValueError(f"checksum {data['checksum']!r} is not sha256:<hex digest>")
        data["row_group_checksums"] = tuple(checksums)
        topic_id = data.get("topic_id")
        if topic_id is not None and not 0 < len(topic_id) <= MAX_TOPIC_ID_CHARS:
            raise ValueError(f"topic_id of {len(topic_id)} characters")
        return cls(**data)


_FOOTER_TYPES: dict[str, Kinds] = {
    "format_version": int,
    "region": str,
    "topic": str,
    "partition": int,
    "level": int,
    "start_offset": int,
    "end_offset": int,
    "record_count": int,
    "first_record_offset": (int, type(None)),
    "last_record_offset": (int, type(None)),
    "created_at": str,
    "writer_version": str,
    "checksum": str,
    "row_group_checksums": list,
    "source_data_loss": bool,
    "topic_id": (str, type(None)),
}
_OPTIONAL_FIELDS = ("source_data_loss", "topic_id")
MAX_TOPIC_ID_CHARS = 64


# ---------------------------------------------------------------------------------------
# Checksums


def content_checksum(table: pa.Table | pa.RecordBatch) -> str:
    """SHA-256 of the logical content of ``table`` (one row group), independent of how the
    columns are chunked in memory and of Parquet encoding details.

    Each column contributes fixed streams (validity, value lengths with -1 for null, value
    bytes), each hashed separately over all chunks, then the stream digests are hashed
    together in schema order.
    """
    digest = hashlib.sha256()
    for column in table.columns:
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        hashers: list[Any] = []
        for chunk in chunks:
            for i, part in enumerate(_canonical_streams(chunk)):
                if i == len(hashers):
                    hashers.append(hashlib.sha256())
                hashers[i].update(part)
        for hasher in hashers:
            digest.update(hasher.digest())
    return digest.hexdigest()


def combine_checksums(row_group_checksums: list[str] | tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for checksum in row_group_checksums:
        digest.update(bytes.fromhex(checksum))
    return "sha256:" + digest.hexdigest()


def _canonical_streams(array: pa.Array) -> list[Any]:
    kind = array.type
    validity = np.asarray(array.is_valid(), dtype=np.bool_).tobytes()
    if pa.types.is_binary(kind) or pa.types.is_string(kind) or pa.types.is_large_binary(kind):
        lengths = pc.binary_length(array).fill_null(-1).cast(pa.int64())
        filled = array.fill_null(pa.scalar(b"" if not pa.types.is_string(kind) else "", kind))
        return [lengths.to_numpy().tobytes(), _value_bytes(filled)]
    if pa.types.is_list(kind):
        lengths = pc.list_value_length(array).fill_null(-1).cast(pa.int64())
        return [validity, lengths.to_numpy().tobytes(), *_canonical_streams(array.flatten())]
    if pa.types.is_struct(kind):
        parts = [validity]
        for field in array.flatten():
            parts.extend(_canonical_streams(field))
        return parts
    values = array.cast(pa.int64()).fill_null(0)
    return [validity, values.to_numpy().tobytes()]


def _value_bytes(array: pa.Array) -> memoryview | bytes:
    """The concatenated value bytes of a null-free binary/string array, zero copy."""
    buffers = array.buffers()
    if len(array) == 0 or buffers[2] is None:
        return b""
    width = 8 if pa.types.is_large_binary(array.type) else 4
    offsets = np.frombuffer(
        buffers[1],
        dtype=np.int64 if width == 8 else np.int32,
        count=len(array) + 1,
        offset=array.offset * width,
    )
    return memoryview(buffers[2])[int(offsets[0]) : int(offsets[-1])]


# ---------------------------------------------------------------------------------------
# Writing


class SegmentWriter:
    """Writes one segment to a binary sink, one row group at a time.

    Call :meth:`write` with record batches in offset order, then :meth:`close`; the footer
    is written last, so a sink that is abandoned before ``close`` never holds a file that
    passes verification. Raises ``ValueError`` if records are out of order or outside the
    covered range: a segment must never claim offsets it does not hold in order.
    """

    def __init__(
        self,
        sink: IO[bytes] | io.RawIOBase,
        key: SegmentKey,
        *,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        compression_level: int | None = None,
        keys: SigningKeys = UNSIGNED,
        prefix: str = "",
    ) -> None:
        """``keys``: with a signing key, the footer is signed (see
        :mod:`replicator.core.segments.signing`) for the object key of ``key`` under
        ``prefix``; a deployment that requires signatures but holds no key to sign with
        (an Ed25519 reader) cannot write (``ValueError``)."""
        if keys.required and not keys.signs:
            keys.placeholder()  # raises, saying which key is missing
        self.segment_key = key
        self._keys = keys
        self._prefix = prefix
        self._sink = _FooterHoldingSink(sink)
        self._row_group_bytes = row_group_bytes
        self._row_group_rows = row_group_rows
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._pending_rows = 0
        self._checksums: list[str] = []
        self._count = 0
        self._first: int | None = None
        self._last: int | None = None
        self._closed = False
        self.source_data_loss = False
        """Set by a writer that knows covered offsets were lost at the source."""
        self.topic_id: str | None = None
        """Set by a writer that knows the topic id of the generation the records come from
        (egress from its planner; compaction from its inputs)."""
        self._writer = pq.ParquetWriter(
            self._sink,
            SCHEMA,
            compression="zstd",
            compression_level=compression_level,
            use_dictionary=sorted(DICTIONARY_COLUMNS),
            write_page_checksum=True,
            write_statistics=["offset", "timestamp"],
        )

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def bytes_buffered(self) -> int:
        return self._pending_bytes

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if self._closed:
            raise ValueError(f"segment {self.segment_key} is already closed")
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for one in batches:
            if one.num_rows == 0:
                continue
            if not one.schema.equals(SCHEMA):
                one = pa.RecordBatch.from_arrays(one.columns, schema=SCHEMA)
            self._check_offsets(one.column(0))
            # Slice at row-group boundaries so that no row group exceeds the limits,
            # whatever the size of the batches handed in.
            bytes_per_row = max(1.0, one.nbytes / one.num_rows)
            position = 0
            while position < one.num_rows:
                room_rows = self._row_group_rows - self._pending_rows
                room_bytes = self._row_group_bytes - self._pending_bytes
                take = min(
                    one.num_rows - position, room_rows, max(1, int(room_bytes / bytes_per_row))
                )
                piece = one.slice(position, take)
                position += take
                self._pending.append(piece)
                self._pending_bytes += int(take * bytes_per_row)
                self._pending_rows += take
                if (
                    self._pending_bytes >= self._row_group_bytes
                    or self._pending_rows >= self._row_group_rows
                ):
                    self._flush_row_group()

    def _check_offsets(self, offsets: pa.Array) -> None:
        values = offsets.to_numpy()
        first, last = int(values[0]), int(values[-1])
        key = self.segment_key
        previous = self._last if self._last is not None else key.start - 1
        if first <= previous or last > key.end or np.any(np.diff(values) <= 0):
            raise ValueError(
                f"segment {key}: offsets must increase strictly within "
                f"[{key.start}, {key.end}] (got {first}..{last} after {previous})"
            )
        if self._first is None:
            self._first = first
        self._last = last
        self._count += len(values)

    def _flush_row_group(self) -> None:
        if not self._pending:
            return
        if len(self._checksums) >= MAX_ROW_GROUPS:
            raise ValueError(
                f"segment {self.segment_key} would have more than {MAX_ROW_GROUPS} row groups "
                "(what readers accept): write smaller segments (compaction max_segment_bytes)"
            )
        table = pa.Table.from_batches(self._pending, schema=SCHEMA)
        self._checksums.append(content_checksum(table))
        self._writer.write_table(table, row_group_size=table.num_rows)
        self._pending = []
        self._pending_bytes = 0
        self._pending_rows = 0

    @property
    def last_offset(self) -> int | None:
        return self._last

    def close(self, end: int | None = None) -> SegmentFooter:
        """Write the last row group and the footer. Does not close the sink.

        ``end`` narrows the covered range (a writer that decides where a segment ends only
        once it has seen the records); it must not leave written records outside it.
        """
        if self._closed:
            raise ValueError(f"segment {self.segment_key} is already closed")
        if end is not None:
            lowest = self.segment_key.start if self._last is None else self._last
            if not lowest <= end <= self.segment_key.end:
                raise ValueError(
                    f"segment {self.segment_key}: cannot end at {end} (records up to {self._last})"
                )
            self.segment_key = replace(self.segment_key, end=end)
        self._flush_row_group()
        footer = SegmentFooter(
            format_version=FORMAT_VERSION,
            region=self.segment_key.region,
            topic=self.segment_key.topic,
            partition=self.segment_key.partition,
            level=self.segment_key.level,
            start_offset=self.segment_key.start,
            end_offset=self.segment_key.end,
            record_count=self._count,
            first_record_offset=self._first,
            last_record_offset=self._last,
            created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            writer_version=__version__,
            checksum=combine_checksums(self._checksums),
            row_group_checksums=tuple(self._checksums),
            source_data_loss=self.source_data_loss,
            topic_id=self.topic_id,
        )
        metadata = {FOOTER_KEY: footer.to_json()}
        if self._keys.signs:
            metadata[SIGNATURE_KEY] = self._keys.placeholder()
        self._writer.add_key_value_metadata(metadata)
        self._sink.hold()
        self._writer.close()
        tail = self._sink.release()
        if self._keys.signs:
            tail = self._signed(tail)
        self._sink.sink.write(tail)
        self._closed = True
        return footer

    def _signed(self, tail: bytes) -> bytes:
        """``tail`` (what Arrow wrote on close, ending in the footer, its length and the
        magic) with the footer's signature placeholder replaced by the signature."""
        length = int.from_bytes(tail[-8:-4], "little")
        if len(tail) < length + 8:
            raise ValueError(f"segment {self.segment_key}: the footer was not held whole")
        footer = tail[-8 - length : -8]
        signed = sign_footer(self._keys, self.segment_key.to_s3_key(self._prefix), footer)
        return tail[: -8 - length] + signed + tail[-8:]


class _FooterHoldingSink:
    """The sink Arrow writes a segment to: passes writes through until :meth:`hold`, then
    keeps them (the footer, written on close) until :meth:`release`, so that the footer's
    signature can be put in before any of it reaches the sink."""

    def __init__(self, sink: IO[bytes] | io.RawIOBase) -> None:
        self.sink = sink
        self._held: list[bytes] | None = None
        self._position = 0
        self.closed = False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        if self._held is None:
            self.sink.write(data)
        else:
            self._held.append(bytes(data))
        self._position += size
        return size

    def flush(self) -> None:
        if self._held is None:
            self.sink.flush()

    def close(self) -> None:
        self.closed = True  # the sink is the caller's to close

    def hold(self) -> None:
        self._held = []

    def release(self) -> bytes:
        held, self._held = b"".join(self._held or []), None
        return held


# ---------------------------------------------------------------------------------------
# Reading


class SegmentReader:
    """Reads and verifies one segment from a random-access binary source.

    Opening checks the footer against the key; :meth:`iter_tables` verifies each row
    group's checksum before yielding it and the record count and file checksum at the end.
    Any failure raises :class:`CorruptSegmentError` (unreadable) or
    :class:`SegmentMismatchError` (readable but wrong), naming ``name``.
    """

    def __init__(
        self,
        source: Any,
        key: SegmentKey,
        name: str,
        keys: SigningKeys = UNSIGNED,
        prefix: str = "",
    ) -> None:
        """``keys``: where signatures are required, a segment whose footer is not signed
        by one of them for the object key of ``key`` under ``prefix`` is refused
        (:class:`SegmentSignatureError`) before its footer is parsed."""
        self.segment_key = key
        self.name = name
        self._source = _RowGroupWindow(source)
        try:
            footer = self._footer_bytes()
            reason = check_footer_signature(keys, key.to_s3_key(prefix), footer)
            if reason is not None:
                raise SegmentSignatureError(name, reason)
            self._check_row_group_count(footer, whole=not keys.required)
            # Read in this thread only (no pre-buffering on Arrow's I/O pool, no decoding
            # on its CPU pool): a pool thread calling into the Python file, or freeing a
            # buffer it handed out, can still be finishing when a command returns, and
            # one taking the GIL while the interpreter exits aborts the process after
            # its work is done. Threads gain nothing here: the row group's bytes are
            # prefetched already, and its checksum is computed in this thread.
            self._file = pq.ParquetFile(
                self._source,
                page_checksum_verification=True,
                pre_buffer=False,
                read_dictionary=[HEADER_KEY_COLUMN],
                thrift_string_size_limit=MAX_PARQUET_FOOTER_BYTES,
                thrift_container_size_limit=MAX_PARQUET_FOOTER_BYTES // 8,
            )
            metadata = self._file.metadata.metadata or {}
        except KeyError:  # the column read as a dictionary is missing
            raise SegmentMismatchError(
                name, f"no column {HEADER_KEY_COLUMN}: not the segment schema"
            ) from None
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptSegmentError(name, f"not a readable Parquet file ({exc})") from None
        finally:
            self._source.release()
        created_by = self._file.metadata.created_by or ""
        if not created_by.startswith(WRITER_PREFIX):
            raise SegmentMismatchError(
                name, f"written by {created_by[:80]!r}, not a segment writer"
            )
        raw = metadata.get(FOOTER_KEY)
        if raw is None:
            raise SegmentMismatchError(name, "no replicator footer: not a segment file")
        try:
            self.footer = SegmentFooter.from_json(raw)
        except (ValueError, TypeError, KeyError) as exc:
            raise SegmentMismatchError(name, f"unreadable footer ({exc})") from None
        self._check_footer()
        self._check_schema()

    def _footer_bytes(self) -> bytes:
        """The Parquet footer's raw bytes, its length (in the file's last eight bytes)
        checked against :data:`MAX_PARQUET_FOOTER_BYTES` before they are read. They stay
        held for Arrow with what it reads first (the last 64 KiB): one request."""
        size = self._source.size
        if size < 12:
            raise ValueError(f"{size} bytes is too short for Parquet")
        tail_bytes = min(size, FOOTER_READ_BYTES)
        tail = bytes(self._source.read_at(size - 8, 8))
        if tail[4:] != b"PAR1":
            raise ValueError("no Parquet magic at the end")
        length = int.from_bytes(tail[:4], "little")
        if length > MAX_PARQUET_FOOTER_BYTES or length > size - 12:
            raise SegmentMismatchError(
                self.name,
                f"Parquet footer of {length} bytes (cap {MAX_PARQUET_FOOTER_BYTES}, file {size})",
            )
        start = size - max(tail_bytes, length + 8)
        held = self._source.prefetch(start, size - start)
        return bytes(held[len(held) - 8 - length : len(held) - 8])

    def _check_row_group_count(self, footer: bytes, whole: bool) -> None:
        """Refuse a footer declaring more than :data:`MAX_ROW_GROUPS` row groups (or a
        schema of more than :data:`MAX_SCHEMA_ELEMENTS`), read from its raw bytes
        (:func:`_row_group_count`): nothing is built."""
        try:
            count = _row_group_count(footer, whole)
        except ValueError as exc:
            raise CorruptSegmentError(self.name, f"unreadable Parquet footer ({exc})") from None
        if count > MAX_ROW_GROUPS:
            raise SegmentMismatchError(
                self.name, f"Parquet footer declares {count} row groups (cap {MAX_ROW_GROUPS})"
            )

    def _check_schema(self) -> None:
        try:
            schema = self._file.schema_arrow
        except (pa.ArrowException, ValueError) as exc:
            raise CorruptSegmentError(self.name, f"unreadable schema ({exc})") from None
        if not schema.equals(READ_SCHEMA, check_metadata=False):
            got = ", ".join(f"{f.name}: {f.type}" for f in schema)
            raise SegmentMismatchError(self.name, f"not the segment schema (columns {got})")

    def _check_declared_sizes(self, index: int) -> None:
        """Refuse a row group whose declared rows or decoded bytes exceed the caps, or that
        dictionary-encodes a column the writer never does, before decoding anything."""
        row_group = self._file.metadata.row_group(index)
        where = f"row group {index}"
        if row_group.num_rows > MAX_ROW_GROUP_ROWS:
            raise SegmentMismatchError(
                self.name, f"{where} declares {row_group.num_rows} rows (cap {MAX_ROW_GROUP_ROWS})"
            )
        chunks_total = 0
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            chunks_total += max(chunk.total_uncompressed_size, 0)
            dictionary = DICTIONARY_ENCODINGS.intersection(chunk.encodings)
            if dictionary and chunk.path_in_schema not in DICTIONARY_COLUMNS:
                raise SegmentMismatchError(
                    self.name, f"{where} column {chunk.path_in_schema} is dictionary-encoded"
                )
            if chunk.num_values > MAX_ROW_GROUP_ROWS * 16:
                raise SegmentMismatchError(
                    self.name,
                    f"{where} column {chunk.path_in_schema} declares {chunk.num_values} values",
                )
        declared = max(row_group.total_byte_size, chunks_total)
        if declared > MAX_ROW_GROUP_BYTES:
            raise SegmentMismatchError(
                self.name, f"{where} declares {declared} bytes decoded (cap {MAX_ROW_GROUP_BYTES})"
            )

    def _check_footer(self) -> None:
        f, k = self.footer, self.segment_key
        if f.format_version > FORMAT_VERSION:
            raise SegmentMismatchError(
                self.name,
                f"format version {f.format_version} is newer than this reader "
                f"({FORMAT_VERSION}); upgrade the replicator",
            )
        expected = {
            "region": k.region,
            "topic": k.topic,
            "partition": k.partition,
            "level": k.level,
            "start_offset": k.start,
            "end_offset": k.end,
        }
        for field, want in expected.items():
            got = getattr(f, field)
            if got != want:
                raise SegmentMismatchError(
                    self.name, f"footer {field} is {got!r} but the key says {want!r}"
                )
        if f.record_count != self._file.metadata.num_rows:
            raise SegmentMismatchError(
                self.name,
                f"footer record_count {f.record_count} but the file holds "
                f"{self._file.metadata.num_rows} rows",
            )
        if len(f.row_group_checksums) != self._file.num_row_groups:
            raise SegmentMismatchError(
                self.name,
                f"footer lists {len(f.row_group_checksums)} row-group checksums but the file "
                f"has {self._file.num_row_groups} row groups",
            )
        if combine_checksums(f.row_group_checksums) != f.checksum:
            raise SegmentMismatchError(self.name, "footer checksum does not match its row groups")

    @property
    def num_row_groups(self) -> int:
        return int(self._file.num_row_groups)

    def timestamp_range(self, index: int) -> tuple[int, int] | None:
        """(min, max) record timestamp of a row group in epoch ms, from the Parquet
        statistics (None: not recorded). Not verified: use it to skip, never to decide
        what a record holds."""
        row_group = self._file.metadata.row_group(index)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            if chunk.path_in_schema != "timestamp":
                continue
            stats = chunk.statistics
            if stats is None or not stats.has_min_max:
                return None
            return _epoch_ms(stats.min), _epoch_ms(stats.max)
        return None

    def _check_pages(self, index: int) -> int:
        """Read the row group's column chunks (once: Arrow then decodes them from memory)
        and walk their page headers; refuse the row group if what the pages declare would
        decode to more than :data:`MAX_ROW_GROUP_BYTES`. Returns that bound."""
        row_group = self._file.metadata.row_group(index)
        ranges = []
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
                start = chunk.dictionary_page_offset
            if chunk.num_values > 0:  # Arrow reads no page of a chunk without values
                end = start + chunk.total_compressed_size
                ranges.append((chunk.path_in_schema, start, end, chunk.num_values))
        first = min((r[1] for r in ranges), default=0)
        last = max((r[2] for r in ranges), default=0)
        where = f"row group {index}"
        if first < 0 or last - first > MAX_ROW_GROUP_BYTES or last > self._source.size:
            raise SegmentMismatchError(
                self.name, f"{where} spans bytes {first}..{last} of a {self._source.size}-byte file"
            )
        try:
            data = self._source.prefetch(first, last - first)
        except (OSError, ValueError) as exc:
            raise CorruptSegmentError(self.name, f"{where} unreadable ({exc})") from None
        total = 0
        for path, start, end, values in ranges:
            try:
                cost = chunk_cost(
                    data, start - first, end - first, path, path in DICTIONARY_COLUMNS, values
                )
            except ValueError as exc:
                raise SegmentMismatchError(self.name, f"{where} {exc}") from None
            total += cost.decoded_bytes
            if total > MAX_ROW_GROUP_BYTES:
                raise SegmentMismatchError(
                    self.name,
                    f"{where} pages decode to more than {MAX_ROW_GROUP_BYTES} bytes "
                    f"(column {path} alone {cost.decoded_bytes} bytes from {cost.pages} page(s))",
                )
        return total

    def read_row_group(self, index: int) -> pa.Table:
        """One verified row group: sizes within the caps (as declared in the footer, then
        as the page headers say, before decoding), content matching its checksum, offsets
        strictly increasing inside the key's covered range."""
        self._check_declared_sizes(index)
        budget = self._check_pages(index)
        try:
            table = self._file.read_row_group(index, use_threads=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptSegmentError(self.name, f"row group {index} unreadable ({exc})") from None
        finally:
            self._source.release()
        table = self._decode_header_keys(table, index, budget)
        if content_checksum(table) != self.footer.row_group_checksums[index]:
            raise SegmentMismatchError(self.name, f"checksum mismatch in row group {index}")
        self._check_offsets(table, index)
        return table

    def _decode_header_keys(self, table: pa.Table, index: int, budget: int) -> pa.Table:
        """Header keys are read as a dictionary (the only dictionary column that can hold
        long values): refuse the row group if expanding it would pass the cap, then
        expand it."""
        expanded = 0
        for chunk in table.column("headers").chunks:
            keys = chunk.values.field("key")
            if len(keys):
                lengths = pc.binary_length(keys.dictionary)
                expanded += pc.sum(lengths.take(keys.indices)).as_py() or 0
        if budget + expanded > MAX_ROW_GROUP_BYTES:
            raise SegmentMismatchError(
                self.name,
                f"row group {index} header keys decode to {expanded} bytes "
                f"(cap {MAX_ROW_GROUP_BYTES} with the rest of the row group)",
            )
        headers_field = SCHEMA.field("headers")
        try:
            # Chunk by chunk: the checksum must see the chunks Arrow read (a cast of the
            # whole column drops an empty chunk).
            decoded = pa.chunked_array(
                [chunk.cast(headers_field.type) for chunk in table.column("headers").chunks],
                headers_field.type,
            )
            return table.set_column(len(SCHEMA) - 1, headers_field, decoded)
        except (pa.ArrowException, ValueError) as exc:
            raise CorruptSegmentError(self.name, f"row group {index} unreadable ({exc})") from None

    def _check_offsets(self, table: pa.Table, index: int) -> None:
        """Strictly increasing inside the covered range; the first row group starts at
        the footer's first record offset and the last one ends at its last — checked
        before the row group is handed on."""
        if table.num_rows == 0:
            return
        offsets = table.column("offset").to_numpy()
        key, footer = self.segment_key, self.footer
        if offsets[0] < key.start or offsets[-1] > key.end or np.any(np.diff(offsets) <= 0):
            raise SegmentMismatchError(
                self.name,
                f"row group {index}: offsets {offsets[0]}..{offsets[-1]} do not increase "
                f"strictly within the covered range {key.start}..{key.end}",
            )
        if index == 0 and offsets[0] != footer.first_record_offset:
            raise SegmentMismatchError(
                self.name,
                f"records start at {offsets[0]} but the footer says {footer.first_record_offset}",
            )
        if index == self.num_row_groups - 1 and offsets[-1] != footer.last_record_offset:
            raise SegmentMismatchError(
                self.name,
                f"records end at {offsets[-1]} but the footer says {footer.last_record_offset}",
            )

    def iter_tables(self) -> Iterator[pa.Table]:
        """Verified row groups in offset order (each starts after the previous one)."""
        last: int | None = None
        for index in range(self.num_row_groups):
            table = self.read_row_group(index)
            if table.num_rows:
                offsets = table.column("offset")
                if last is not None and offsets[0].as_py() <= last:
                    raise SegmentMismatchError(
                        self.name, f"row group {index} starts at or before offset {last}"
                    )
                last = offsets[-1].as_py()
            yield table

    def read_all(self) -> pa.Table:
        tables = list(self.iter_tables())
        if not tables:
            return SCHEMA.empty_table()
        return pa.concat_tables(tables)


_SCHEMA_FIELD, _ROW_GROUPS_FIELD = 2, 4
"""FileMetaData's fields in parquet.thrift: 1 version, 2 schema, 3 num_rows, 4 row_groups."""


def _row_group_count(footer: bytes, whole: bool = True) -> int:
    """How many row groups a raw Parquet footer (Thrift compact FileMetaData) declares,
    walked without building anything: to its end if ``whole`` (a field given twice
    counts twice, as a Thrift reader keeps the last; 3 s in Python for a footer at the
    caps), else only up to the row groups' list header (a footer its signature vouches
    for: written once, by a writer that keeps to the cap). ``ValueError`` for bytes that
    are not such a footer, or a schema of more than :data:`MAX_SCHEMA_ELEMENTS`."""
    walk = _FooterWalk(footer)
    field = count = 0
    while (header := walk.byte()) != 0:
        delta, kind = header >> 4, header & 0x0F
        field = field + delta if delta else walk.zigzag()
        if kind != LIST or field not in (_SCHEMA_FIELD, _ROW_GROUPS_FIELD):
            _skip(walk, kind, 0)
            continue
        size, element = _list_size(walk)
        if field == _SCHEMA_FIELD and size > MAX_SCHEMA_ELEMENTS:
            raise ValueError(f"a schema of {size} elements (a segment's has 11)")
        if field == _ROW_GROUPS_FIELD:
            count += size
            if count > MAX_ROW_GROUPS or not whole:
                return count
        _skip_elements(walk, size, element, 1)
    return count


class _FooterWalk(Compact):
    def byte(self) -> int:
        if self.position >= self.end:
            raise ValueError(f"the footer ends inside a value (byte {self.position})")
        return super().byte()


def _list_size(walk: Compact) -> tuple[int, int]:
    header = walk.byte()
    size, element = header >> 4, header & 0x0F
    return (walk.varint() if size == 15 else size), element


def _skip(walk: Compact, kind: int, depth: int) -> None:
    """Move past one Thrift compact value of type ``kind`` without building it."""
    if depth > MAX_DEPTH:
        raise ValueError(f"Thrift values nested deeper than {MAX_DEPTH}")
    if kind in (BOOL_TRUE, BOOL_FALSE):
        return
    if kind == BYTE:
        walk.byte()
    elif kind in (I16, I32, I64):
        walk.varint()
    elif kind in (DOUBLE, BINARY):
        _advance(walk, 8 if kind == DOUBLE else walk.varint())
    elif kind in (LIST, SET):
        size, element = _list_size(walk)
        _skip_elements(walk, size, element, depth + 1)
    elif kind == MAP:
        size = walk.varint()
        _advance(walk, 0, size)
        if size:
            types = walk.byte()
            for _ in range(size):
                _skip(walk, types >> 4, depth + 1)
                _skip(walk, types & 0x0F, depth + 1)
    elif kind == STRUCT:
        while (header := walk.byte()) != 0:
            if not header >> 4:
                walk.zigzag()
            _skip(walk, header & 0x0F, depth + 1)
    else:
        raise ValueError(f"unknown Thrift type {kind} at byte {walk.position}")


def _skip_elements(walk: Compact, size: int, element: int, depth: int) -> None:
    if element in (BOOL_TRUE, BOOL_FALSE):  # one byte each in a list
        _advance(walk, size)
        return
    _advance(walk, 0, size)
    for _ in range(size):
        _skip(walk, element, depth)


def _advance(walk: Compact, length: int, elements: int = 0) -> None:
    """Move ``length`` bytes on; ``elements`` more values must still fit (one byte each)."""
    if length < 0 or walk.position + length + elements > walk.end:
        raise ValueError(f"a value runs past the footer's end at byte {walk.position}")
    walk.position += length


READ_SCHEMA = pa.schema(
    [
        *(SCHEMA.field(i) for i in range(len(SCHEMA) - 1)),
        pa.field(
            "headers",
            pa.list_(
                pa.field(
                    "element",
                    pa.struct(
                        [
                            pa.field("key", pa.dictionary(pa.int32(), pa.string()), nullable=False),
                            HEADER_TYPE.field("value"),
                        ]
                    ),
                    nullable=False,
                )
            ),
            nullable=False,
        ),
    ]
)
"""The schema as read: header keys as a dictionary until their size is checked."""


class _RowGroupWindow:
    """A file-like view of a segment's source that serves one prefetched byte range (a
    row group's column chunks, read once to walk their page headers) from memory, and
    anything else from the source. Arrow reads through it (one thread at a time: pyarrow
    locks a Python file)."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._position = 0
        self._start = 0
        self._data = memoryview(b"")
        self.closed = False
        with self._lock:
            self.size = int(source.seek(0, io.SEEK_END))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        self._position = base + offset
        return self._position

    def read(self, size: int = -1) -> bytes | memoryview:
        if size < 0:
            size = self.size - self._position
        data = self.read_at(self._position, size)
        self._position += len(data)
        return data

    def read_at(self, position: int, size: int) -> bytes | memoryview:
        offset = position - self._start
        if offset >= 0 and offset + size <= len(self._data):
            return self._data[offset : offset + size]  # zero copy
        with self._lock:
            self._source.seek(position)
            return bytes(self._source.read(size))

    def prefetch(self, start: int, length: int) -> memoryview:
        """Hold bytes ``start..start+length`` until :meth:`release`; returns them."""
        data = self.read_at(start, length)
        if len(data) != length:
            raise ValueError(f"{len(data)} bytes at {start}, {length} expected")
        self._start, self._data = start, memoryview(data)
        return self._data

    def release(self) -> None:
        self._start, self._data = 0, memoryview(b"")

    def close(self) -> None:
        self.closed = True


def _epoch_ms(value: Any) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return int(value.timestamp() * 1000)
    return int(value)
