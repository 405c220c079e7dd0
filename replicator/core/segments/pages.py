"""What a Parquet row group will cost to decode, read from its page headers before Arrow
decodes anything.

Why: the sizes in a Parquet footer (``total_uncompressed_size``, ``total_byte_size``) are
whatever the writer of the bucket put there, and Arrow decodes from the page headers
regardless. The page headers are what Arrow itself allocates by (each page is
decompressed into a buffer of its declared ``uncompressed_page_size``, and the decoded
values of the encodings allowed here are bounded by the page's bytes and its value count),
so their sum bounds the memory a row group costs whatever the footer says.

Pure: works on the bytes of a row group's column chunks (read once, then handed to Arrow
as they are, see :class:`replicator.core.segments.format.SegmentReader`). Every failure is
a ``ValueError`` naming the column and the byte position.

The Thrift compact protocol is decoded here by hand (a few dozen lines) because pyarrow
exposes no page headers; nesting depth and every length are bounded by the bytes at hand.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

# Thrift compact protocol types.
BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
MAX_DEPTH = 16

# parquet.thrift
DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = range(4)
PLAIN, PLAIN_DICTIONARY, RLE, BIT_PACKED, RLE_DICTIONARY = 0, 2, 3, 4, 8
ENCODING_NAMES = {
    0: "PLAIN",
    2: "PLAIN_DICTIONARY",
    3: "RLE",
    4: "BIT_PACKED",
    5: "DELTA_BINARY_PACKED",
    6: "DELTA_LENGTH_BYTE_ARRAY",
    7: "DELTA_BYTE_ARRAY",
    8: "RLE_DICTIONARY",
    9: "BYTE_STREAM_SPLIT",
}
VALUE_ENCODINGS = frozenset({PLAIN})
"""Value encodings whose decoded size is bounded by the page's bytes: the delta encodings
let a few bytes stand for any number of long values (a prefix repeated, a zero bit
width)."""
DICTIONARY_VALUE_ENCODINGS = frozenset({PLAIN_DICTIONARY, RLE_DICTIONARY})
LEVEL_ENCODINGS = frozenset({RLE, BIT_PACKED})
BYTES_PER_VALUE = 16
"""What a reader may hold per value beyond the page's bytes: an offset, the definition and
repetition levels, validity bits (an over-estimate, so that nulls and empty lists cost
something: a run of a billion nulls is a few bytes)."""


class Compact:
    """A reader of Thrift compact-protocol values from ``data`` at ``position``."""

    def __init__(self, data: bytes | memoryview, position: int = 0, end: int | None = None):
        self.data = data
        self.position = position
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.position >= self.end:
            raise ValueError(f"page header runs past its column chunk at byte {self.position}")
        value = self.data[self.position]
        self.position += 1
        return value

    def varint(self) -> int:
        data, position, end = self.data, self.position, min(self.end, self.position + 10)
        result = shift = 0
        while position < end:
            b = data[position]
            position += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.position = position
                return result
            shift += 7
        raise ValueError(f"varint unfinished or longer than 10 bytes at byte {self.position}")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, length: int) -> bytes:
        if length < 0 or self.position + length > self.end:
            raise ValueError(f"a {length}-byte value runs past the data at byte {self.position}")
        value = bytes(self.data[self.position : self.position + length])
        self.position += length
        return value

    def value(self, kind: int, depth: int) -> Any:
        """One value of compact type ``kind``: ints as int, binary as bytes, a struct as
        ``{field id: (type, value)}``, a list or set as ``(element type, [values])``, a
        map as ``(key type, value type, [(key, value)])``."""
        if depth > MAX_DEPTH:
            raise ValueError(f"Thrift values nested deeper than {MAX_DEPTH}")
        if kind in (BOOL_TRUE, BOOL_FALSE):
            return kind == BOOL_TRUE  # in a struct the type is the value
        if kind == BYTE:
            return self.byte()
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            return self.take(8)
        if kind == BINARY:
            return self.take(self.varint())
        if kind in (LIST, SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            self._check_count(size)
            if element in (BOOL_TRUE, BOOL_FALSE):
                return element, [self.byte() == BOOL_TRUE for _ in range(size)]
            return element, [self.value(element, depth + 1) for _ in range(size)]
        if kind == MAP:
            size = self.varint()
            self._check_count(size)
            if size == 0:
                return 0, 0, []
            types = self.byte()
            k, v = types >> 4, types & 0x0F
            return k, v, [(self.value(k, depth + 1), self.value(v, depth + 1)) for _ in range(size)]
        if kind == STRUCT:
            return self.struct(depth + 1)
        raise ValueError(f"unknown Thrift type {kind} at byte {self.position}")

    def _check_count(self, size: int) -> None:
        if size > self.end - self.position:  # every element takes at least one byte
            raise ValueError(f"a {size}-element container runs past the data at {self.position}")

    def struct(self, depth: int = 0) -> dict[int, tuple[int, Any]]:
        fields: dict[int, tuple[int, Any]] = {}
        last = 0
        while True:
            header = self.byte()
            if header == 0:
                return fields
            delta, kind = header >> 4, header & 0x0F
            field = last + delta if delta else self.zigzag()
            fields[field] = (kind, self.value(kind, depth))
            last = field


def _int(struct: Mapping[int, tuple[int, Any]], field: int, what: str) -> int:
    if field not in struct or struct[field][0] not in (BYTE, I16, I32, I64):
        raise ValueError(f"page header without {what}")
    value = struct[field][1]
    assert isinstance(value, int)
    return value


@dataclass(frozen=True)
class ChunkCost:
    """What decoding one column chunk costs, from its page headers."""

    uncompressed_bytes: int
    values: int
    pages: int

    @property
    def decoded_bytes(self) -> int:
        """An upper bound of the memory its decoded values take."""
        return self.uncompressed_bytes + self.values * BYTES_PER_VALUE


def chunk_cost(
    data: bytes | memoryview,
    start: int,
    end: int,
    column: str,
    dictionary_allowed: bool,
    total_values: int,
) -> ChunkCost:
    """Walk the pages of one column chunk, ``data[start:end]``, by their headers as Arrow
    does (until the pages hold the chunk's ``total_values``): sum what they declare, and
    refuse an encoding or page type whose decoded size the page does not bound (a
    dictionary only where ``dictionary_allowed``)."""
    uncompressed = values = pages = 0
    position = start
    while position < end and values < total_values:
        at = position
        reader = Compact(data, position, end)
        try:
            header = reader.struct()
            page_type = _int(header, 1, "a page type")
            page_bytes = _int(header, 2, "uncompressed_page_size")
            stored_bytes = _int(header, 3, "compressed_page_size")
        except ValueError as exc:
            raise ValueError(f"column {column} page at byte {at}: {exc}") from None
        if page_bytes < 0 or stored_bytes < 0 or reader.position + stored_bytes > end:
            raise ValueError(
                f"column {column} page at byte {at}: {stored_bytes} stored bytes "
                f"({page_bytes} decoded) do not fit in its column chunk"
            )
        values += _page_values(header, page_type, column, at, dictionary_allowed)
        uncompressed += page_bytes
        pages += 1
        position = reader.position + stored_bytes
    return ChunkCost(uncompressed, values, pages)


def _page_values(
    header: Mapping[int, tuple[int, Any]],
    page_type: int,
    column: str,
    at: int,
    dictionary_allowed: bool,
) -> int:
    """The values a page declares (0 for a dictionary page, whose entries are bounded by
    its bytes), after checking its encodings."""
    where = f"column {column} page at byte {at}"
    if page_type == DICTIONARY_PAGE:
        if not dictionary_allowed:
            raise ValueError(f"{where}: a dictionary page in a column never dictionary-encoded")
        return 0
    levels: tuple[int, ...] = ()
    if page_type == DATA_PAGE:
        field, levels = 5, (3, 4)
    elif page_type == DATA_PAGE_V2:
        field = 8
    else:
        raise ValueError(f"{where}: page type {page_type} is not a data or dictionary page")
    kind, body = header.get(field, (0, None))
    if kind != STRUCT or not isinstance(body, dict):
        raise ValueError(f"{where}: data page without its data page header")
    count = _int(body, 1, "num_values")
    encoding = _int(body, 2 if page_type == DATA_PAGE else 4, "an encoding")
    allowed: Collection[int] = VALUE_ENCODINGS | (
        DICTIONARY_VALUE_ENCODINGS if dictionary_allowed else frozenset()
    )
    if encoding not in allowed:
        name = ENCODING_NAMES.get(encoding, str(encoding))
        raise ValueError(f"{where}: values encoded {name}, which this format never writes")
    for level_field in levels:
        if level_field in body and _int(body, level_field, "a level encoding") not in (
            LEVEL_ENCODINGS
        ):
            raise ValueError(f"{where}: levels in an unknown encoding")
    if count < 0:
        raise ValueError(f"{where}: {count} values")
    return count
