"""End-to-end latency with everything streaming: source timestamp to readable in the
destination, with ``max_segment_age = 2s`` and a steady 2,000 records/s.

Usage: python -m bench.latency [--rate R] [--seconds S]
Starts its own local stack on free ports, egress and ingress as the operator runs them
(``replicator egress|ingress`` processes), and a read_committed consumer on the
destination topic that notes when each record becomes readable.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.cpu_hog import cpu_hog
from bench.local_stack import bench_stack
from bench.profiles import profiled
from bench.workload import KEY_BYTES, VALUE_BYTES
from infra.drill import STARTED_LINE, DestinationTail, Service
from infra.drill_report import percentile
from ingress.segment_events import CREATED, SegmentEvent
from replicator.core.kafka import provenance
from replicator.core.kafka.clients import consume_available
from replicator.core.logs import configure_logging
from replicator.core.segments.key import SegmentKey

CONFIG = """
[egress]
region = "us-east-1"
checkpoint_location = "{root}/checkpoint"
state_dir = "{root}/state"
trigger_interval = "500ms"
[egress.topics.bench]
max_segment_age = "{segment_age}s"

[ingress]
region = "us-west-1"
segment_events_partitions = 8
relist_interval = "5s"
[[ingress.sources]]
region = "us-east-1"
topic = "bench"
destination_topic = "bench.copy"
first_segment_delay = "0s"
"""
PARTITIONS = 8
SEGMENT_AGE_SECONDS = 2
"""``max_segment_age`` of the measured topic: the end-to-end target is this plus 1 s."""
WARM_SECONDS = 30.0
"""The untimed load before the timed one (see :func:`steady_load`)."""
HOG_MARGIN_SECONDS = 300.0
"""How long a CPU hog may spin beyond the steady load (warm-up and draining included),
should nothing stop it before."""


def _produce(producer: Producer, count: int, start: int, value: bytes) -> None:
    for i in range(start, start + count):
        producer.produce(
            "bench",
            key=b"%0*d" % (KEY_BYTES, i),
            value=value,
            partition=i % PARTITIONS,
            headers=[("seq", b"%08d" % i)],
        )


def steady_load(
    bootstrap: str,
    tail: DestinationTail,
    rate: int,
    seconds: float,
    warm_seconds: float = WARM_SECONDS,
) -> float:
    """Send ``rate`` records/s to topic ``bench`` for ``warm_seconds`` (untimed), then for
    ``seconds`` (timed), each time until ``tail`` has them all; returns when (wall clock)
    the timed load began.

    Why the untimed load first: the local brokers are started for the benchmark, and for
    their first half minute their JIT compiler takes much of a core (measured: the
    source broker's C2 thread at 0.7 cores 40 s after its start, on this 2-core machine);
    the relay's p99 over the first 30 s at 2,000 records/s was 2.3 s, and 0.71 s over the
    next 30 s. An operator's brokers have run for months. It also lets every worker of
    the pipeline start (one record per partition first) before anything is timed."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = os.urandom(VALUE_BYTES)
    tail.start()
    _produce(producer, PARTITIONS, 0, value)
    producer.flush(30)
    _await(tail, PARTITIONS, 180)
    sent = _send_at_rate(producer, value, rate, warm_seconds, PARTITIONS)
    _await(tail, sent, 120)
    tail.lags["bench"].clear()
    began = time.time()
    sent = _send_at_rate(producer, value, rate, seconds, sent)
    _await(tail, sent, 120)
    return began


def _send_at_rate(producer: Producer, value: bytes, rate: int, seconds: float, sent: int) -> int:
    """Records ``sent`` on, ``rate`` a second for ``seconds``; returns the new count."""
    started = time.monotonic()
    first = sent
    while (elapsed := time.monotonic() - started) < seconds:
        due = first + int(elapsed * rate)
        if due > sent:
            _produce(producer, due - sent, sent, value)
            sent = due
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(30)
    return sent


def _await(tail: DestinationTail, count: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while tail.replayed() < count:
        assert time.monotonic() < deadline, f"{count - tail.replayed()} records missing"
        time.sleep(0.2)


class ReadableTimes:
    """A second read_committed reader of the destination: when each segment's last record
    became readable (the tail above times records, this one segments)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.readable: dict[tuple[int, int], float] = {}
        """(partition, source offset) -> when it became readable."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self, bootstrap: str, topic: str) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "latency-segments",
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            # Assigned, not subscribed: a group join takes seconds, and records committed
            # before it ended would be timed at its end (measured: the first segments
            # after the warm-up readable 2.5-2.8 s after their commit).
            while not consumer.list_topics(topic, timeout=5).topics[topic].partitions:
                if self._stop.wait(0.5):
                    return
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
            while not self._stop.is_set():
                for message in consume_available(consumer, 1000, 0.2):
                    if message.error():
                        continue
                    partition = int(message.partition() or 0)
                    source = provenance.SourcePartition("us-east-1", "bench", partition)
                    headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
                    offset = provenance.source_offset(headers, source)
                    if offset is not None:
                        self.readable[(partition, offset)] = time.time()
        finally:
            consumer.close()


@dataclass(frozen=True)
class Batch:
    planned: float
    """When Spark planned it (its ranges closed then): ``batchTimestampMs``."""
    committed: float
    """When Spark's commit log had it (its segments were uploaded before)."""
    ends: dict[int, int]
    """Per partition, the half-open end of its range."""


def egress_batches(checkpoint: Path) -> list[Batch]:
    """The micro-batches Spark's checkpoint records, in order."""
    batches = []
    logged = [p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()]
    for path in sorted(logged, key=lambda p: int(p.name)):
        committed = checkpoint / "commits" / path.name
        if not committed.exists():
            continue
        lines = path.read_text().splitlines()
        metadata, offsets = json.loads(lines[1]), json.loads(lines[2])
        batches.append(
            Batch(
                metadata["batchTimestampMs"] / 1000,
                committed.stat().st_mtime,
                {int(p): end for p, end in offsets["offsets"]["bench"].items()},
            )
        )
    return batches


def stage_times(
    checkpoint: Path,
    readable: dict[tuple[int, int], float],
    events: dict[str, tuple[SegmentEvent, float]],
    since: float = 0.0,
) -> dict[str, list[float]]:
    """Per segment, the seconds of each stage after its range closed: the micro-batch
    (planned to committed in Spark's log, the upload included), to its copy in the
    destination bucket (the S3 event's time), to its segment event in the events topic,
    to its last record readable in the destination; all of them together; and at most
    those the product runs (all but the copy, which S3 replication makes on AWS and a
    local stand-in here; counted from Spark's commit, which the copy may precede). The
    warm-up's segments (offset 0, one per partition, while the workers start, and those
    of batches planned before ``since``, the timed load's start) are left out."""
    batches = egress_batches(checkpoint)
    stages: dict[str, list[float]] = {
        "batch": [],
        "to_destination_bucket": [],
        "notification": [],
        "replay": [],
        "total": [],
        "product": [],
    }
    for s3_key, (event, produced) in events.items():
        segment = SegmentKey.from_s3_key(s3_key, "data")
        batch = next((b for b in batches if b.ends.get(segment.partition, 0) > segment.end), None)
        done = readable.get((segment.partition, segment.end))
        if batch is None or done is None or segment.start == 0 or batch.planned < since:
            continue
        copied = datetime.fromisoformat(event.event_time.replace("Z", "+00:00")).timestamp()
        stages["batch"].append(batch.committed - batch.planned)
        stages["to_destination_bucket"].append(copied - batch.committed)
        stages["notification"].append(produced - copied)
        stages["replay"].append(done - produced)
        stages["total"].append(done - batch.planned)
        # The copy may start before Spark's commit (segments are uploaded before it):
        # then it hid inside the batch and nothing is taken off. An upper bound.
        stages["product"].append(done - batch.planned - max(0.0, copied - batch.committed))
    return stages


def event_times(bootstrap: str, topic: str) -> dict[str, tuple[SegmentEvent, float]]:
    """Each segment event by S3 object key, and when the SQS bridge produced it."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "latency-events", "enable.partition.eof": True}
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    found: dict[str, tuple[SegmentEvent, float]] = {}
    ended = 0
    while ended < len(partitions):
        message = consumer.poll(10)
        if message is None:
            break
        error = message.error()
        if error is not None:
            ended += error.code() == KafkaError._PARTITION_EOF
            continue
        event = SegmentEvent.from_json(message.value())
        if event.kind == CREATED:
            found[event.s3_key] = (event, message.timestamp()[1] / 1000)
    consumer.close()
    return found


def lag_figures(lags: list[float], rate: int, seconds: float) -> dict[str, float]:
    return {
        "rate_records_per_s": rate,
        "seconds": seconds,
        "records_timed": len(lags),
        "p50_seconds": percentile(lags, 50) or 0.0,
        "p90_seconds": percentile(lags, 90) or 0.0,
        "p99_seconds": percentile(lags, 99) or 0.0,
        "max_seconds": max(lags, default=0.0),
    }


@contextmanager
def loaded(hog: bool, seconds: float) -> Iterator[dict[str, Any]]:
    """With ``hog``, a CPU hog spinning on one core while the block runs, bounded to
    ``seconds`` and a margin; yields what to report of it (nothing without)."""
    if not hog:
        yield {}
        return
    with cpu_hog(seconds + HOG_MARGIN_SECONDS) as running:
        yield {"cpu_hog": {"cpu": running.cpu, "pinned": running.cpu is not None}}


def measure(rate: int, seconds: float, hog: bool = False) -> dict[str, Any]:
    """End-to-end latency at ``rate`` records/s for ``seconds``; with ``hog``, while a
    CPU hog spins on one core from before the load starts to after its last record is
    read."""
    sections = CONFIG.replace("{segment_age}", str(SEGMENT_AGE_SECONDS))
    with bench_stack(sections, "latency") as (config, root):
        path = str(root / "bench.toml")
        east = config.region("us-east-1").kafka.bootstrap_servers
        west = config.region("us-west-1").kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": east})
        admin.create_topics([NewTopic("bench", PARTITIONS)])["bench"].result(timeout=30)
        (root / "logs").mkdir()
        egress = Service("egress", ["egress", "--config", path], root / "logs" / "egress.log")
        ingress = Service("ingress", ["ingress", "--config", path], root / "logs" / "ingress.log")
        egress.start()
        ingress.start()
        tail = DestinationTail(west, {"bench": "bench.copy"}, PARTITIONS)
        readable = ReadableTimes(west, "bench.copy")
        readable.start()
        try:
            egress.wait_for_log(STARTED_LINE, timeout=180.0)
            with loaded(hog, seconds) as hogged, profiled("latency"):
                began = steady_load(east, tail, rate, seconds)
        finally:
            tail.close()
            readable.close()
            egress.stop()
            ingress.stop()
        assert config.ingress is not None
        events = event_times(west, config.ingress.segment_events_topic)
        stages = stage_times(root / "checkpoint", readable.readable, events, since=began)
    figures: dict[str, Any] = dict(lag_figures(tail.lags["bench"], rate, seconds))
    figures["after_close"] = {
        stage: {"p50_seconds": percentile(times, 50), "p99_seconds": percentile(times, 99)}
        for stage, times in stages.items()
    }
    figures["segments_timed"] = len(stages["replay"])
    figures["max_segment_age_seconds"] = SEGMENT_AGE_SECONDS
    return figures | hogged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.rate, args.seconds), indent=2))


if __name__ == "__main__":
    main()
