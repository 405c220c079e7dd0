"""Ingress on the local stack: replay of segments into the destination cluster."""

from __future__ import annotations

from ingress.service import IngressService
from replicator.core.kafka import provenance
from replicator.core.segments.format import TIMESTAMP_CREATE_TIME, TIMESTAMP_NONE
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import segment_batch
from tests.fixtures.records import every_shape, to_batch
from tests.fixtures.stack import DESTINATION, SOURCE


def destination_records(local_stack, setup, partition):
    """Destination records without the provenance header, and their provenance offsets."""
    records = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, partition)
    stripped, sources = [], []
    for _offset, ts, ts_type, key, value, headers in records:
        kept = tuple(h for h in headers if h[0] != provenance.HEADER)
        sources.append(
            provenance.source_offset(
                list(headers), provenance.SourcePartition(SOURCE, setup.topic, partition)
            )
        )
        stripped.append((ts, ts_type, key, value, kept))
    return stripped, sources


def expected(records):
    result = []
    for r in records:
        headers = tuple((h["key"], h["value"]) for h in r["headers"])
        result.append((r["timestamp"], r["timestamp_type"], r["key"], r["value"], headers))
    return result


def run_to_end(setup):
    return IngressService(setup.config, stop_at_end=True, handle_signals=False).run()


def test_every_record_shape_replays_into_an_auto_created_topic(local_stack, ingress_setup):
    setup = ingress_setup()
    setup.put_descriptor(2, {"retention.ms": "-1"})  # not compacted: some have no key
    first = every_shape(start=0, step=2)  # offsets 0..18, odd offsets hold no record
    second = every_shape(start=20)  # offsets 20..29
    for partition in (0, 1):
        setup.put_segment(partition, 0, 19, to_batch(first))
        setup.put_segment(partition, 20, 29, to_batch(second))

    assert run_to_end(setup) == 0

    metadata = local_stack.admin(DESTINATION).list_topics(timeout=10).topics[setup.destination]
    assert len(metadata.partitions) == 2
    for partition in (0, 1):
        got, sources = destination_records(local_stack, setup, partition)
        assert sources == [r["offset"] for r in first + second]
        for (ts, ts_type, key, value, headers), want in zip(
            got, expected(first + second), strict=True
        ):
            assert (key, value, headers) == want[2:]
            assert ts_type == TIMESTAMP_CREATE_TIME  # LogAppendTime becomes CreateTime
            if want[1] != TIMESTAMP_NONE and want[0] > 0:
                # librdkafka reads a timestamp of 0 as "now": epoch-0 cannot be reproduced.
                assert ts == want[0]


