"""Ingress under faults: late and lost segments, corrupt segments, unreliable SQS."""

from __future__ import annotations

import io
import json
import logging
import threading
import time

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from ingress.service import IngressService
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.segments.format import SegmentWriter
from replicator.core.segments.key import SegmentKey
from tests.fixtures.hostile import HOSTILE
from tests.fixtures.ingress import (
    provenance_offsets,
    queue_holds,
    segment_batch,
    wait_for,
    wait_ready,
)
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION, SOURCE


def run_to_end(setup):
    service = IngressService(setup.config, stop_at_end=True, handle_signals=False)
    return service, service.run()


def metric(service, name, partition):
    value = service.metrics.registry.get_sample_value(
        name,
        {
            "region": "us-east-1",
            "topic": service.ingress.sources[0].topic,
            "partition": str(partition),
        },
    )
    return value or 0.0


def test_a_late_segment_within_the_timeout_is_replayed_in_order(local_stack, ingress_setup):
    setup = ingress_setup(lost_segment_timeout="6s")
    setup.put_descriptor(1)
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    setup.put_segment(0, 20, 29, segment_batch(20, 10))

    def arrive_late() -> None:
        # Once the worker has replayed 0..9 it is waiting at the gap.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len(provenance_offsets(local_stack, setup, 0)) >= 10:
                    break
            except Exception:  # the destination topic does not exist yet
                pass
            time.sleep(0.2)
        setup.put_segment(0, 10, 19, segment_batch(10, 10))

    late = threading.Thread(target=arrive_late)
    late.start()
    service, code = run_to_end(setup)
    late.join()
    assert code == 0
    assert provenance_offsets(local_stack, setup, 0) == list(range(30))
    assert metric(service, "replicator_ingress_late_segments_total", 0) == 1
    assert metric(service, "replicator_ingress_lost_segments_total", 0) == 0


def test_a_lost_segment_halts_only_its_partition_with_the_missing_range(
    local_stack, ingress_setup, caplog
):
    setup = ingress_setup(lost_segment_timeout="2s")
    setup.put_descriptor(2)
    for partition in (0, 1):
        setup.put_segment(partition, 0, 9, segment_batch(0, 10))
        setup.put_segment(partition, 20, 29, segment_batch(20, 10))
    setup.put_segment(1, 10, 19, segment_batch(10, 10))
    with caplog.at_level(logging.ERROR):
        service, code = run_to_end(setup)
    assert code == 1
    lost = [m for m in (r.getMessage() for r in caplog.records) if m.startswith("partition halted")]
    assert len(lost) == 1
    assert f"{setup.topic} partition 0 offsets 10..19 did not appear within 2s" in lost[0]
    assert metric(service, "replicator_ingress_lost_segments_total", 0) == 1
    assert metric(service, "replicator_ingress_partition_halted", 0) == 1
    assert provenance_offsets(local_stack, setup, 0) == list(range(10))
    assert provenance_offsets(local_stack, setup, 1) == list(range(30))
    # The reason is left in the checkpoint, where `replicator status` shows it.
    from replicator.status import collect

    rows = {r.partition: r for r in collect(setup.config) if r.topic == setup.topic}
    assert "offsets 10..19 did not appear within 2s" in rows[0].halted
    assert rows[0].replayed_end == 10 and not rows[1].halted


def test_skip_continues_after_a_lost_segment(local_stack, ingress_setup):
    setup = ingress_setup(lost_segment_timeout="1s")
    text = setup.path.read_text().replace("[ingress]\n", '[ingress]\non_lost_segment = "skip"\n')
    setup.path.write_text(text)
    from replicator.core.config import load_config

    setup.config = load_config(setup.path)
    setup.put_descriptor(1)
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    setup.put_segment(0, 20, 29, segment_batch(20, 10))
    _, code = run_to_end(setup)
    assert code == 0
    assert provenance_offsets(local_stack, setup, 0) == [*range(10), *range(20, 30)]


def test_offsets_lost_at_the_source_are_reported_and_replay_goes_on(
    local_stack, ingress_setup, caplog
):
    """Egress skipped 10..19 (gone from the source log, on_data_loss = skip) and wrote a
    segment without records saying so: ingress neither waits for them nor halts (the
    partition is configured to halt on a lost segment), it reports them."""
    setup = ingress_setup()
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    lost = setup.store.spooled(SegmentKey(SOURCE, setup.topic, 0, 0, 10, 19))
    lost.writer.source_data_loss = True
    stored, _ = lost.close()
    setup.put_segment(0, 20, 29, segment_batch(20, 10))
    with caplog.at_level(logging.ERROR):
        service, code = run_to_end(setup)
    assert code == 0
    assert provenance_offsets(local_stack, setup, 0) == [*range(10), *range(20, 30)]
    reports = [r.getMessage() for r in caplog.records if "SOURCE DATA LOSS" in r.getMessage()]
    assert len(reports) == 1 and stored.s3_key in reports[0] and "10..19" in reports[0]
    assert metric(service, "replicator_ingress_source_data_loss_segments_total", 0) == 1
    assert metric(service, "replicator_ingress_lost_segments_total", 0) == 0


