"""The relay under what operators do: restarts before the first record, partitions added
while no relay ran, a transaction open at the start, a destination deleted and created
again under a running relay with merged partitions, an upstream that lacks the next offset
after a restart, and upstreams that differ once the destination holds no relayed record to
compare with. Each checked on real brokers, offset by offset with read_committed readers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from relay.errors import RelayIdentityError
from relay.service import RelayService
from relay.start_points import first_partition_counts, recorded_partitions
from replicator.core.kafka import provenance
from replicator.core.kafka.clients import await_leaders
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import UPSTREAM_B, create_topic, recreate_topic
from tests.fixtures.stack import DESTINATION, SOURCE


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def background(service: RelayService) -> threading.Thread:
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    return thread


def stop(service: RelayService, thread: threading.Thread) -> None:
    service.request_stop()
    thread.join(90)
    assert not thread.is_alive()


def high_watermark(bootstrap: str, topic: str) -> int:
    """Partition 0's high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def relay_once(setup) -> int:
    return RelayService(setup.config, stop_at_end=True, handle_signals=False).run()


def produce_values(
    bootstrap: str, topic: str, partition: int, values: list[bytes], _unique: object = None
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, key=value, value=value, partition=partition)
    assert producer.flush(30) == 0


def produce_in_a_transaction(
    bootstrap: str, topic: str, partition: int, values: list[bytes], unique: Callable[[str], str]
) -> None:
    """``values`` in one committed transaction: its marker follows the last of them."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, key=value, value=value, partition=partition)
    producer.commit_transaction(30)


def source_offsets_in(
    bootstrap: str, topic: str, partition: int, origin: str, source: str, source_partition: int
) -> list[int]:
    """The source offsets of ``source_partition`` that ``topic``'s ``partition`` holds, in
    its order (read_committed)."""
    named = provenance.SourcePartition(origin, source, source_partition)
    offsets = [
        provenance.source_offset(list(r[5]), named)
        for r in read_partition(bootstrap, topic, partition)
    ]
    return [o for o in offsets if o is not None]


def source_offsets(bootstrap: str, topic: str, partition: int) -> list[int]:
    return [r[0] for r in read_partition(bootstrap, topic, partition)]


def started(caplog, count: int) -> Callable[[], bool]:
    return lambda: sum("starting at offset" in r.getMessage() for r in caplog.records) >= count


# -- start_from = "latest" ------------------------------------------------------------------


def test_a_start_record_that_cannot_be_read_is_refused_naming_it():
    assert recorded_partitions(b'{"partitions": 4, "time": 1.5}', "here") == 4
    for raw in (b"[", b'{"partitions": "4"}', b'{"partitions": -1}', b"{}"):
        with pytest.raises(RelayIdentityError, match="relay record here"):
            recorded_partitions(raw, "here")


class RecordsBesideCheckpoints:
    """The two calls start records make of the checkpoint store, in memory."""

    topic = "checkpoints"

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}

    def latest(self, key: str) -> bytes | None:
        return self.records.get(key)

    def put(self, key: str, value: bytes) -> None:
        self.records[key] = value


def test_start_records_name_the_partitions_there_at_the_relay_s_first_start():
    store = RecordsBesideCheckpoints()
    first = first_partition_counts(store, "g", {"new": 4})  # type: ignore[arg-type]
    assert first == {"new": 4}
    # Recorded: later starts keep the first count, however the topic grew.
    assert first_partition_counts(store, "g", {"new": 6}) == {"new": 4}  # type: ignore[arg-type]
    # A relay that ran before start records existed: partitions up to the highest one
    # it wrote count as there from the start, those added since begin at their start.
    upgraded = first_partition_counts(
        store,  # type: ignore[arg-type]
        "g",
        {"old": 6},
        lambda topic, count: 3,
    )
    assert upgraded == {"old": 3}
    # ... and a topic new to a relay that ran before: today's count.
    added = first_partition_counts(store, "g", {"added": 5}, lambda t, c: 0)  # type: ignore[arg-type]
    assert added == {"added": 5}


def test_a_latest_start_is_kept_across_a_restart_before_the_first_record(
    local_stack, relay_setup, caplog
):
    setup = relay_setup(relay_options='start_from = "latest"')
    source = local_stack.bootstrap(SOURCE)
    create_topic(source, setup.source, 1)
    produce_values(source, setup.source, 0, [b"before %d" % i for i in range(100)])

    service = RelayService(setup.config, handle_signals=False)
    thread = background(service)
    wait_for(started(caplog, 1), "the relay to choose where it starts")
    stop(service, thread)  # before any record arrived

    produce_values(source, setup.source, 0, [b"meanwhile %d" % i for i in range(50)])
    assert relay_once(setup) == 0
    copied = source_offsets_in(
        local_stack.bootstrap(DESTINATION), setup.destination, 0, SOURCE, setup.source, 0
    )
    assert copied == list(range(100, 150)), (
        f"relayed source offsets {copied[:3]}..{copied[-3:] if copied else []} "
        f"({len(copied)}) where 100..149 were produced after the relay started at 100"
    )


def test_a_partition_added_between_runs_starts_at_its_beginning(local_stack, relay_setup):
    setup = relay_setup(relay_options='start_from = "latest"')
    source = local_stack.bootstrap(SOURCE)
    create_topic(source, setup.source, 2)
    for partition in range(2):
        produce_values(source, setup.source, partition, [b"old %d" % i for i in range(20)])
    assert relay_once(setup) == 0  # the first start: both partitions start at their end

    admin = AdminClient({"bootstrap.servers": source})
    admin.create_partitions([NewPartitions(setup.source, 3)])[setup.source].result(30)
    await_leaders(admin, setup.source, 3)
    for partition in range(3):
        produce_values(source, setup.source, partition, [b"new %d" % i for i in range(30)])

    assert relay_once(setup) == 0
    destination = local_stack.bootstrap(DESTINATION)
    for partition, expected in ((0, range(20, 50)), (1, range(20, 50)), (2, range(30))):
        copied = source_offsets_in(
            destination, setup.destination, partition, SOURCE, setup.source, partition
        )
        assert copied == list(expected), (
            f"partition {partition}: relayed source offsets {copied} where {list(expected)} "
            "belong (a partition added after the relay's first start starts at its beginning)"
        )


def test_a_transaction_open_at_a_latest_start_is_relayed_once_committed(
    local_stack, relay_setup, unique, caplog
):
    setup = relay_setup(relay_options='start_from = "latest"')
    source = local_stack.bootstrap(SOURCE)
    create_topic(source, setup.source, 1)
    produce_values(source, setup.source, 0, [b"before %d" % i for i in range(10)])
    open_one = Producer({"bootstrap.servers": source, "transactional.id": unique("tx")})
    open_one.init_transactions(30)
    open_one.begin_transaction()
    for i in range(10):
        open_one.produce(setup.source, value=b"in the transaction %d" % i, partition=0)
    assert open_one.flush(30) == 0

    service = RelayService(setup.config, handle_signals=False)
    thread = background(service)
    try:
        wait_for(started(caplog, 1), "the relay to choose where it starts")
        open_one.commit_transaction(30)
        produce_values(source, setup.source, 0, [b"after %d" % i for i in range(5)])
        committed = [o for o in source_offsets(source, setup.source, 0) if o >= 10]
        destination = local_stack.bootstrap(DESTINATION)

        def relayed() -> list[int]:
            return source_offsets_in(destination, setup.destination, 0, SOURCE, setup.source, 0)

        wait_for(lambda: len(relayed()) >= len(committed), "the committed records", 60)
        assert relayed() == committed
    finally:
        stop(service, thread)


# -- a destination deleted and created again -----------------------------------------------


def test_a_destination_created_again_under_a_running_relay_with_merged_partitions_is_refilled(
    local_stack, relay_setup
):
    """Source partitions 0 (busy) and 1 (idle after its first records) merge into
    destination partition 0; the destination is deleted and created again while the relay
    runs, and partition 0 refills the new topic past partition 1's old destination offset."""
    setup = relay_setup(topic_options="destination_partition = 0")
    source, destination = local_stack.bootstrap(SOURCE), local_stack.bootstrap(DESTINATION)
    create_topic(source, setup.source, 2)
    produce_values(source, setup.source, 1, [b"idle %d" % i for i in range(100)])
    produce_values(source, setup.source, 0, [b"busy %d" % i for i in range(300)])

    def held(partition: int) -> list[int]:
        try:
            return source_offsets_in(
                destination, setup.destination, 0, SOURCE, setup.source, partition
            )
        except Exception:  # the topic is being created again
            return []

    service = RelayService(setup.config, handle_signals=False)
    thread = background(service)
    try:
        wait_for(lambda: len(held(0)) == 300 and len(held(1)) == 100, "the first records")
        recreate_topic(destination, setup.destination, 1)
        produce_values(source, setup.source, 0, [b"busy again %d" % i for i in range(300)])
        wait_for(
            lambda: len(held(0)) >= 600 and len(held(1)) >= 100,
            "every record in the topic created again",
            120,
        )
        time.sleep(2)  # anything written twice would be there by now
    finally:
        stop(service, thread)
    assert held(0) == list(range(600)), "busy partition: offsets missing, twice or out of order"
    assert held(1) == list(range(100)), (
        f"idle partition: the new topic holds {len(held(1))} of its 100 records"
    )
    everything = read_partition(destination, setup.destination, 0)
    assert len(everything) == 700, f"{len(everything)} records where 700 belong"


