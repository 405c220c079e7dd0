"""A loss skipped with ``on_data_loss = "skip"`` is written as a segment without records
covering the lost offsets, so ingress goes on instead of waiting ``lost_segment_timeout``
for a segment that can never come and halting the partition.

The local broker cannot delete records (no DeleteRecords), so the planner's skip is fed
to the data source's units as it hands it over: a batch whose end offsets list the
partition as skipped."""

from __future__ import annotations

from egress.kafka_source import KafkaStreamReader, encode, read_range
from egress.planning import OffsetRange
from egress.segment_sink import write_ranges
from egress.spark_options import CONFIG_OPTION, config_to_option
from replicator.core.segments.selection import CaughtUp, ReadNext, next_step
from tests.fixtures.stack import SOURCE


def test_a_skipped_loss_is_a_range_that_is_not_read_and_becomes_an_empty_segment(
    local_stack, egress_config, unique
):
    topic = unique("lossy")
    config, _ = egress_config({topic: {}}, on_data_loss="skip")
    reader = KafkaStreamReader({CONFIG_OPTION: config_to_option(config)})
    start = encode({(topic, 0): 100, (topic, 1): 50})
    # Partition 0 lost 100..249 (retention): the batch jumps to 250 and says so.
    end = encode({(topic, 0): 250, (topic, 1): 60}, skipped={(topic, 0): 100})
    tasks = reader.partitions(start, end)
    ranges = sorted((r for t in tasks for r in t.ranges), key=lambda r: r.partition)
    assert ranges == [
        OffsetRange(topic, 0, 100, 250, lost=True),
        OffsetRange(topic, 1, 50, 60),
    ]
    # Reading the lost range never touches Kafka: only its range row comes out.
    batches = list(read_range(config, ranges[0]))
    assert [b.num_rows for b in batches] == [1]
    written = write_ranges(config, iter(batches))
    segments = local_stack.store(SOURCE, config.bucket(SOURCE)).list_segments(SOURCE, topic, 0)
    assert [(s.segment_key.start, s.segment_key.end) for s in segments] == [(100, 249)]
    assert written[0].segments[0].records == 0
    # A reader at 100 reads it (no records) and is then caught up: no gap, no wait.
    keys = [s.segment_key for s in segments]
    assert next_step(100, keys) == ReadNext(keys[0])
    assert isinstance(next_step(250, keys), CaughtUp)
