"""A loss skipped with ``on_data_loss = "skip"`` is written as a segment without records
covering the lost offsets, so ingress goes on instead of waiting ``lost_segment_timeout``
for a segment that can never come and halting the partition.

Here the planner's skip is fed to the data source's units as it hands it over (a batch
whose end offsets list the partition as skipped); records deleted at a real source with
DeleteRecords and by retention: ``tests/egress/test_recovery.py``."""

from __future__ import annotations

import pytest

from egress.errors import DataLossError
from egress.kafka_source import KafkaStreamReader, encode, read_range, resume_after_loss
from egress.planning import OffsetRange
from egress.segment_sink import LostOffsets, write_range
from egress.spark_options import CONFIG_OPTION, config_to_option
from replicator.core.segments.selection import CaughtUp, ReadNext, next_step
from tests.fixtures.egress import one_partition_topic
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
    # Reading the lost range never touches Kafka: it is all a loss, no record.
    batches = list(read_range(config, ranges[0]))
    assert batches == [LostOffsets(100, 250)]
    store = local_stack.store(SOURCE, config.bucket(SOURCE))
    written = [write_range(config, store, ranges[0], batches)]
    segments = store.list_segments(SOURCE, topic, 0)
    assert [(s.segment_key.start, s.segment_key.end) for s in segments] == [(100, 249)]
    assert written[0].segments[0].records == 0
    assert store.open(segments[0]).footer.source_data_loss  # ingress will report it
    # A reader at 100 reads it (no records) and is then caught up: no gap, no wait.
    keys = [s.segment_key for s in segments]
    assert next_step(100, keys) == ReadNext(keys[0])
    assert isinstance(next_step(250, keys), CaughtUp)


@pytest.mark.parametrize("policy", ["skip", "fail"])
def test_a_planned_range_gone_before_it_is_read_completes_with_skip(
    local_stack, egress_config, unique, policy
):
    """The log was truncated below a planned range between planning and reading (a topic
    re-created shorter; retention removing a range's start is the same error). With
    ``skip`` the task completes — the range is covered without records — so the batch is
    not failed again on every replay; with ``fail`` it stops, as the policy says."""
    topic = unique("truncated")
    one_partition_topic(local_stack, topic, [b"v%d" % i for i in range(10)])
    config, _ = egress_config({topic: {}}, on_data_loss=policy)
    planned = OffsetRange(topic, 0, 50, 60)
    if policy == "fail":
        with pytest.raises(DataLossError, match="no longer holds offset 50"):
            list(read_range(config, planned))
        return
    batches = list(read_range(config, planned))
    assert batches == [LostOffsets(50, 60)]  # the whole range, no record
    store = local_stack.store(SOURCE, config.bucket(SOURCE))
    written = [write_range(config, store, planned, batches)]
    assert [(s.segment_key.start, s.segment_key.end, s.records) for s in written[0].segments] == [
        (50, 59, 0)
    ]
    [segment] = store.list_segments(SOURCE, topic, 0)
    assert store.open(segment).footer.source_data_loss


def test_resuming_after_a_loss_goes_to_the_log_start_or_the_range_end():
    planned = OffsetRange("t", 0, 100, 200)
    assert resume_after_loss(planned, 100, 150, 300) == 150  # retention took 100..149
    assert resume_after_loss(planned, 100, 250, 300) == 200  # all of it
    assert resume_after_loss(planned, 120, 0, 110) == 200  # truncated below the range
