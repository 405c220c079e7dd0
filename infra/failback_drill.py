"""The failback drill behind ``make failback-drill``, on a throw-away local stack.

us-east-1 is relayed into us-west-1 under load; the relay falls behind and us-east-1's
broker is killed with SIGKILL mid-stream, so it holds records us-west-1 never got;
``replicator failover --apply``; an application writes in us-west-1 and its consumer
group reads part of it; us-east-1 is started again on its data; ``replicator failback
--apply`` (its divergent-tail table is printed). Then plain read_committed consumers check,
per partition, that us-east-1 holds us-west-1's post-failover records exactly once and in
order after the failback point, that the tail's archive holds exactly the records
us-west-1 never got, and that the group resumes in us-east-1 at exactly the record it had
not read in us-west-1. Ends PASSED or FAILED (exit status 1).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.errors import DrillFailedError
from infra.freeze import freeze, thaw
from infra.local_config import local_regions, running_stack
from infra.stack import Stack, StackSpec
from replicator.core.config import Config
from replicator.core.kafka import provenance
from replicator.core.kafka.clients import retry_while_moving
from replicator.core.segments.store import SegmentStore
from replicator.failback import TAIL_SUFFIX

log = logging.getLogger(__name__)

SOURCE = "us-east-1"
DESTINATION = "us-west-1"
TOPIC = "failback.orders"
GROUP = "failback-app"
PARTITIONS = 2
POST_FAILOVER = 30
"""Records per partition the application writes in us-west-1 after the failover."""
READ = 12
"""Of those, how many per partition its group reads there before the failback."""

Row = tuple[int, bytes | None, list[tuple[str, bytes | None]]]
"""(offset, value, headers) of one record."""


def say(text: str) -> None:
    """The drill's report, on stdout."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def drill_config(token: str) -> str:
    return local_regions("failback", token=token) + (
        f"""
[relay]
sources = ["{SOURCE}"]
destination = "{DESTINATION}"
group_id = "failback-drill-relay"
health_check_interval = "300ms"
checkpoint_interval = "100ms"

[[relay.topics]]
source_topic = "{TOPIC}"
destination_topic = "{TOPIC}"
"""
    )


def read(bootstrap: str, partition: int) -> list[Row]:
    """Every committed record of one partition, as a plain consumer reads it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "failback-drill-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    rows: list[Row] = []
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)
        consumer.assign([TopicPartition(TOPIC, partition, low)])
        while True:
            message = consumer.poll(10)
            if message is None:
                raise DrillFailedError(f"{TOPIC} partition {partition}: timed out reading")
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return rows
                raise DrillFailedError(error.str())
            headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
            rows.append((int(message.offset() or 0), message.value(), headers))
    finally:
        consumer.close()


def ends(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failback-drill-reader"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
            for p in range(PARTITIONS)
        ]
    except KafkaException:
        return [0] * PARTITIONS
    finally:
        consumer.close()


class Load:
    """Records produced into us-east-1 until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self._bootstrap, "message.timeout.ms": 5000, "log_level": 0}
        )
        sequence = 0
        while not self._stop.is_set():
            value = f"east-{sequence}".encode()
            producer.produce(TOPIC, value=value, partition=sequence % PARTITIONS)
            producer.poll(0)
            sequence += 1
            time.sleep(0.01)
        producer.flush(6)


