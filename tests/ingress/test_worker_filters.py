"""Filters in ingress: dropped records advance the checkpoint; a raising filter halts its
partition with the plugin's name (in-memory writer and listing, no services)."""

from __future__ import annotations

import pyarrow as pa

from replicator.core.filters import FilterChain, NamedFilter
from replicator.core.kafka.testing import MemoryWriter
from tests.fixtures.worker import MemorySegments, config, run_worker


def even_offsets(table: pa.Table) -> list[bool]:
    return [o % 2 == 0 for o in table.column("offset").to_pylist()]


def test_dropped_records_are_not_written_and_the_checkpoint_passes_them():
    writer = MemoryWriter()
    chain = FilterChain([NamedFilter("tests:even_offsets", even_offsets)])
    worker = run_worker(config("fail"), MemorySegments([(0, 9), (10, 19)]), writer, chain)
    assert worker.status.state == "done"
    assert writer.committed == list(range(0, 20, 2))
    assert writer.checkpoints[-1] == 20
    assert worker.metrics.records_filtered.labels("us-east-1", "orders", "0")._value.get() == 10


def test_a_segment_whose_records_are_all_dropped_still_moves_the_partition_on():
    writer = MemoryWriter()
    chain = FilterChain([NamedFilter("tests:none", lambda t: [False] * t.num_rows)])
    worker = run_worker(config("fail"), MemorySegments([(0, 9), (10, 19)]), writer, chain)
    assert worker.status.state == "done"
    assert writer.committed == []
    assert writer.checkpoints[-1] == 20


def test_a_raising_filter_halts_the_partition_naming_the_plugin():
    def explode(table: pa.Table) -> list[bool]:
        if table.column("offset")[0].as_py() >= 10:
            raise ValueError("bad record")
        return [True] * table.num_rows

    writer = MemoryWriter()
    chain = FilterChain([NamedFilter("mypkg.filters:explode", explode)])
    worker = run_worker(config("fail"), MemorySegments([(0, 9), (10, 19)]), writer, chain)
    assert worker.status.state == "halted"
    assert "mypkg.filters:explode" in worker.status.reason
    assert "ValueError: bad record" in worker.status.reason
    assert writer.committed == list(range(10))  # nothing of the failing batch
    assert writer.halted == worker.status.reason
