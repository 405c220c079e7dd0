"""A partition that halts in the middle of a transaction records only what was committed:
after the operator fixes the cause and restarts, the relay resumes at the first record
never committed, so every source record reaches the destination exactly once.

The relay worker runs against the local stack's source broker and writes into the
in-memory writer, which keeps the writer contract (records visible only at a commit, an
abort drops them, ``open`` resumes at the furthest of the committed records and the last
checkpoint, as the real writer does)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from relay import worker as relay_worker
from relay.failover import UpstreamState
from relay.metrics import RelayMetrics
from relay.worker import RelayWorker
from replicator.core.filters import FilterChain, NamedFilter
from replicator.core.kafka import arrow_reads
from replicator.core.kafka.testing import MemoryWriter
from tests.fixtures.raw_produce import produce_raw, record_batch
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION, SOURCE

RECORDS = 6_000
BATCH = 200
BREAKS_AT = 3_000
"""The filter raises on the read holding this offset: far from any commit."""


def _keep_all(records: pa.Table) -> list[bool]:
    return [True] * records.num_rows


def _broken_at(offset: int) -> Any:
    def decide(records: pa.Table) -> list[bool]:
        offsets = records.column("offset").to_pylist()
        if offsets[0] <= offset <= offsets[-1]:
            raise RuntimeError(f"cannot decide offset {offset}")
        return [True] * records.num_rows

    return decide


def _run(setup: Any, writer: MemoryWriter, decide: Any, stop_at: int = RECORDS) -> RelayWorker:
    relay = setup.config.relay
    worker = RelayWorker(
        setup.config,
        relay.topics[0],
        0,
        RelayMetrics(),
        lambda: {SOURCE: UpstreamState(True)},
        open_writer=lambda _target: writer,
        filters=FilterChain([NamedFilter("tests:filter", decide)]),
        stop_at=stop_at,
    )
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), f"the worker did not end: {worker.status}"
    return worker


def test_a_halt_mid_transaction_records_only_what_was_committed(
    local_stack, relay_setup, monkeypatch: pytest.MonkeyPatch
):
    # Full reads of BATCH records and a transaction that stays open for an hour: the
    # open transaction holds thousands of records when the filter breaks.
    monkeypatch.setattr(relay_worker, "READ_BATCH", BATCH)
    setup = relay_setup(relay_options='checkpoint_interval = "1h"')
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 1)
    # The worker looks for the last record it relayed in the destination (the in-memory
    # writer holds none there; it must be able to look).
    create_topic(local_stack.bootstrap(DESTINATION), setup.destination, 1)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE), "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(setup.source, value=b"v%d" % i, partition=0)
    producer.flush(30)

    writer = MemoryWriter()
    halted = _run(setup, writer, _broken_at(BREAKS_AT))
    assert halted.status.state == "halted", halted.status
    assert "cannot decide offset 3000" in writer.halted
    assert writer.checkpoints[-1] <= BREAKS_AT, (
        f"the halt recorded next source offset {writer.checkpoints[-1]}, but only "
        f"{len(writer.committed)} records were committed"
    )
    assert writer.checkpoints[-1] == len(writer.committed)

    fixed = _run(setup, writer, _keep_all)  # the operator fixed the filter
    assert fixed.status.state == "done", fixed.status
    assert writer.committed == list(range(RECORDS)), (
        f"{len(writer.committed)} records committed, "
        f"{len(set(range(RECORDS)) - set(writer.committed))} source offsets missing"
    )


@pytest.mark.parametrize("reader", ["C", "confluent-kafka"])
def test_a_source_record_with_a_header_name_that_is_not_utf8_halts_its_partition_there(
    local_stack, relay_setup, monkeypatch: pytest.MonkeyPatch, reader: str
):
    """Forged input: a header name that is not UTF-8 (Kafka's protocol makes header names
    strings; no client library writes one). The relay commits every record before it,
    halts the partition at it with an error naming the topic, partition, offset and
    upstream, and relays nothing after it — whichever reader it has."""
    if reader != "C":
        monkeypatch.setattr(arrow_reads, "lib", None)
    setup = relay_setup()
    create_topic(local_stack.bootstrap(SOURCE), setup.source, 1)
    create_topic(local_stack.bootstrap(DESTINATION), setup.destination, 1)
    bootstrap = local_stack.bootstrap(SOURCE)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):  # offsets 0-2
        producer.produce(setup.source, value=b"v%d" % i, partition=0)
    producer.flush(30)
    assert (
        produce_raw(bootstrap, setup.source, 0, record_batch(b"bad", [(b"\xff\xfe", b"x")])) == 0
    )  # offset 3
    producer.produce(setup.source, value=b"after", partition=0)  # offset 4
    producer.flush(30)

    writer = MemoryWriter()
    halted = _run(setup, writer, _keep_all, stop_at=5)
    assert halted.status.state == "halted", halted.status
    assert writer.committed == [0, 1, 2]
    assert writer.checkpoints[-1] == 3
    assert writer.halted == (
        f"{setup.source} partition 0 offset 3 on {SOURCE} cannot be relayed: a header name "
        "is not UTF-8; nothing more is relayed from this partition"
    )