def replicator(config_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One ``replicator`` command, its output printed."""
    done = subprocess.run(
        [sys.executable, "-m", "replicator", *args, "--config", str(config_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    say(done.stdout)
    return done


def run(workdir: Path) -> None:
    config_path = workdir / "replicator.toml"
    state_dir = workdir / "state"
    with running_stack(config_path, drill_config(uuid.uuid4().hex[:6]), state_dir) as config:
        east = config.region(SOURCE).kafka.bootstrap_servers
        west = config.region(DESTINATION).kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": east})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(30)
        relay_log = (workdir / "relay.log").open("ab")
        relay = subprocess.Popen(
            [sys.executable, "-m", "replicator", "relay", "--config", str(config_path)],
            stdout=relay_log,
            stderr=subprocess.STDOUT,
        )
        load = Load(east)
        deadline = time.monotonic() + 120
        while min(ends(west)) < 50:
            if time.monotonic() > deadline:
                raise DrillFailedError("nothing relayed within 120 s (see relay.log)")
            time.sleep(0.3)
        say("relaying under load; the relay falls behind, then us-east-1 dies")
        freeze(relay.pid)
        time.sleep(1.0)
        stack = Stack(StackSpec.from_config(config, state_dir))
        east_pid = next(s.pid for s in stack.status() if s.service.name == f"kafka-{SOURCE}")
        assert east_pid is not None
        os.kill(east_pid, signal.SIGKILL)
        load.stop()
        thaw(relay.pid)
        relay.terminate()
        relay.wait(60)

        replicator(config_path, "failover", "--apply", "--group", GROUP)
        next_unread = application_in_west(west)
        stack.up()
        before = [read(east, p) for p in range(PARTITIONS)]
        done = replicator(config_path, "failback", "--apply", "--group", GROUP)
        if done.returncode != 0:
            raise DrillFailedError(f"failback exited {done.returncode}: {done.stderr[-2000:]}")
        check(config, east, west, before, next_unread)


def application_in_west(west: str) -> dict[int, bytes | None]:
    """The application writes in us-west-1 and its group reads :data:`READ` records of
    each partition there; the value of the next record it would read, per partition."""
    producer = Producer({"bootstrap.servers": west})
    for partition in range(PARTITIONS):
        for i in range(POST_FAILOVER):
            producer.produce(TOPIC, value=f"west-{partition}-{i}".encode(), partition=partition)
    producer.flush(30)
    offsets, next_unread = [], {}
    for partition in range(PARTITIONS):
        native = [r for r in read(west, partition) if not provenance.is_replicated(r[2])]
        offsets.append(TopicPartition(TOPIC, partition, native[READ][0]))
        next_unread[partition] = native[READ][1]
    consumer = Consumer({"bootstrap.servers": west, "group.id": GROUP})
    try:
        # A stack started a moment ago may still be loading its offsets topic.
        retry_while_moving(lambda: consumer.commit(offsets=offsets, asynchronous=False))
    finally:
        consumer.close()
    return next_unread


def check(
    config: Config,
    east: str,
    west: str,
    before: list[list[Row]],
    next_unread: dict[int, bytes | None],
) -> None:
    store = SegmentStore.for_region(config, SOURCE)
    archive = SOURCE + TAIL_SUFFIX
    consumer = Consumer({"bootstrap.servers": east, "group.id": GROUP})
    try:
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 10)
    finally:
        consumer.close()
    failures = []
    for partition in range(PARTITIONS):
        old = read(east, partition)
        new = read(west, partition)
        forward = provenance.SourcePartition(SOURCE, TOPIC, partition)
        got = [provenance.source_offset(r[2], forward) for r in new]
        replayed_until = max((o for o in got if o is not None), default=-1) + 1
        native = [r for r in new if not provenance.is_replicated(r[2])]
        tail = [r for r in before[partition] if r[0] >= replayed_until]
        segments = store.list_segments(archive, TOPIC, partition)
        archived: list[Any] = []
        for segment in segments:
            archived += store.read_segment(segment).column("value").to_pylist()
        by_offset = {r[0]: r for r in old}
        resumed = by_offset.get(committed[partition].offset)
        checks = {
            "the log before the failback point is unchanged": old[: len(before[partition])]
            == before[partition],
            "us-west-1's post-failover records follow, once each and in order": [
                r[1] for r in old[len(before[partition]) :]
            ]
            == [r[1] for r in native],
            "the archive holds exactly the records us-west-1 never got": bool(tail)
            and archived == [r[1] for r in tail],
            "the group resumes at the record it had not read in us-west-1": resumed is not None
            and resumed[1] == next_unread[partition],
        }
        for what, ok in checks.items():
            say(f"partition {partition}: {'ok    ' if ok else 'FAILED'} {what}")
            if not ok:
                failures.append(f"partition {partition}: {what}")
    if failures:
        raise DrillFailedError("; ".join(failures))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the stack's directory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    workdir = Path(tempfile.mkdtemp(prefix="failback-drill-"))
    try:
        run(workdir)
    except DrillFailedError as exc:
        say(f"FAILED: {exc} (logs: {workdir})")
        return 1
    say("PASSED")
    if not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
