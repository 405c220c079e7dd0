"""Ingress throughput next to one plain confluent-kafka producer sending the same records
from memory, in the same run: with one replay process, and with one per core (the
default), each into a destination of its own.

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
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.aws_requests import count, counting, priced
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


def measure(records: int, partitions: int) -> dict[str, Any]:
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
        one = replay(root, 1)
        cores = len(os.sched_getaffinity(0))
        every_core = replay(root, cores) if cores > 1 else one
    return {
        "records": base_records,
        "baseline_records_per_s": base_records / base_seconds,
        "ingress_processes": cores,
        "ingress_records_per_s": base_records / every_core["seconds"],
        "ingress_seconds": every_core["seconds"],
        "ratio_records_per_s": base_seconds / every_core["seconds"],
        "ingress_peak_rss_mib": every_core["peak_rss_mib"],
        "ingress_parent_rss_mib": every_core["parent_rss_mib"],
        "ingress_records_per_s_after_join": base_records / every_core["seconds_after_join"],
        "one_process_records_per_s": base_records / one["seconds"],
        "one_process_records_per_s_after_join": base_records / one["seconds_after_join"],
        "one_process_peak_rss_mib": one["peak_rss_mib"],
        "segment_mib": segment_bytes / 2**20,
        "aws": priced(every_core["requests"], base_records),
        "segment_limits": f"{SEGMENT_RECORDS:,} records a segment",
    }


def is_ingress(command: str) -> bool:
    """The ingress command, or one of its replay processes (started by multiprocessing)."""
    return ("replicator" in command and " ingress " in command) or "spawn_main" in command


def replay(root: Path, processes: int) -> dict[str, Any]:
    """Replay every segment with ``processes`` replay processes into a destination topic
    of its own, as a process of its own (as operators run it, so that the peak RSS of
    each process is its own)."""
    text = (root / "bench.toml").read_text()
    text = text.replace(
        'destination_topic = "bench.copy"', f'destination_topic = "bench.copy.{processes}"'
    )
    text = text.replace(
        "[ingress]\n",
        f'[ingress]\nprocesses = {processes}\ngroup_id = "bench-ingress-{processes}"\n'
        f'checkpoint_topic = "bench.checkpoints.{processes}"\n'
        f'segment_events_topic = "bench.segmentevents.{processes}"\n',
    )
    path = root / f"bench-{processes}.toml"
    path.write_text(text)
    command = [sys.executable, "-m", "replicator", "--log-level", "INFO", "--log-format"]
    command += ["json", "ingress", "--config", str(path), "--stop-at-end"]
    service_log = root / f"ingress-{processes}.jsonl"
    with (
        PeakRss(is_ingress) as memory,
        counting(root / f"aws-{processes}.log") as log,
        service_log.open("w") as stderr,
    ):
        started = time.time()
        subprocess.run(command, check=True, timeout=1800, stderr=stderr)
        seconds = time.time() - started
    joined = group_joined(service_log.read_text(), processes)
    parent = max(
        (peak for peak, cmd in memory.peaks.values() if "spawn_main" not in cmd), default=0
    )
    return {
        "requests": count(log.read_text()),
        "seconds": seconds,
        "seconds_after_join": started + seconds - (joined or started),
        "peak_rss_mib": memory.largest()[0] / 2**20,
        "parent_rss_mib": parent / 2**20,
    }


def group_joined(service_log: str, processes: int) -> float | None:
    """When every replay process owned its first partitions (epoch seconds), from the
    service's JSON log: Kafka's group join (the broker holds a new group's first join for
    its initial rebalance delay) is start-up, like Spark's, and reported apart."""
    owning = []
    for line in service_log.splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("logger") == "ingress.service" and entry["message"].startswith("owning "):
            owning.append(datetime.fromisoformat(entry["time"]).timestamp())
    if len(owning) < processes:
        return None
    return max(owning[:processes])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.records, args.partitions), indent=2))


if __name__ == "__main__":
    main()
