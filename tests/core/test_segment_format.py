import io
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.core.segments import format as format_module
from replicator.core.segments.errors import CorruptSegmentError, SegmentError, SegmentMismatchError
from replicator.core.segments.format import (
    DICTIONARY_COLUMNS,
    FOOTER_KEY,
    SCHEMA,
    SegmentFooter,
    SegmentReader,
    SegmentWriter,
    content_checksum,
)
from replicator.core.segments.key import SegmentKey
from tests.fixtures.hostile import HOSTILE, dictionary_bomb
from tests.fixtures.records import every_shape, plain, to_batch

KEY = SegmentKey("us-east-1", "sensor.events", 2, 0, 100, 199)


def write(key, *batches, **kwargs) -> tuple[bytes, SegmentFooter]:
    sink = io.BytesIO()
    writer = SegmentWriter(sink, key, **kwargs)
    for batch in batches:
        writer.write(batch)
    footer = writer.close()
    return sink.getvalue(), footer


def read(data: bytes, key=KEY) -> pa.Table:
    return SegmentReader(io.BytesIO(data), key, "s3://b/k").read_all()


def test_every_field_round_trips_exactly():
    records = every_shape(start=100, step=3)
    data, footer = write(KEY, to_batch(records))
    assert read(data).to_pylist() == to_batch(records).to_pylist()
    assert footer.record_count == len(records)
    assert (footer.first_record_offset, footer.last_record_offset) == (100, 100 + 3 * 9)


def test_null_and_empty_stay_different():
    table = read(write(KEY, to_batch(every_shape(100)))[0])
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    assert keys[1] is None and keys[2] == b""
    assert values[3] is None and values[4] == b""


def test_headers_keep_order_duplicates_nulls_and_unicode_keys():
    table = read(write(KEY, to_batch(every_shape(100)))[0])
    headers = table.column("headers").to_pylist()
    assert headers[6] == [
        {"key": "h", "value": b"1"},
        {"key": "h", "value": b"2"},
        {"key": "h", "value": b"1"},
    ]
    assert headers[7] == [
        {"key": "n", "value": None},
        {"key": "e", "value": b""},
        {"key": "n", "value": None},
    ]
    assert headers[8] == [{"key": "ключ-🔑", "value": b"\x00\xff"}]


def test_every_timestamp_type_round_trips_with_millisecond_precision():
    table = read(write(KEY, to_batch(every_shape(100)))[0])
    millis = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert millis[:5] == [1_700_000_000_123, 1_700_000_000_456, -1, 0, 946_684_800_000]
    assert table.column("timestamp_type").to_pylist()[:3] == [1, 2, 0]


def test_footer_describes_the_segment():
    data, footer = write(KEY, plain(10, start=150))
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    stored = SegmentFooter.from_json(meta.metadata[FOOTER_KEY])
    assert stored == footer
    assert (stored.region, stored.topic, stored.partition, stored.level) == (
        "us-east-1",
        "sensor.events",
        2,
        0,
    )
    assert (stored.start_offset, stored.end_offset, stored.record_count) == (100, 199, 10)
    assert stored.checksum.startswith("sha256:")
    assert stored.format_version == 1 and stored.writer_version and stored.created_at


def test_empty_segment_covers_a_range_without_records():
    # A stretch of log holding only transaction markers or compacted-away records.
    data, footer = write(KEY)
    assert footer.record_count == 0 and footer.first_record_offset is None
    assert read(data).num_rows == 0


def test_small_row_groups_split_the_file_and_still_verify():
    data, footer = write(KEY, plain(50, start=100), plain(50, start=150), row_group_rows=30)
    assert len(footer.row_group_checksums) == pq.ParquetFile(io.BytesIO(data)).num_row_groups
    assert len(footer.row_group_checksums) == 4  # 30 + 30 + 30 + 10 rows
    assert read(data).column("offset").to_pylist() == list(range(100, 200))


def test_a_segment_is_read_only_by_the_thread_reading_it(monkeypatch):
    """Arrow's pool threads must not call into the Python file Arrow reads through (nor
    hold the buffers it hands out): one still finishing after a read returned takes the
    GIL while the interpreter exits, and the process aborts (``terminate called without
    an active exception``) after a command has done its work."""
    threads: set[str] = set()
    read_at = format_module._RowGroupWindow.read_at

    def noting(self, position: int, size: int):
        threads.add(threading.current_thread().name)
        return read_at(self, position, size)

    monkeypatch.setattr(format_module._RowGroupWindow, "read_at", noting)
    data, _ = write(KEY, plain(50, start=100), plain(50, start=150), row_group_rows=30)
    assert read(data).num_rows == 100
    assert threads == {threading.current_thread().name}


def test_row_groups_are_bounded_by_bytes_whatever_the_batch_size():
    data, _ = write(KEY, plain(100, start=100, value_size=1000), row_group_bytes=20_000)
    parquet = pq.ParquetFile(io.BytesIO(data))
    rows = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
    assert sum(rows) == 100 and max(rows) <= 20
    assert read(data).column("offset").to_pylist() == list(range(100, 200))


def test_checksum_does_not_depend_on_chunking():
    whole = pa.Table.from_batches([to_batch(every_shape(0))])
    rechunked = pa.concat_tables([whole.slice(0, 3), whole.slice(3, 4), whole.slice(7)])
    assert rechunked.column(0).num_chunks == 3
    assert content_checksum(whole) == content_checksum(rechunked)
    assert content_checksum(whole) == content_checksum(whole.combine_chunks())


