import numpy as np
import pyarrow as pa

from egress.driver_state import DriverState
from egress.planning import OffsetRange
from egress.record_arrow import ROW_SCHEMA, range_row, record_bytes, rows_to_segment
from egress.segment_sink import (
    SegmentsWritten,
    WrittenRange,
    WrittenSegment,
    record_batch,
    split_points,
)
from replicator.core.segments.key import SegmentKey
from tests.fixtures.records import every_shape, to_batch


def test_split_points_close_with_the_record_that_reaches_the_limit():
    sizes = np.array([4, 4, 4, 4, 4, 4, 4])
    assert split_points(sizes, 0, 10) == [3, 6]


def test_split_points_continue_a_partly_filled_segment():
    assert split_points(np.array([4, 4, 4]), 7, 10) == [1]


def test_a_record_larger_than_the_limit_gets_its_own_segment():
    assert split_points(np.array([1, 50, 1, 1]), 0, 10) == [2]


def test_no_split_below_the_limit():
    assert split_points(np.array([1, 2, 3]), 0, 100) == []


def test_record_bytes_count_key_value_and_headers():
    batch = to_batch(every_shape())
    sizes = record_bytes(batch)
    for size, record in zip(sizes, every_shape(), strict=True):
        expected = len(record["key"] or b"") + len(record["value"] or b"")
        expected += sum(len(h["key"].encode()) + len(h["value"] or b"") for h in record["headers"])
        assert size == expected


def test_record_bytes_of_a_slice():
    batch = to_batch(every_shape())
    assert list(record_bytes(batch.slice(6, 3))) == list(record_bytes(batch)[6:9])


def _rows(records):
    segment = to_batch(records)
    return pa.RecordBatch.from_arrays(
        [
            *[pa.nulls(len(records), f.type) for f in ROW_SCHEMA][:4],
            segment.column(0),
            segment.column(1).cast(pa.int64()),
            segment.column(2),
            segment.column(3),
            segment.column(4),
            segment.column(5).cast(ROW_SCHEMA.field("headers").type),
            pa.nulls(len(records), pa.string()),
        ],
        schema=ROW_SCHEMA,
    )


def test_rows_round_trip_to_the_segment_schema_and_drop_range_rows():
    records = every_shape(start=10)
    rows = pa.Table.from_batches(
        [range_row(OffsetRange("t", 0, 10, 20)), _rows(records)]
    ).combine_chunks()
    segment = rows_to_segment(rows.to_batches()[0])
    assert segment.to_pylist() == to_batch(records).to_pylist()


def test_statistics_count_each_batch_once(tmp_path):
    state = DriverState(tmp_path)
    message = SegmentsWritten(
        [
            WrittenRange(
                OffsetRange("t", 1, 0, 100),
                [WrittenSegment(SegmentKey("r", "t", 1, 0, 0, 99), 90, 9000, 4000)],
            )
        ]
    )
    record_batch(state, [message], 0)
    record_batch(state, [message], 0)  # a replayed commit
    last, stats = state.read_partitions()
    assert last == 0
    assert (stats[("t", 1)].records, stats[("t", 1)].offsets, stats[("t", 1)].segments) == (
        90,
        100,
        1,
    )
    assert stats[("t", 1)].bytes_per_offset == 90.0
    assert stats[("t", 1)].next_offset == 100


def test_split_points_depend_on_the_records_not_on_the_batches(local_stack, bucket, unique):
    """A segment that closes exactly at a batch's end must not leave its byte count to the
    next segment: the same records in other batches are cut at the same offsets."""
    from egress.segment_sink import RangeWriter
    from tests.fixtures.records import plain
    from tests.fixtures.stack import SOURCE

    store = local_stack.store(SOURCE, bucket)
    records = plain(12, 0, value_size=96)
    sizes = record_bytes(records)
    limit = int(sizes[:4].sum())  # a segment closes with every fourth record

    def cuts(batches: list[pa.RecordBatch], topic: str) -> list[tuple[int, int]]:
        writer = RangeWriter(store, SOURCE, OffsetRange(topic, 0, 0, 12), limit)
        for batch in batches:
            writer.add(batch)
        return [(s.segment_key.start, s.segment_key.end) for s in writer.finish().segments]

    whole = cuts([records], unique("split"))
    assert whole == [(0, 3), (4, 7), (8, 11)]
    # The first batch ends exactly where a segment closes.
    assert cuts([records.slice(0, 4), records.slice(4)], unique("split")) == whole
    assert (
        cuts([records.slice(0, 8), records.slice(8, 1), records.slice(9)], unique("split")) == whole
    )