def test_compacted_and_transactional_ranges_raise_no_lost_segment(
    local_stack, ingress_setup, caplog
):
    # Offsets without records (compacted away, transaction markers) are inside covered
    # ranges: nothing is late, nothing is lost.
    setup = ingress_setup(lost_segment_timeout="1s")
    setup.put_descriptor(1)
    sparse = segment_batch(0, 30).filter([i % 3 == 0 for i in range(30)])
    setup.put_segment(0, 0, 29, sparse)
    setup.put_segment(0, 30, 39, None)  # a range holding only markers
    setup.put_segment(0, 40, 49, segment_batch(40, 10))
    service, code = run_to_end(setup)
    assert code == 0
    assert provenance_offsets(local_stack, setup, 0) == [*range(0, 30, 3), *range(40, 50)]
    assert metric(service, "replicator_ingress_late_segments_total", 0) == 0
    done = [r.getMessage() for r in caplog.records if " done at source offset " in r.getMessage()]
    assert len(done) == 1 and "done at source offset 50 " in done[0], done
    assert "cover offsets below 50" in done[0]


def test_a_corrupt_segment_halts_its_partition_naming_the_key(local_stack, ingress_setup, caplog):
    setup = ingress_setup()
    setup.put_descriptor(2)
    for partition in (0, 1):
        setup.put_segment(partition, 0, 9, segment_batch(0, 10))
    setup.put_segment(1, 10, 19, segment_batch(10, 10))
    bad = setup.put_segment(0, 10, 19, segment_batch(10, 10))
    s3_key = bad.to_s3_key("data")
    local_stack.s3().put_object(Bucket=setup.store.bucket, Key=s3_key, Body=b"PAR1 garbage")
    with caplog.at_level(logging.ERROR):
        _, code = run_to_end(setup)
    assert code == 1
    assert any(s3_key in r.getMessage() and "halted" in r.getMessage() for r in caplog.records)
    assert provenance_offsets(local_stack, setup, 0) == list(range(10))
    assert provenance_offsets(local_stack, setup, 1) == list(range(20))


def test_hostile_segments_halt_only_their_partitions_naming_key_and_reason(
    local_stack, ingress_setup, caplog
):
    """One partition per kind of hostile file (after a good segment), one good partition:
    each hostile one halts with its key and reason, recorded in the halted metric, instead
    of failing its worker over and over."""
    setup = ingress_setup()
    kinds = sorted(HOSTILE)
    setup.put_descriptor(len(kinds) + 1)
    for partition in range(len(kinds) + 1):
        setup.put_segment(partition, 0, 9, segment_batch(0, 10))
    good = len(kinds)
    setup.put_segment(good, 10, 19, segment_batch(10, 10))
    hostile_keys = {}
    for partition, kind in enumerate(kinds):
        key = setup.put_segment(partition, 10, 19, segment_batch(10, 10))
        hostile_keys[partition] = key.to_s3_key("data")
        local_stack.s3().put_object(
            Bucket=setup.store.bucket, Key=hostile_keys[partition], Body=HOSTILE[kind](key)
        )
    with caplog.at_level(logging.ERROR):
        service, code = run_to_end(setup)
    assert code == 1
    halts = [r.getMessage() for r in caplog.records if "partition halted" in r.getMessage()]
    for partition, kind in enumerate(kinds):
        assert [h for h in halts if hostile_keys[partition] in h], f"{kind}: {halts}"
        assert metric(service, "replicator_ingress_partition_halted", partition) == 1, kind
        assert provenance_offsets(local_stack, setup, partition) == list(range(10)), kind
    assert len(halts) == len(kinds)
    assert provenance_offsets(local_stack, setup, good) == list(range(20))


