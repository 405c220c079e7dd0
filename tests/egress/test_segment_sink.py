import numpy as np
import pyarrow as pa

from egress.driver_state import DriverState
from egress.planning import OffsetRange
from egress.segment_rows import (
    SEGMENT_ROW_SCHEMA,
    WrittenRange,
    WrittenSegment,
    segment_rows,
    written_ranges,
)
from egress.segment_sink import SegmentsWritten, record_batch, record_bytes, split_points
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


def test_segment_rows_give_the_sink_the_ranges_and_segments_the_task_wrote():
    """What the reading task hands Spark (one row per segment) is, for the sink, the same
    commit message the segments' writer made: ranges in order, each with its segments."""
    first = WrittenRange(
        OffsetRange("t", 1, 0, 100, topic_id="id-1"),
        [
            WrittenSegment(SegmentKey("r", "t", 1, 0, 0, 59), 60, 6000, 2500),
            WrittenSegment(SegmentKey("r", "t", 1, 0, 60, 99), 38, 3800, 1700),
        ],
    )
    second = WrittenRange(
        OffsetRange("u", 0, 5, 6), [WrittenSegment(SegmentKey("r", "u", 0, 0, 5, 5), 0, 0, 900)]
    )
    rows = [segment_rows(first), segment_rows(second)]
    assert all(batch.schema == SEGMENT_ROW_SCHEMA for batch in rows)
    assert [batch.num_rows for batch in rows] == [2, 1]
    combined = pa.Table.from_batches(rows).combine_chunks().to_batches()
    assert written_ranges("r", combined) == [first, second]


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