def test_a_record_a_compacted_destination_refuses_halts_its_partition_naming_it(
    local_stack, ingress_setup, caplog
):
    """Kafka refuses a record without a key for a compacted topic, every time: the
    partition halts naming the record, after the records before it, instead of retrying.
    (A descriptor no longer makes a new destination compacted: an operator does, by hand.)"""
    from confluent_kafka.admin import NewTopic

    setup = ingress_setup()
    setup.put_descriptor(2, {"cleanup.policy": "compact"})
    compacted = NewTopic(setup.destination, 2, config={"cleanup.policy": "compact"})
    admin = local_stack.admin(DESTINATION)
    admin.create_topics([compacted])[setup.destination].result(timeout=30)
    setup.put_segment(0, 0, 9, segment_batch(0, 10))  # keyed: replays
    keyless = every_shape(start=0)  # offset 1 has no key
    setup.put_segment(1, 0, 9, to_batch(keyless))
    service = IngressService(setup.config, stop_at_end=True, handle_signals=False)
    assert service.run() == 1  # a partition halted
    _, sources = destination_records(local_stack, setup, 0)
    assert sources == list(range(10))
    _, sources = destination_records(local_stack, setup, 1)
    assert sources == []  # the transaction holding offset 0 was aborted with the refusal
    reasons = " ".join(r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    # One delivery report per slice: the slice's last record names where it was refused.
    assert f"{setup.destination} refused a record at or before source offset 9 of " in reasons
    assert f"{SOURCE}/{setup.topic} partition 1" in reasons, reasons


def test_a_second_run_produces_nothing_twice(local_stack, ingress_setup):
    setup = ingress_setup()
    setup.put_descriptor(1)
    setup.put_segment(0, 0, 9, to_batch(every_shape()))
    assert run_to_end(setup) == 0
    setup.put_segment(0, 10, 19, to_batch(every_shape(start=10)))
    assert run_to_end(setup) == 0
    _, sources = destination_records(local_stack, setup, 0)
    assert sources == list(range(20))


def test_destination_with_fewer_partitions_halts_its_source_before_anything_is_produced(
    local_stack, ingress_setup, caplog
):
    from confluent_kafka.admin import NewTopic

    setup = ingress_setup()
    setup.put_descriptor(3)
    setup.put_segment(0, 0, 9, to_batch(every_shape()))
    admin = local_stack.admin(DESTINATION)
    admin.create_topics([NewTopic(setup.destination, 2)])[setup.destination].result(timeout=30)
    service = IngressService(setup.config, stop_at_end=True, handle_signals=False)
    # The source is not replayed, the instance does not die, and a --stop-at-end run
    # counts it as halted.
    assert service.run() == 1
    assert (
        f"{setup.destination} has 2 partitions but us-east-1/{setup.topic} needs 3" in caplog.text
    )
    assert read_partition(local_stack.bootstrap(DESTINATION), setup.destination, 0) == []


def test_a_record_too_large_for_the_destination_halts_its_partition_naming_the_offset(
    local_stack, ingress_setup, caplog
):
    import logging

    import pyarrow as pa

    from replicator.core.config import load_config
    from replicator.core.segments.format import SCHEMA

    setup = ingress_setup()
    # The destination accepts at most ~20 KB per request.
    text = setup.path.read_text().replace(
        f'kafka.bootstrap_servers = "{local_stack.bootstrap(DESTINATION)}"',
        f'kafka.bootstrap_servers = "{local_stack.bootstrap(DESTINATION)}"\n'
        'kafka.config = { "message.max.bytes" = 20000 }',
    )
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    setup.put_descriptor(1)
    values = [b"small"] * 5 + [b"x" * 50_000] + [b"small"] * 4
    batch = pa.RecordBatch.from_pydict(
        {
            "offset": list(range(10)),
            "timestamp": [1_700_000_000_000] * 10,
            "timestamp_type": [1] * 10,
            "key": [None] * 10,
            "value": values,
            "headers": [[]] * 10,
        },
        schema=SCHEMA,
    )
    setup.put_segment(0, 0, 9, batch)
    with caplog.at_level(logging.ERROR):
        code = run_to_end(setup)
    assert code == 1
    assert any(
        f"source offset 5 of us-east-1/{setup.topic} partition 0 is larger than "
        f"{setup.destination} accepts" in r.getMessage()
        for r in caplog.records
    )


def test_source_filters_drop_exactly_their_records_and_the_rest_replays(local_stack, ingress_setup):
    setup = ingress_setup(
        extra_toml="""
[[ingress.sources.filters]]
plugin = "replicator.core.filters.builtin:by_header"
config = { name = "h", value = "3" }
[[ingress.sources.filters]]
plugin = "tests.fixtures.filter_plugins:drop_keys_ending"
config = { suffix = "7" }
"""
    )
    setup.put_descriptor(1)
    setup.put_segment(0, 0, 29, segment_batch(0, 30))
    assert run_to_end(setup) == 0
    _, sources = destination_records(local_stack, setup, 0)
    assert sources == [o for o in range(30) if o != 3 and o % 10 != 7]
    # The dropped offsets count as replayed: a second run writes nothing more.
    assert run_to_end(setup) == 0
    assert destination_records(local_stack, setup, 0)[1] == sources


def test_a_destination_deleted_and_created_again_is_replayed_again_whole(
    local_stack, ingress_setup, caplog
):
    from tests.fixtures.relay import recreate_topic

    setup = ingress_setup()
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 29, segment_batch(0, 30))
    assert run_to_end(setup) == 0
    recreate_topic(local_stack.bootstrap(DESTINATION), setup.destination, 1)
    assert run_to_end(setup) == 0
    _, sources = destination_records(local_stack, setup, 0)
    assert sources == list(range(30)), "the re-created destination was not replayed whole"
    assert "not a resume point" in caplog.text
