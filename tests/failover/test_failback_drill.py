"""The failback drill on the real local stack: an old region (a broker of its own)
relayed into the destination under load; the old region's broker killed with SIGKILL
mid-stream while the relay lags, so it holds records the destination never got;
``failover --apply``; applications produce and consume in the destination; the old
region started again; ``replicator failback --apply``. Then plain read_committed readers
check, per partition, that the old region holds the destination's post-failover records
exactly once and in order after the failback point, that the divergent tail's archive
holds exactly the records the destination never got (and restore plans it without a
gap), and that consumer groups resume in the old region at exactly the record they had
not read in the destination.

Two topics share the stack, the load and the outage: one failed back in one run, the
other's failback killed with SIGKILL in the middle of the reversed relay's first
transaction, run again, and run a third time (which changes nothing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from infra.freeze import freeze, thaw
from infra.ports import free_port
from replicator.config_check import check
from replicator.core.config import Config, load_config
from replicator.core.faults import WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT, marker
from replicator.core.kafka import provenance
from replicator.core.segments.store import SegmentStore
from replicator.failback import TAIL_SUFFIX
from replicator.failover import apply, collect
from restore.job import RestoreJob, RestoreRequest
from tests.fixtures.failback import (
    OLD,
    Load,
    commit_group,
    committed_group,
    drill_config,
    start_old_region,
)
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import RelaySetup, create_topic, start_relay
from tests.fixtures.stack import DESTINATION, SOURCE, LocalStack

PARTITIONS = 2
POST_FAILOVER = 30
"""Records per partition the applications write in the destination after failover."""
APP_READ = 12
"""Post-failover records per partition group ``app`` read in the destination."""
SLOW_READ = 10
"""Records per partition group ``slow`` read in the destination (all replicated)."""


def _failback(
    config: Path,
    log: Path,
    *groups: str,
    env: dict[str, str] | None = None,
    write_config: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "replicator", "failback", "--config", str(config), "--apply"]
    if write_config is not None:
        args += ["--write-config", str(write_config)]
    for group in groups:
        args += ["--group", group]
    done = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    log.write_text(done.stdout + done.stderr)
    return done


def _fail_over(path: Path, groups: list[str]) -> None:
    """``replicator failover --apply``, as the command does it."""
    config = load_config(path)
    apply(config, collect(config, groups))


def _ends(bootstrap: str, topic: str) -> list[int]:
    """Log ends of ``topic``'s partitions (0 while the topic is not there)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drill-ends"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            for p in range(PARTITIONS)
        ]
    except KafkaException:
        return [0] * PARTITIONS
    finally:
        consumer.close()


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_failback_drill(local_stack: LocalStack, unique, tmp_path: Path):
    west = local_stack.bootstrap(DESTINATION)
    old = start_old_region(tmp_path / "old")
    bucket = local_stack.new_bucket(unique("old-bucket"), SOURCE)
    topics = {name: (unique(f"{name}.old"), unique(f"{name}.new")) for name in ("once", "killed")}
    configs = {}
    for name, (topic, new_topic) in topics.items():
        create_topic(old.bootstrap, topic, PARTITIONS)
        configs[name] = drill_config(
            local_stack, unique, tmp_path / f"{name}.toml", old.bootstrap, bucket, topic, new_topic
        )
    app, slow = unique("app"), unique("slow")
    relays: list[subprocess.Popen] = []
    try:
        relays = [
            start_relay(
                RelaySetup(load_config(path), path, "", "", ""), tmp_path / f"relay-{n}.log"
            )
            for n, path in configs.items()
        ]
        load = Load(old.bootstrap, [t for t, _ in topics.values()], PARTITIONS)
        load.start()
        _wait_for(lambda: all(min(_ends(west, t)) >= 50 for _, t in topics.values()), "relayed")
        # The relays fall behind (a slow link), the load goes on: the old region gets a
        # tail the destination never does. Then its broker dies mid-stream.
        for relay in relays:
            freeze(relay.pid)
        time.sleep(1.0)
        old.kill()
        load.stop()
        # The relays run in the destination region and survive; the operator stops them
        # before failing over (what they hold is committed as they stop).
        for relay in relays:
            thaw(relay.pid)
            relay.terminate()
        for relay in relays:
            assert relay.wait(60) == 0

        # Failover: the destination takes over (the old region does not answer).
        with ThreadPoolExecutor(len(configs)) as pool:  # each waits for the dead region
            list(pool.map(lambda path: _fail_over(path, [app, slow]), configs.values()))
        # Applications write and read in the destination.
        producer = Producer({"bootstrap.servers": west})
        for _, new_topic in topics.values():
            for partition in range(PARTITIONS):
                for i in range(POST_FAILOVER):
                    value = f"{new_topic}-new-{partition}-{i}".encode()
                    producer.produce(new_topic, value=value, partition=partition)
        assert producer.flush(30) == 0
        app_at: dict[str, dict[int, int]] = {}
        slow_at: dict[str, dict[int, int]] = {}
        for name, (_topic, new_topic) in topics.items():
            app_at[name], slow_at[name] = {}, {}
            for partition in range(PARTITIONS):
                records = read_partition(west, new_topic, partition)
                native = [r for r in records if not provenance.is_replicated(list(r[5]))]
                assert len(native) == POST_FAILOVER
                app_at[name][partition] = native[APP_READ][0]
                slow_at[name][partition] = records[SLOW_READ][0]
            commit_group(west, app, new_topic, app_at[name])
            commit_group(west, slow, new_topic, slow_at[name])

        # The old region comes back, as it was when it died.
        old = start_old_region(tmp_path / "old", int(old.bootstrap.rpartition(":")[2]))
        before = {
            name: [read_partition(old.bootstrap, topic, p) for p in range(PARTITIONS)]
            for name, (topic, _) in topics.items()
        }

        done = _failback(configs["once"], tmp_path / "once.log", app, slow)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Divergent tail" in done.stdout and "failback done" in done.stdout, done.stdout

        crash_dir = tmp_path / "crash"
        killed = _failback(
            configs["killed"],
            tmp_path / "killed.log",
            app,
            slow,
            env={
                "REPLICATOR_CRASH_POINT": WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT,
                "REPLICATOR_CRASH_DIR": str(crash_dir),
            },
        )
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        assert marker(crash_dir, WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT) is not None
        assert committed_group(old.bootstrap, app, topics["killed"][0], PARTITIONS) == {
            p: -1001 for p in range(PARTITIONS)
        }  # killed before the groups: none moved
        again = _failback(configs["killed"], tmp_path / "again.log", app, slow)
        assert again.returncode == 0, again.stdout + again.stderr
        after_again = [read_partition(old.bootstrap, topics["killed"][0], p) for p in range(2)]
        reversed_path = tmp_path / "reversed.toml"
        third = _failback(
            configs["killed"], tmp_path / "third.log", app, slow, write_config=reversed_path
        )
        assert third.returncode == 0, third.stdout + third.stderr
        checked = check(reversed_path)  # what `replicator config check` runs
        assert checked.ok, checked.to_dict()
        reversed_relay = load_config(reversed_path).relay
        assert reversed_relay is not None
        assert (reversed_relay.sources, reversed_relay.destination) == ([DESTINATION], OLD)
        assert [
            read_partition(old.bootstrap, topics["killed"][0], p) for p in range(2)
        ] == after_again  # nothing written a second time

        for name, (topic, new_topic) in topics.items():
            drilled = Drilled(
                load_config(configs[name]),
                topic,
                new_topic,
                before[name],
                app_at[name],
                slow_at[name],
            )
            _check(drilled, old.bootstrap, west, app, slow)
    finally:
        for relay in relays:
            if relay.poll() is None:
                relay.kill()
        old.kill()


