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
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.local_stack import bench_stack
from bench.workload import KEY_BYTES, VALUE_BYTES
from infra.drill import STARTED_LINE, DestinationTail, Service
from infra.drill_report import percentile
from replicator.core.logs import configure_logging

CONFIG = """
[egress]
region = "us-east-1"
checkpoint_location = "{root}/checkpoint"
state_dir = "{root}/state"
trigger_interval = "500ms"
[egress.topics.bench]
max_segment_age = "2s"

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


def _produce(producer: Producer, count: int, start: int, value: bytes) -> None:
    for i in range(start, start + count):
        producer.produce(
            "bench",
            key=b"%0*d" % (KEY_BYTES, i),
            value=value,
            partition=i % PARTITIONS,
            headers=[("seq", b"%08d" % i)],
        )


def steady_load(bootstrap: str, tail: DestinationTail, rate: int, seconds: float) -> None:
    """Warm up with one record per partition through to ``tail``, then send ``rate``
    records/s to topic ``bench`` for ``seconds`` and wait until ``tail`` has them all.
    Only the records after the warm-up are timed."""
    deadline = time.monotonic() + 180
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = os.urandom(VALUE_BYTES)
    # Warm-up: the measurement starts with every worker of the pipeline running.
    tail.start()
    _produce(producer, PARTITIONS, 0, value)
    producer.flush(30)
    while tail.replayed() < PARTITIONS:
        assert time.monotonic() < deadline, "warm-up records did not arrive"
        time.sleep(0.2)
    tail.lags["bench"].clear()
    sent = PARTITIONS
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate) + PARTITIONS
        if due > sent:
            _produce(producer, due - sent, sent, value)
            sent = due
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(30)
    # The local broker hides a partition's last batch until more data arrives.
    _produce(producer, PARTITIONS, sent, value)
    producer.flush(30)
    sent += PARTITIONS
    deadline = time.monotonic() + 120
    while tail.replayed() < sent:
        assert time.monotonic() < deadline, f"{sent - tail.replayed()} records missing"
        time.sleep(0.2)


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


def measure(rate: int, seconds: float) -> dict[str, float]:
    with bench_stack(CONFIG, "latency") as (config, root):
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
        try:
            egress.wait_for_log(STARTED_LINE, timeout=180.0)
            steady_load(east, tail, rate, seconds)
        finally:
            tail.close()
            egress.stop()
            ingress.stop()
    return lag_figures(tail.lags["bench"], rate, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.rate, args.seconds), indent=2))


if __name__ == "__main__":
    main()