@pytest.mark.parametrize(
    "value", [b"not json", b'{"next_source_offset": "10"}', b"[1]", b'{"time": 1}']
)
def test_a_malformed_checkpoint_halts_its_partition_naming_it(
    local_stack, ingress_setup, unique, caplog, value
):
    setup = ingress_setup()
    setup.put_descriptor(2, export_start={0: 0, 1: 0})
    for partition in (0, 1):
        setup.put_segment(partition, 0, 9, segment_batch(0, 10))
    ingress = setup.config.ingress
    create_topic(local_stack.bootstrap(DESTINATION), ingress.checkpoint_topic, 2)
    target = WriteTarget(SourcePartition(SOURCE, setup.topic, 0), setup.destination, 0)
    store = CheckpointStore({}, ingress.checkpoint_topic, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(DESTINATION)})
    producer.produce(
        ingress.checkpoint_topic,
        key=target.checkpoint_key.encode(),
        value=value,
        partition=store.topic_partition(target).partition,
    )
    producer.flush(10)
    with caplog.at_level(logging.ERROR):
        service, code = run_to_end(setup)
    assert code == 1
    halts = [r.getMessage() for r in caplog.records if "partition halted" in r.getMessage()]
    assert len(halts) == 1 and f"checkpoint {target.checkpoint_key} at" in halts[0], halts
    assert metric(service, "replicator_ingress_partition_halted", 0) == 1
    assert provenance_offsets(local_stack, setup, 1) == list(range(10))


def test_duplicated_reordered_and_dropped_events_leave_the_destination_exact(
    local_stack, ingress_setup
):
    setup = ingress_setup()
    setup.put_descriptor(1)
    sqs = local_stack.sqs()
    queue = sqs.get_queue_url(QueueName=setup.config.region(DESTINATION).sqs_queue)["QueueUrl"]
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    wait_for(lambda: queue_holds(sqs, queue) > 0, "the segment's notification")
    sqs.purge_queue(QueueUrl=queue)  # its event is dropped before ingress sees it
    service = IngressService(setup.config, handle_signals=False)

    def feed() -> None:
        try:
            wait_ready(service)
            # Out of order: later offsets first.
            setup.put_segment(0, 30, 39, segment_batch(30, 10))
            setup.put_segment(0, 20, 29, segment_batch(20, 10))
            key = setup.put_segment(0, 10, 19, segment_batch(10, 10))
            duplicate = {
                "Records": [
                    {
                        "eventName": "ObjectCreated:Put",
                        "eventTime": "2026-01-01T00:00:00Z",
                        "s3": {"object": {"key": key.to_s3_key("data"), "size": 1}},
                    }
                ]
            }
            for _ in range(3):
                sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(duplicate))
            wait_for(lambda: len(provenance_offsets(local_stack, setup, 0)) >= 40, "replay")
            # Every notification and duplicate consumed before the check: late duplicates
            # would otherwise be judged before they arrived.
            wait_for(lambda: queue_holds(sqs, queue) == 0, "the queue to drain")
        finally:
            service.request_stop()

    feeder = threading.Thread(target=feed)
    feeder.start()
    service.run()
    feeder.join()
    assert provenance_offsets(local_stack, setup, 0) == list(range(40))
    received = service.metrics.registry.get_sample_value(
        "replicator_ingress_sqs_messages_received_total", {"region": DESTINATION}
    )
    assert received is not None and received >= 4


def test_a_damaged_row_group_read_ahead_halts_after_the_row_groups_before_it(
    local_stack, ingress_setup, caplog
):
    """One partition alone reads each next row group ahead (two read slots, one busy
    partition): the damage in row group 2 is found while row group 1 is produced, and must
    still stop the partition exactly after row group 1, everything before it once."""
    setup = ingress_setup()
    setup.put_descriptor(1)
    key = SegmentKey(SOURCE, setup.topic, 0, 0, 0, 3999)
    file = io.BytesIO()
    writer = SegmentWriter(file, key, row_group_rows=1000)
    writer.write(segment_batch(0, 4000))
    writer.close()
    body = bytearray(file.getvalue())
    metadata = pq.ParquetFile(io.BytesIO(bytes(body))).metadata
    assert metadata.num_row_groups == 4
    values = next(
        metadata.row_group(2).column(c)
        for c in range(metadata.num_columns)
        if metadata.row_group(2).column(c).path_in_schema == "value"
    )
    body[values.data_page_offset + values.total_compressed_size // 2] ^= 0xFF
    s3_key = key.to_s3_key("data")
    local_stack.s3().put_object(Bucket=setup.store.bucket, Key=s3_key, Body=bytes(body))
    assert setup.config.ingress is not None and setup.config.ingress.read_concurrency == 2

    with caplog.at_level(logging.ERROR):
        _, code = run_to_end(setup)

    assert code == 1
    halts = [r.getMessage() for r in caplog.records if "partition halted" in r.getMessage()]
    assert len(halts) == 1 and s3_key in halts[0] and "row group 2" in halts[0], halts
    assert provenance_offsets(local_stack, setup, 0) == list(range(2000))