Record = tuple[Any, ...]
"""(offset, timestamp, timestamp type, key, value, headers), as ``read_partition`` gives."""


@dataclass
class Drilled:
    """One topic of the drill: its names, the old region's partitions as they came back,
    and where the groups were in the destination."""

    config: Config
    topic: str
    new_topic: str
    before: list[list[Record]]
    app_at: dict[int, int]
    slow_at: dict[int, int]


def _check(drilled: Drilled, old_bootstrap: str, west: str, app: str, slow: str) -> None:
    """Every partition of ``drilled`` after its failback (each read once per region)."""
    store = SegmentStore.for_region(drilled.config, OLD)
    archive = OLD + TAIL_SUFFIX
    request = RestoreRequest([drilled.topic], from_region=archive, into_region=OLD)
    plans = RestoreJob(drilled.config, request).plan()[0]
    app_old = committed_group(old_bootstrap, app, drilled.topic, PARTITIONS)
    slow_old = committed_group(old_bootstrap, slow, drilled.topic, PARTITIONS)
    for partition in range(PARTITIONS):
        where = f"{drilled.topic} partition {partition}"
        old_records = read_partition(old_bootstrap, drilled.topic, partition)
        west_records = read_partition(west, drilled.new_topic, partition)
        forward = provenance.SourcePartition(OLD, drilled.topic, partition)
        replicated = [provenance.source_offset(list(r[5]), forward) for r in west_records]
        replayed_until = max(o for o in replicated if o is not None) + 1
        post_failover = [r for r in west_records if not provenance.is_replicated(list(r[5]))]
        before = drilled.before[partition]

        # The old log before the failback is kept whole; what follows is exactly the
        # destination's post-failover records, once each and in order.
        assert old_records[: len(before)] == before, where
        back = old_records[len(before) :]
        assert [r[4] for r in back] == [r[4] for r in post_failover], where
        reversed_source = provenance.SourcePartition(DESTINATION, drilled.new_topic, partition)
        assert [provenance.source_offset(list(r[5]), reversed_source) for r in back] == [
            r[0] for r in post_failover
        ], where

        # The tail's archive: exactly the old records the destination never got.
        tail = [r for r in before if r[0] >= replayed_until]
        west_values = {r[4] for r in west_records}
        assert tail, f"{where}: the drill left no divergent tail"
        assert [r[4] for r in tail] == [r[4] for r in before if r[4] not in west_values], where
        segments = store.list_segments(archive, drilled.topic, partition)
        assert len(segments) == 1, segments
        table = store.read_segment(segments[0])
        assert table.column("offset").to_pylist() == [r[0] for r in tail], where
        assert table.column("value").to_pylist() == [r[4] for r in tail], where
        plan = plans.plans[partition]
        assert (plan.start, plan.end, plan.gap) == (replayed_until, tail[-1][0] + 1, None)

        # Each group's first record in the old region is the one it had not read in the
        # destination: ``app`` past the tail, ``slow`` (behind the failover) before it.
        at_west = {r[0]: r for r in west_records}
        at_old = {r[0]: r for r in old_records}
        for group, west_at, old_at in (
            (app, drilled.app_at, app_old),
            (slow, drilled.slow_at, slow_old),
        ):
            resumed = at_old[old_at[partition]]
            assert resumed[4] == at_west[west_at[partition]][4], (group, where, old_at, west_at)
        assert app_old[partition] > tail[-1][0] and slow_old[partition] < replayed_until


def test_relay_failover_with_its_upstream_down_reports_the_groups_untranslated(
    local_stack: LocalStack, unique, tmp_path: Path
):
    """``failover`` of a relay whose upstream is down (when failover runs) asked the dead
    upstream for group offsets anyway, and the admin call's own timeout escaped as a bare
    TimeoutError after 30 s: no report at all."""
    closed = f"127.0.0.1:{free_port()}"
    path = drill_config(
        local_stack, unique, tmp_path / "down.toml", closed, unique("b"), "t", "t.new"
    )
    config = load_config(path)
    relay = config.relay
    assert relay is not None
    # It relayed before: its checkpoint topic is there.
    create_topic(local_stack.bootstrap(DESTINATION), relay.checkpoint_topic, 8)
    started = time.monotonic()
    report = collect(config, [unique("app")])
    assert time.monotonic() - started < 20
    assert not report.ready
    assert any("consumer groups not translated" in what for what in report.unreachable), (
        report.unreachable
    )
