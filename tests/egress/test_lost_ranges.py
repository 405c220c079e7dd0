"""A loss skipped with ``on_data_loss = "skip"`` is written as a segment without records
covering the lost offsets, so ingress goes on instead of waiting ``lost_segment_timeout``
for a segment that can never come and halting the partition.

Here the planner's skip is fed to the data source's units as it hands it over (a batch
whose end offsets list the partition as skipped); records deleted at a real source with
DeleteRecords and by retention: ``tests/egress/test_recovery.py``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from egress import kafka_source
from egress.errors import DataLossError
from egress.kafka_source import KafkaStreamReader, encode, read_range, resume_after_loss
from egress.planning import OffsetRange
from egress.segment_sink import LostOffsets, write_range
from egress.spark_options import CONFIG_OPTION, config_to_option
from replicator.core.kafka.arrow_reads import PartitionReader, open_reader
from replicator.core.kafka.errors import BrokerError
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


@pytest.mark.parametrize("policy", ["skip", "fail"])
def test_log_bounds_unreadable_for_a_while_are_asked_again_not_a_failure(
    local_stack, egress_config, unique, monkeypatch, policy
):
    """The log's bounds asked while its broker restarts fail ("Local: Unknown partition",
    seen in a chaos run: egress stopped). The read asks again instead of failing its batch,
    and ends as the log says once it answers: here the range is gone (a truncated log),
    so it is skipped or fails with the data loss, never with the broker's hiccup. The
    first and the third asks fail: one while checking the bounds, one while skipping."""
    topic = unique("bounds-later")
    one_partition_topic(local_stack, topic, [b"v%d" % i for i in range(10)])
    config, _ = egress_config({topic: {}}, on_data_loss=policy)
    monkeypatch.setattr(kafka_source, "LOSS_CHECK_AFTER", 1.0)
    asks: list[int] = []

    def flaky_reader(conf: dict, skip_header: str | None = None) -> PartitionReader:
        reader = open_reader(conf, skip_header)
        watermarks = reader.watermarks

        def sometimes(topic: str, partition: int, timeout: float) -> tuple[int, int]:
            asks.append(1)
            if len(asks) in (1, 3):
                raise BrokerError("reading the log bounds: Local: Unknown partition")
            return watermarks(topic, partition, timeout)

        reader.watermarks = sometimes  # type: ignore[method-assign]
        return reader

    monkeypatch.setattr(kafka_source, "open_reader", flaky_reader)
    # Records 5-9 are read; 10-14 were planned but the log ends at 10: no progress, so the
    # bounds are asked (a log truncated below the planned end looks like a quiet one).
    planned = OffsetRange(topic, 0, 5, 15)
    if policy == "fail":
        with pytest.raises(DataLossError, match="no longer holds offset 10"):
            list(read_range(config, planned))
        assert len(asks) == 2  # the first failed and was asked again
        return
    read = list(read_range(config, planned))
    assert read[-1] == LostOffsets(10, 15)
    batches = [b for b in read[:-1] if isinstance(b, pa.RecordBatch)]
    offsets = [o for b in batches for o in b["offset"].to_pylist()]
    assert offsets == [5, 6, 7, 8, 9]
    assert len(asks) == 5  # bounds: failed, loss found; skipping: failed, then both again


def test_resuming_after_a_loss_goes_to_the_log_start_or_the_range_end():
    planned = OffsetRange("t", 0, 100, 200)
    assert resume_after_loss(planned, 100, 150, 300) == 150  # retention took 100..149
    assert resume_after_loss(planned, 100, 250, 300) == 200  # all of it
    assert resume_after_loss(planned, 120, 0, 110) == 200  # truncated below the range
