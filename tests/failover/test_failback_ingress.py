"""Failback where the forward path was egress -> S3 -> ingress, on the real local stack:
the source region's broker is one of its own (killed with SIGKILL mid-stream, started
again on its data and port), its bucket the stack's source bucket (which the replication
stand-in copies into the destination's).

East's first records are exported, replicated and replayed into west; more are exported
but never replayed (the destination never got them, though the bucket did); more still
are produced while east's broker dies. ``failover --apply``; applications produce and
commit a group in west; east comes back; ``replicator failback --apply`` with the forward
(ingress) config. Then, per partition: the plan's divergent tail is exactly east's
records after the last one west's provenance names, the tail's archive holds exactly
those, east holds west's post-failover records exactly once and in order after the tail
(read_committed), and each group resumes in east at exactly the record it had not read in
west."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from egress.job import EgressJob
from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.kafka import provenance
from replicator.core.segments.store import SegmentStore
from replicator.failback import TAIL_SUFFIX, Tail, plan
from tests.fixtures.failback import Load, commit_group, committed_group, start_old_region
from tests.fixtures.independent import read_partition
from tests.fixtures.pipeline import pipeline_toml, wait_for_replication
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 2
REPLAYED = 25
"""Records per partition exported, replicated and replayed into west."""
EXPORTED_ONLY = 6
"""Records per partition exported (and replicated) after that, never replayed."""
POST_FAILOVER = 15
"""Records per partition the applications write in west after failover."""
APP_AT_EAST = 10
"""Records per partition group ``app`` read in east before the failover."""
APP_READ = 5
"""Post-failover records per partition group ``app`` read in west."""
SLOW_READ = 8
"""Records per partition group ``slow`` read in west (all replicated)."""

Record = tuple[Any, ...]
"""(offset, timestamp, timestamp type, key, value, headers), as ``read_partition`` gives."""


def _produce(bootstrap: str, topic: str, label: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(PARTITIONS):
        for i in range(count):
            value = f"{topic}-{label}-{partition}-{i}".encode()
            producer.produce(topic, value=value, key=b"k%d" % i, partition=partition)
    assert producer.flush(30) == 0


def _replicator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator", *args],
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,
        check=False,
    )


def _expected_tail(before: list[Record], west: list[Record], forward: Any) -> Tail:
    """East's records after the last one west's provenance names, as a :class:`Tail`."""
    named = [provenance.source_offset(list(r[5]), forward) for r in west]
    replayed_until = max(o for o in named if o is not None) + 1
    tail = [r for r in before if r[0] >= replayed_until]
    assert tail, f"{forward}: the scenario left no divergent tail"
    return Tail(replayed_until, len(tail), tail[0][0], tail[-1][0], tail[0][1], tail[-1][1])


def test_failback_of_an_ingress_replicated_topic(local_stack, unique, spark, tmp_path: Path):
    east = start_old_region(tmp_path / "east")
    west = local_stack.bootstrap(DESTINATION)
    topic, copy = unique("fb.orders"), unique("fb.orders.copy")
    app, slow = unique("app"), unique("slow")
    text = pipeline_toml(
        local_stack,
        unique,
        tmp_path,
        topic,
        copy,
        topic_limits="",
        egress=f'consumer_groups = ["{app}"]',
    )
    path = tmp_path / "forward.toml"
    path.write_text(text.replace(local_stack.bootstrap(SOURCE), east.bootstrap))
    config = load_config(path)
    try:
        create_topic(east.bootstrap, topic, PARTITIONS)
        _produce(east.bootstrap, topic, "replayed", REPLAYED)
        commit_group(east.bootstrap, app, topic, dict.fromkeys(range(PARTITIONS), APP_AT_EAST))
        EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
        wait_for_replication(local_stack, topic)
        assert IngressService(config, stop_at_end=True, handle_signals=False).run() == 0
        # Exported and replicated, never replayed: the tail starts before these.
        _produce(east.bootstrap, topic, "exported", EXPORTED_ONLY)
        EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
        wait_for_replication(local_stack, topic)
        # Applications go on writing into east; its broker dies mid-stream.
        load = Load(east.bootstrap, [topic], PARTITIONS)
        load.start()
        time.sleep(0.5)
        east.kill()
        load.stop()

        # `app` (exported with the segments) fails over; `slow` starts in west.
        failover = _replicator("failover", "--config", str(path), "--apply", "--group", app)
        assert failover.returncode == 0, failover.stdout + failover.stderr

        _produce(west, copy, "west", POST_FAILOVER)
        west_records = [read_partition(west, copy, p) for p in range(PARTITIONS)]
        app_at, slow_at = {}, {}
        for partition, records in enumerate(west_records):
            native = [r for r in records if not provenance.is_replicated(list(r[5]))]
            assert len(native) == POST_FAILOVER
            app_at[partition] = native[APP_READ][0]
            slow_at[partition] = records[SLOW_READ][0]
        commit_group(west, app, copy, app_at)
        commit_group(west, slow, copy, slow_at)

        east = start_old_region(tmp_path / "east", int(east.bootstrap.rpartition(":")[2]))
        before = [read_partition(east.bootstrap, topic, p) for p in range(PARTITIONS)]
        forwards = [provenance.SourcePartition(SOURCE, topic, p) for p in range(PARTITIONS)]
        expected = [
            _expected_tail(before[p], west_records[p], forwards[p]) for p in range(PARTITIONS)
        ]
        report = plan(config, path.read_text())
        assert (report.old_region, report.new_region) == (SOURCE, DESTINATION)
        assert not report.problems, report.problems
        assert not any(r.problem for r in report.partitions), report.partitions
        assert [r.tail for r in report.partitions] == expected

        done = _replicator(
            "failback", "--config", str(path), "--apply", "--group", app, "--group", slow
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "failback done" in done.stdout, done.stdout

        # Planned again after it: the same tails (the records written back are not).
        assert [r.tail for r in plan(config, path.read_text()).partitions] == expected

        store = SegmentStore.for_region(config, SOURCE)
        app_east = committed_group(east.bootstrap, app, topic, PARTITIONS)
        slow_east = committed_group(east.bootstrap, slow, topic, PARTITIONS)
        for partition in range(PARTITIONS):
            where = f"{topic} partition {partition}"
            east_records = read_partition(east.bootstrap, topic, partition)
            tail = [r for r in before[partition] if r[0] >= expected[partition].start]
            # The tail's archive: exactly the records west never got.
            segments = store.list_segments(SOURCE + TAIL_SUFFIX, topic, partition)
            assert len(segments) == 1, segments
            archived = store.read_segment(segments[0])
            assert archived.column("offset").to_pylist() == [r[0] for r in tail], where
            assert archived.column("value").to_pylist() == [r[4] for r in tail], where
            assert archived.column("key").to_pylist() == [r[3] for r in tail], where

            # East before the failback kept whole, then west's post-failover records,
            # once each and in order, named by their west offsets.
            assert east_records[: len(before[partition])] == before[partition], where
            back = east_records[len(before[partition]) :]
            native = [
                r for r in west_records[partition] if not provenance.is_replicated(list(r[5]))
            ]
            assert [r[4] for r in back] == [r[4] for r in native], where
            reversed_source = provenance.SourcePartition(DESTINATION, copy, partition)
            assert [provenance.source_offset(list(r[5]), reversed_source) for r in back] == [
                r[0] for r in native
            ], where

            # Each group resumes in east at the record it had not read in west: `app`
            # past the tail, `slow` (behind the failover) before it.
            at_west = {r[0]: r for r in west_records[partition]}
            at_east = {r[0]: r for r in east_records}
            assert at_east[app_east[partition]][4] == at_west[app_at[partition]][4], where
            assert at_east[slow_east[partition]][4] == at_west[slow_at[partition]][4], where
            assert app_east[partition] > tail[-1][0], where
            assert slow_east[partition] < expected[partition].start, where
    finally:
        east.kill()