# -- upstreams after a restart -------------------------------------------------------------


def test_an_upstream_lacking_the_next_offset_is_waited_for_not_taken_for_data_loss(
    local_stack, relay_setup, extra_broker
):
    """The last records relayed before the restart were filtered out: the real next
    offset (100) is past the last relayed record (89). The other upstream ends between
    the two (95): it is not chosen until it holds offset 99."""
    filters = (
        'filters = [{ plugin = "tests.fixtures.filter_plugins:drop_keys_ending", '
        'config = { suffix = "x" } }]'
    )
    setup = relay_setup(
        sources=(UPSTREAM_B, SOURCE),
        mode="failover",
        east_b=extra_broker.bootstrap,
        topic_options=filters,
    )
    b, a = extra_broker.bootstrap, local_stack.bootstrap(SOURCE)
    values = [b"r%d" % i + (b"x" if 90 <= i < 100 else b"") for i in range(110)]
    for bootstrap in (b, a):
        create_topic(bootstrap, setup.source, 1)
    produce_values(b, setup.source, 0, values[:100])
    produce_values(a, setup.source, 0, values[:95])
    assert relay_once(setup) == 0  # from b: 0..89 relayed, 90..99 dropped, next 100
    destination = local_stack.bootstrap(DESTINATION)

    def relayed() -> list[int]:
        return source_offsets_in(destination, setup.destination, 0, UPSTREAM_B, setup.source, 0)

    assert relayed() == list(range(90))

    extra_broker.kill()
    service = RelayService(setup.config, handle_signals=False)
    thread = background(service)
    try:
        time.sleep(5)  # a is healthy but lacks offset 99: the partition waits
        worker = next(iter(service.workers.workers.values()))
        assert worker.status.state != "halted", worker.status.reason
        produce_values(a, setup.source, 0, values[95:110])
        wait_for(lambda: len(relayed()) >= 100, "the records after the wait", 60)
        assert worker.status.state != "halted", worker.status.reason
    finally:
        stop(service, thread)
    assert relayed() == [*range(90), *range(100, 110)]


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_upstreams_that_differ_halt_even_when_the_destination_holds_no_relayed_record(
    local_stack, relay_setup, extra_broker, unique, transactional
):
    """The destination's records are deleted (retention, DeleteRecords): the record the
    relay wrote last cannot be compared, so the upstreams must agree on the newest record
    before the next offset before the relay reads from another one. Transactional, the
    offset before the next holds a commit marker, not a record."""
    setup = relay_setup(
        sources=(UPSTREAM_B, SOURCE),
        mode="failover",
        east_b=extra_broker.bootstrap,
        relay_options="lag_threshold = 10",
    )
    b, a = extra_broker.bootstrap, local_stack.bootstrap(SOURCE)
    for bootstrap in (b, a):
        create_topic(bootstrap, setup.source, 1)
    produce = produce_in_a_transaction if transactional else produce_values
    produce(b, setup.source, 0, [b"b %d" % i for i in range(20)], unique)
    assert relay_once(setup) == 0
    destination = local_stack.bootstrap(DESTINATION)
    admin = AdminClient({"bootstrap.servers": destination})
    end = 21 if transactional else 20
    # The relay's commit returned once its coordinator logged it; the marker reaches the
    # partition after that, and DeleteRecords beyond the high watermark is refused.
    wait_for(lambda: high_watermark(destination, setup.destination) >= end, "the marker", 30)
    for future in admin.delete_records([TopicPartition(setup.destination, 0, end)]).values():
        future.result(30)
    produce(a, setup.source, 0, [b"a %d" % i for i in range(20)], unique)
    # a holds other records, and far more of them: the relay leaves b for it (lag).
    produce_values(a, setup.source, 0, [b"a %d" % i for i in range(20, 200)])

    service = RelayService(setup.config, handle_signals=False)
    thread = background(service)
    try:
        worker = None

        def halted() -> bool:
            nonlocal worker
            worker = next(iter(service.workers.workers.values()), None)
            return worker is not None and worker.status.state == "halted"

        wait_for(halted, "the partition to halt over upstreams that differ", 60)
        assert worker is not None and "upstreams differ" in worker.status.reason
    finally:
        stop(service, thread)
    held = read_partition(destination, setup.destination, 0)
    assert held == [], f"{len(held)} records of an upstream that differs were relayed"
