"""The relay on real brokers: every record shape byte-exact into a remapped topic,
topic-to-topic in one cluster, source partitions merged into one, filters, and a
``--stop-at-end`` run that ends at the log ends seen at start."""

from __future__ import annotations

import dataclasses

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from relay.errors import RelayLoopError
from relay.service import RelayService, loop_problem
from replicator.core.config import load_config
from replicator.core.errors import ConfigError
from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.errors import DestinationTopicError
from tests.fixtures.independent import read_partition
from tests.fixtures.records import produce_every_shape
from tests.fixtures.relay import UPSTREAM_B, create_topic, run_until_it_ends
from tests.fixtures.stack import DESTINATION, SOURCE


def strip(headers: tuple) -> tuple:
    return tuple(h for h in headers if h[0] != provenance.HEADER)


def relay_once(setup) -> int:
    return RelayService(setup.config, stop_at_end=True, handle_signals=False).run()


def assert_relayed(local_stack, setup, partitions, destination=DESTINATION, origin=SOURCE):
    for partition in range(partitions):
        source = read_partition(local_stack.bootstrap(SOURCE), setup.source, partition)
        copied = read_partition(local_stack.bootstrap(destination), setup.destination, partition)
        named = provenance.SourcePartition(origin, setup.source, partition)
        assert [provenance.source_offset(list(r[5]), named) for r in copied] == [
            r[0] for r in source
        ], f"partition {partition}: offsets"
        assert [(r[3], r[4], strip(r[5])) for r in copied] == [
            (r[3], r[4], r[5]) for r in source
        ], f"partition {partition}: keys, values or headers differ"
        # Timestamps: the source's own (none-type records get the producer's clock).
        assert [r[1] for r, s in zip(copied, source, strict=True) if s[2] != 0] == [
            s[1] for s in source if s[2] != 0
        ]


def test_every_record_shape_is_relayed_byte_exact_to_a_remapped_topic(local_stack, relay_setup):
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    produce_every_shape(producer, setup.source, 2, 3, lambda _r, n: 1_700_000_000_000 + n)
    producer.flush(30)
    assert relay_once(setup) == 0
    assert_relayed(local_stack, setup, 2)
    # A second run relays nothing twice.
    assert relay_once(setup) == 0
    assert_relayed(local_stack, setup, 2)
    topics = local_stack.admin(DESTINATION).list_topics(timeout=10).topics
    assert len(topics[setup.destination].partitions) == 2


def test_topic_to_topic_in_one_cluster(local_stack, relay_setup):
    setup = relay_setup(destination=SOURCE)
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 1)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(50):
        producer.produce(setup.source, key=b"%d" % i, value=b"v%d" % i, partition=0)
    producer.flush(30)
    assert relay_once(setup) == 0
    assert_relayed(local_stack, setup, 1, destination=SOURCE)


def test_source_partitions_merged_into_one_keep_their_own_order(local_stack, relay_setup):
    setup = relay_setup(topic_options="destination_partition = 0")
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 3)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(90):
        producer.produce(setup.source, key=b"%d" % i, value=b"v%d" % i, partition=i % 3)
    producer.flush(30)
    assert relay_once(setup) == 0
    copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, 0)
    for partition in range(3):
        source = read_partition(local_stack.bootstrap(SOURCE), setup.source, partition)
        named = provenance.SourcePartition(SOURCE, setup.source, partition)
        mine = [r for r in copied if provenance.source_offset(list(r[5]), named) is not None]
        assert [provenance.source_offset(list(r[5]), named) for r in mine] == [r[0] for r in source]
        assert [r[4] for r in mine] == [r[4] for r in source]


