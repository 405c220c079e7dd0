"""Ingress throughput next to one plain confluent-kafka producer sending the same records
from memory, in the same run.

Usage: python -m bench.ingress_throughput [--records N] [--partitions P]
Starts its own local stack on free ports; prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.local_stack import bench_stack
from bench.memory import PeakRss
from bench.workload import VALUE_BYTES
from replicator.core.logs import configure_logging
from replicator.core.segments.format import SCHEMA
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore

CONFIG = """
[ingress]
region = "us-west-1"
segment_events_partitions = 8
[[ingress.sources]]
region = "us-east-1"
topic = "bench"
destination_topic = "bench.copy"
first_segment_delay = "0s"
"""
SEGMENT_RECORDS = 250_000


def random_values(count: int, size: int = VALUE_BYTES) -> pa.Array:
    """``count`` distinct random values, so that segments are as large as real payloads
    make them (one repeated value would compress to almost nothing)."""
    offsets = pa.array(range(0, (count + 1) * size, size), pa.int32()).buffers()[1]
    return pa.Array.from_buffers(
        pa.binary(), count, [None, offsets, pa.py_buffer(os.urandom(count * size))]
    )


def workload(start: int, count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "offset": list(range(start, start + count)),
            "timestamp": [1_700_000_000_000 + i for i in range(start, start + count)],
            "timestamp_type": [1] * count,
            "key": [b"%016d" % i for i in range(start, start + count)],
            "value": random_values(count),
            "headers": [
                [{"key": "seq", "value": b"%08d" % i}] for i in range(start, start + count)
            ],
        },
        schema=SCHEMA,
    )


def plain_produce(
    bootstrap: str, topic: str, partitions: int, batches: list[tuple[int, pa.RecordBatch]]
) -> tuple[int, float]:
    """Send the same records from memory with one plain producer: (records, seconds)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=30)
    rows = [
        (
            p,
            b.column("key").to_pylist(),
            b.column("value").to_pylist(),
            b.column("headers").to_pylist(),
            b.column("timestamp").cast(pa.int64()).to_pylist(),
        )
        for p, b in batches
    ]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "enable.idempotence": True,
        }
    )
    count = 0
    started = time.perf_counter()
    for partition, keys, values, headers, stamps in rows:
        for key, value, header, stamp in zip(keys, values, headers, stamps, strict=True):
            while True:
                try:
                    producer.produce(
                        topic,
                        key=key,
                        value=value,
                        partition=partition,
                        headers=[(h["key"], h["value"]) for h in header],
                        timestamp=stamp,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
    producer.flush(120)
    return count, time.perf_counter() - started


def measure(records: int, partitions: int) -> dict[str, float]:
    with bench_stack(CONFIG, "ingress") as (config, root):
        store = SegmentStore.for_region(config, "us-west-1")
        per_partition = records // partitions
        batches = []
        segment_bytes = 0
        for partition in range(partitions):
            for start in range(0, per_partition, SEGMENT_RECORDS):
                count = min(SEGMENT_RECORDS, per_partition - start)
                batch = workload(start, count)
                stored = store.write_segment(
                    SegmentKey("us-east-1", "bench", partition, 0, start, start + count - 1), batch
                )
                segment_bytes = max(segment_bytes, stored.size)
                batches.append((partition, batch))
        store.put_json(
            topic_descriptor_s3_key("data", "us-east-1", "bench"),
            {"partitions": partitions, "configs": {}},
        )
        bootstrap = config.region("us-west-1").kafka.bootstrap_servers
        base_records, base_seconds = plain_produce(bootstrap, "bench.baseline", partitions, batches)
        del batches
        # A process of its own, as operators run it, so that its peak RSS is its own.
        command = [sys.executable, "-m", "replicator", "--log-level", "WARNING", "ingress"]
        command += ["--config", str(root / "bench.toml"), "--stop-at-end"]
        with PeakRss(lambda line: "replicator" in line and " ingress " in line) as memory:
            started = time.perf_counter()
            subprocess.run(command, check=True, timeout=1800)
            ingress_seconds = time.perf_counter() - started
    peak, _ = memory.largest()
    return {
        "records": base_records,
        "baseline_records_per_s": base_records / base_seconds,
        "ingress_records_per_s": base_records / ingress_seconds,
        "ingress_seconds": ingress_seconds,
        "ratio_records_per_s": base_seconds / ingress_seconds,
        "ingress_peak_rss_mib": peak / 2**20,
        "segment_mib": segment_bytes / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.records, args.partitions), indent=2))


if __name__ == "__main__":
    main()
