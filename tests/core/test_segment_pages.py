"""The page-header walk: what a row group's pages declare, and the page headers it
refuses (pure, on bytes)."""

import io
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.core.segments.format import DICTIONARY_COLUMNS, SegmentWriter
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.pages import DATA_PAGE, I32, INDEX_PAGE, STRUCT, Compact, chunk_cost
from tests.fixtures.forged_parquet import encode_struct
from tests.fixtures.records import every_shape, plain, to_batch

KEY = SegmentKey("us-east-1", "sensor.events", 2, 0, 100, 5199)


def chunks(data: bytes):
    metadata = pq.read_metadata(io.BytesIO(data))
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
                start = chunk.dictionary_page_offset
            yield chunk, start, start + chunk.total_compressed_size


def test_the_pages_of_a_written_segment_add_up_to_what_its_footer_says():
    sink = io.BytesIO()
    writer = SegmentWriter(sink, KEY, row_group_rows=2000)
    writer.write(plain(5000, start=100, value_size=300))
    writer.write(to_batch(every_shape(start=5100, step=1)))
    writer.close()
    data = sink.getvalue()
    for chunk, start, end in chunks(data):
        path = chunk.path_in_schema
        cost = chunk_cost(data, start, end, path, path in DICTIONARY_COLUMNS, chunk.num_values)
        assert cost.values == chunk.num_values, path
        # The footer's size counts the page headers too: a little more than the pages.
        assert 0 < chunk.total_uncompressed_size - cost.uncompressed_bytes < 200 * cost.pages


def page(page_type: int, uncompressed: int, stored: int, body: bytes = b"", **data) -> bytes:
    header: dict[int, tuple[int, Any]] = {
        1: (I32, page_type),
        2: (I32, uncompressed),
        3: (I32, stored),
    }
    if data:
        header[5] = (STRUCT, {1: (I32, data["values"]), 2: (I32, data["encoding"])})
    return encode_struct(header) + body


def test_a_page_that_does_not_fit_its_chunk_is_refused():
    data = page(DATA_PAGE, 10, 50, b"x" * 10, values=1, encoding=0)
    with pytest.raises(ValueError, match="column c page at byte 0: 50 stored bytes"):
        chunk_cost(data, 0, len(data), "c", False, 1)


def test_a_header_cut_short_is_refused():
    data = page(DATA_PAGE, 10, 10, b"x" * 10, values=1, encoding=0)
    with pytest.raises(ValueError, match="runs past its column chunk"):
        chunk_cost(data, 0, 4, "c", False, 1)


def test_index_pages_and_dictionaries_where_the_writer_uses_none_are_refused():
    index = page(INDEX_PAGE, 1, 1, b"x")
    with pytest.raises(ValueError, match="page type 1 is not a data or dictionary page"):
        chunk_cost(index, 0, len(index), "c", False, 1)
    dictionary = page(2, 1, 1, b"x")
    with pytest.raises(ValueError, match="a dictionary page in a column never"):
        chunk_cost(dictionary, 0, len(dictionary), "value", False, 1)
    indices = page(DATA_PAGE, 1, 1, b"x", values=1, encoding=8)
    with pytest.raises(ValueError, match="values encoded RLE_DICTIONARY"):
        chunk_cost(indices, 0, len(indices), "value", False, 1)
    assert chunk_cost(indices, 0, len(indices), "timestamp_type", True, 1).values == 1


def test_a_billion_values_in_a_few_bytes_cost_what_they_decode_to():
    data = page(DATA_PAGE, 5, 5, b"x" * 5, values=1_000_000_000, encoding=0)
    cost = chunk_cost(data, 0, len(data), "headers.list.element.value", False, 10**9)
    assert cost.decoded_bytes >= 16 * 10**9


def test_nesting_and_container_sizes_are_bounded_by_the_bytes():
    deep = bytes([0x1C]) * 40 + b"\0" * 41  # struct in struct in struct ...
    with pytest.raises(ValueError, match="nested deeper than 16"):
        Compact(deep).struct()
    huge_list = bytes([0x19, 0xF5]) + b"\xff\xff\xff\xff\x0f"  # list of 2^32-1 i32
    with pytest.raises(ValueError, match="4294967295-element container runs past"):
        Compact(huge_list).struct()
    with pytest.raises(ValueError, match="varint unfinished or longer than 10 bytes"):
        Compact(bytes([0x15]) + b"\xff" * 12).struct()