def test_filters_drop_exactly_their_records_and_a_broken_one_halts_only_its_partition(
    local_stack, relay_setup
):
    filters = """
[[relay.topics.filters]]
plugin = "replicator.core.filters.builtin:by_header"
config = { name = "env", value = "test" }
[[relay.topics.filters]]
plugin = "tests.fixtures.filter_plugins:drop_odd_values"
config = { prefix = "v" }
"""
    setup = relay_setup(topic_options=filters)
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(40):
        env = b"test" if i % 5 == 0 else b"prod"
        producer.produce(setup.source, value=b"v%d" % i, partition=i % 2, headers=[("env", env)])
    producer.flush(30)
    assert relay_once(setup) == 0
    for partition in range(2):
        source = read_partition(local_stack.bootstrap(SOURCE), setup.source, partition)
        expected = [
            r[4]
            for r in source
            if dict(r[5]).get("env") != b"test" and not (r[4][1:].isdigit() and int(r[4][1:]) % 2)
        ]
        copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, partition)
        assert [r[4] for r in copied] == expected

    broken = relay_setup(
        topic_options='filters = [{ plugin = "tests.fixtures.filter_plugins:fail_on_partition",'
        " config = { partition = 1 } }]"
    )
    create_topic(local_stack.bootstrap(SOURCE), broken.source, 2)
    for i in range(20):
        producer.produce(broken.source, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    assert relay_once(broken) == 1  # a partition halted
    relay = broken.config.relay
    assert relay is not None
    store = CheckpointStore(
        {"bootstrap.servers": local_stack.bootstrap(DESTINATION)},
        relay.checkpoint_topic,
        relay.checkpoint_partitions,
    )
    for partition, halted in ((0, ""), (1, "tests.fixtures.filter_plugins:fail_on_partition")):
        target = WriteTarget(
            provenance.SourcePartition(SOURCE, broken.source, partition),
            broken.destination,
            partition,
        )
        checkpoint = store.resume_point(target).checkpoint
        assert checkpoint is not None and halted in checkpoint.halted
        assert bool(checkpoint.halted) == bool(halted)
    assert read_partition(local_stack.bootstrap(DESTINATION), broken.destination, 1) == []
    copied = read_partition(local_stack.bootstrap(DESTINATION), broken.destination, 0)
    assert len(copied) == 10


def test_a_destination_with_too_few_partitions_stops_the_relay_before_anything_is_written(
    local_stack, relay_setup
):
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 3)
    create_topic(local_stack.bootstrap(DESTINATION), setup.destination, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(9):
        producer.produce(setup.source, value=b"v%d" % i, partition=i % 3)
    producer.flush(10)
    with pytest.raises(DestinationTopicError, match=r"has 2 partitions but relay of .* needs 3"):
        relay_once(setup)
    for partition in range(2):
        assert (
            read_partition(local_stack.bootstrap(DESTINATION), setup.destination, partition) == []
        )


def test_a_loop_inside_one_cluster_is_refused_at_load(relay_setup):
    with pytest.raises(ConfigError, match="would be relayed into itself"):
        relay_setup(destination=SOURCE, source_topic="same.name", destination_topic="same.name")


def test_two_names_for_one_cluster_are_refused_as_a_loop_before_anything_is_written(
    local_stack, relay_setup, unique
):
    """The config check sees two region names; the relay asks both clusters their id."""
    same = unique("relay.same")
    setup = relay_setup(
        sources=(UPSTREAM_B,),
        east_b=local_stack.bootstrap(DESTINATION),  # another name for the destination
        source_topic=same,
        destination_topic=same,
    )
    create_topic(local_stack.bootstrap(DESTINATION), same, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(DESTINATION)})
    for i in range(4):
        producer.produce(same, value=b"v%d" % i, partition=i % 2)
    producer.flush(10)
    with pytest.raises(RelayLoopError) as info:
        relay_once(setup)
    message = str(info.value)
    assert f"{UPSTREAM_B!r} and relay.destination {DESTINATION!r} are one cluster" in message
    assert same in message
    admin = AdminClient({"bootstrap.servers": local_stack.bootstrap(DESTINATION)})
    topics = admin.list_topics(timeout=10).topics
    assert setup.config.relay is not None
    assert setup.config.relay.checkpoint_topic not in topics  # nothing written
    assert setup.config.relay.assignment_topic not in topics
    assert [len(read_partition(local_stack.bootstrap(DESTINATION), same, p)) for p in (0, 1)] == [
        2,
        2,
    ]


def test_a_loop_is_named_only_when_an_upstream_is_the_destinations_cluster():
    ids = {"east": "id-east", "east-alias": "id-west"}
    problem = loop_problem("west", "id-west", ids, ["orders"])
    assert problem is not None
    assert problem.startswith("relay.sources 'east-alias' and relay.destination 'west' are one")
    assert loop_problem("west", "id-west", {"east": "id-east"}, ["orders"]) is None