def test_checksum_tells_null_from_empty():
    records = every_shape(0)
    changed = [dict(r) for r in records]
    changed[3]["value"] = b""  # tombstone becomes an empty value
    assert content_checksum(to_batch(records)) != content_checksum(to_batch(changed))


def test_out_of_range_or_unordered_offsets_are_refused():
    sink = io.BytesIO()
    writer = SegmentWriter(sink, KEY)
    with pytest.raises(ValueError, match="offsets must increase strictly"):
        writer.write(plain(1, start=99))
    with pytest.raises(ValueError, match="offsets must increase strictly"):
        writer.write(plain(2, start=199))
    writer.write(plain(2, start=120))
    with pytest.raises(ValueError, match="after 121"):
        writer.write(plain(1, start=121))


def _rewrite_with(data: bytes, table: pa.Table | None = None, footer: bytes | None = None) -> bytes:
    original = pq.ParquetFile(io.BytesIO(data))
    meta = dict(original.metadata.metadata)
    if footer is not None:
        meta[FOOTER_KEY] = footer
    table = (table if table is not None else original.read()).replace_schema_metadata(meta)
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", use_dictionary=sorted(DICTIONARY_COLUMNS))
    return out.getvalue()


def test_changed_content_is_detected_by_checksum():
    data, _ = write(KEY, plain(10, start=100))
    table = pq.read_table(io.BytesIO(data))
    values = table.column("value").to_pylist()
    values[4] = b"tampered"
    tampered = table.set_column(4, SCHEMA.field("value"), pa.array(values, pa.binary()))
    with pytest.raises(SegmentMismatchError, match=r"s3://b/k: checksum mismatch in row group 0"):
        read(_rewrite_with(data, table=tampered))


@pytest.mark.parametrize(
    ("other_key", "field"),
    [
        (SegmentKey("us-east-1", "sensor.events", 3, 0, 100, 199), "partition"),
        (SegmentKey("us-east-1", "other", 2, 0, 100, 199), "topic"),
        (SegmentKey("us-west-1", "sensor.events", 2, 0, 100, 199), "region"),
        (SegmentKey("us-east-1", "sensor.events", 2, 1, 100, 199), "level"),
        (SegmentKey("us-east-1", "sensor.events", 2, 0, 100, 250), "end_offset"),
        (SegmentKey("us-east-1", "sensor.events", 2, 0, 0, 199), "start_offset"),
    ],
)
def test_footer_that_disagrees_with_the_key_is_detected(other_key, field):
    data, _ = write(KEY, plain(3, start=100))
    with pytest.raises(SegmentMismatchError, match=f"s3://b/k: footer {field} is"):
        read(data, key=other_key)


def test_wrong_record_count_in_footer_is_detected():
    data, footer = write(KEY, plain(3, start=100))
    forged = footer.to_json().replace(b'"record_count":3', b'"record_count":4')
    with pytest.raises(SegmentMismatchError, match="record_count 4 but the file holds 3 rows"):
        read(_rewrite_with(data, footer=forged))


def test_parquet_file_without_footer_is_not_a_segment():
    out = io.BytesIO()
    pq.write_table(pa.Table.from_batches([plain(2, start=100)]), out)
    with pytest.raises(SegmentMismatchError, match="no replicator footer"):
        read(out.getvalue())


@pytest.mark.parametrize("cut", [1, 8, 100, 0.5])
def test_truncated_file_is_detected(cut):
    data, _ = write(KEY, plain(100, start=100))
    size = int(len(data) * cut) if isinstance(cut, float) else len(data) - cut
    with pytest.raises(CorruptSegmentError, match="s3://b/k: not a readable Parquet file"):
        read(data[:size])


def test_damaged_page_is_detected():
    data, _ = write(KEY, plain(100, start=100, value_size=1000))
    damaged = bytearray(data)
    middle = len(damaged) // 3
    damaged[middle : middle + 16] = b"\xa5" * 16
    with pytest.raises((CorruptSegmentError, SegmentMismatchError), match="s3://b/k"):
        read(bytes(damaged))


HOSTILE_KEY = SegmentKey("us-east-1", "sensor.events", 2, 0, 100, 109)


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_a_hostile_file_is_refused_as_a_segment_error_naming_it(what):
    data = HOSTILE[what](HOSTILE_KEY)
    with pytest.raises(SegmentError, match=r"^segment s3://b/k: ") as raised:
        read(data, key=HOSTILE_KEY)
    assert isinstance(raised.value, (CorruptSegmentError, SegmentMismatchError))


def test_the_dictionary_bomb_is_small_and_refused_before_decoding():
    data = dictionary_bomb(HOSTILE_KEY, copies=100_000)  # 100 GiB decoded
    assert len(data) < 1024**2
    with pytest.raises(SegmentMismatchError, match="column value is dictionary-encoded"):
        read(data, key=HOSTILE_KEY)


def test_declared_sizes_over_the_caps_are_refused_before_decoding(monkeypatch):
    data, _ = write(KEY, plain(50, start=100))
    monkeypatch.setattr(format_module, "MAX_ROW_GROUP_ROWS", 49)
    with pytest.raises(SegmentMismatchError, match="row group 0 declares 50 rows"):
        read(data)
    monkeypatch.setattr(format_module, "MAX_ROW_GROUP_ROWS", 50)
    monkeypatch.setattr(format_module, "MAX_ROW_GROUP_BYTES", 100)
    with pytest.raises(SegmentMismatchError, match=r"row group 0 declares \d+ bytes decoded"):
        read(data)


def test_a_segment_file_written_by_the_writer_passes_every_check():
    data, _ = write(KEY, to_batch(every_shape(start=100, step=3)))
    assert read(data).num_rows == 10