def test_records_deleted_at_the_source_before_the_relay_read_them_halt_naming_the_range(
    local_stack, relay_setup, caplog
):
    setup = relay_setup()
    bootstrap = local_stack.bootstrap(SOURCE)
    create_topic(bootstrap, setup.source, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(100):
        producer.produce(setup.source, value=b"v%d" % i, partition=0)
    producer.flush(30)
    assert relay_once(setup) == 0  # 0..99 relayed
    for i in range(100, 200):
        producer.produce(setup.source, value=b"v%d" % i, partition=0)
    producer.flush(30)
    admin = local_stack.admin(SOURCE)
    gone = TopicPartition(setup.source, 0, 150)  # DeleteRecords: the log starts at 150
    admin.delete_records([gone])[gone].result(timeout=30)

    assert relay_once(setup) == 1  # the partition halted instead of skipping 100..149
    message = f"no longer holds {setup.source} partition 0 offsets 100..149"
    assert any(message in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records if r.levelname == "ERROR"
    ]
    copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, 0)
    named = provenance.SourcePartition(SOURCE, setup.source, 0)
    assert [provenance.source_offset(list(r[5]), named) for r in copied] == list(range(100))


def test_a_restart_after_the_source_deleted_only_relayed_records_relays_on(
    local_stack, relay_setup
):
    setup = relay_setup()
    bootstrap = local_stack.bootstrap(SOURCE)
    create_topic(bootstrap, setup.source, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(200):
        producer.produce(setup.source, value=b"v%d" % i, partition=0)
        if i == 99:
            producer.flush(30)
            assert relay_once(setup) == 0  # 0..99 relayed
    producer.flush(30)
    admin = local_stack.admin(SOURCE)
    gone = TopicPartition(setup.source, 0, 100)  # every relayed record, nothing else
    admin.delete_records([gone])[gone].result(timeout=30)

    assert relay_once(setup) == 0
    copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, 0)
    named = provenance.SourcePartition(SOURCE, setup.source, 0)
    assert [provenance.source_offset(list(r[5]), named) for r in copied] == list(range(200))


def test_a_restart_into_a_log_append_time_destination_relays_on(local_stack, relay_setup):
    # The destination stamps records itself: the last relayed record's copy carries
    # another timestamp than the upstream's, and is still the same record.
    from confluent_kafka.admin import NewTopic

    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 1)
    topic = NewTopic(setup.destination, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin = local_stack.admin(DESTINATION)
    admin.create_topics([topic])[setup.destination].result(timeout=30)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(20):
        producer.produce(setup.source, value=b"v%d" % i, partition=0, timestamp=1_000 + i)
        if i == 9:
            producer.flush(30)
            assert relay_once(setup) == 0
    producer.flush(30)
    assert relay_once(setup) == 0, "the restart took its own copy for another record"
    named = provenance.SourcePartition(SOURCE, setup.source, 0)
    copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, 0)
    assert [provenance.source_offset(list(r[5]), named) for r in copied] == list(range(20))


def test_a_destination_deleted_and_created_again_is_relayed_again_whole(
    local_stack, relay_setup, caplog
):
    from tests.fixtures.relay import recreate_topic

    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    produce_every_shape(producer, setup.source, 2, 2, lambda _r, n: 1_700_000_000_000 + n)
    producer.flush(30)
    assert relay_once(setup) == 0
    recreate_topic(local_stack.bootstrap(DESTINATION), setup.destination, 2)
    assert relay_once(setup) == 0
    assert_relayed(local_stack, setup, 2)
    assert "not a resume point" in caplog.text


def test_records_larger_than_the_readers_read_ahead_are_relayed_whole(local_stack, relay_setup):
    """The reader fetches at most 16 MiB ahead (relay.worker.READ_QUEUE); a record larger
    than that is still fetched, alone, and relayed (the destination's producers buffer
    more than it, as an operator carrying such records sets them)."""
    setup = relay_setup()
    setup.path.write_text(
        setup.path.read_text()
        + f'\n[regions.{DESTINATION}.kafka.config]\n"queue.buffering.max.kbytes" = 65536\n'
    )
    setup = dataclasses.replace(setup, config=load_config(setup.path))
    large = 20 * 1024**2
    admin = AdminClient({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    topic = NewTopic(setup.source, 1, config={"max.message.bytes": str(large + 1024**2)})
    admin.create_topics([topic])[setup.source].result(timeout=30)
    producer = Producer(
        {"bootstrap.servers": local_stack.bootstrap(SOURCE), "message.max.bytes": large * 2}
    )
    for i, size in enumerate([10, large, 10, large, large, 10]):
        producer.produce(setup.source, key=b"%d" % i, value=bytes([i]) * size, partition=0)
        producer.flush(60)  # one record a batch: each large one is fetched on its own
    service = RelayService(setup.config, stop_at_end=True, handle_signals=False)
    outcome = run_until_it_ends(service, 120)  # a record never fetched: no end
    assert outcome == [0]
    assert_relayed(local_stack, setup, 1)
