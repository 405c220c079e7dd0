"""Ingress throughput next to its loop (:func:`bench.baselines.plain_replay`: the same
segments read from the same S3 endpoint with pyarrow and produced with a plain producer,
one process per core), in the same run: with one replay process, and with one per core
(the default), each into a destination of its own.

Usage: python -m bench.ingress_throughput [--records N] [--partitions P] [--repeat N]
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

from bench.aws_requests import count, counting, priced
from bench.baselines import plain_replay
from bench.local_stack import bench_stack
from bench.memory import PeakRss
from bench.profiles import profiled
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


def write_segments(store: SegmentStore, topic: str, records: int, partitions: int) -> int:
    """The workload as level-0 segments of ``SEGMENT_RECORDS`` in ``store``, written by
    the us-east-1 egress; returns the largest segment's size in bytes."""
    per_partition = records // partitions
    largest = 0
    for partition in range(partitions):
        for start in range(0, per_partition, SEGMENT_RECORDS):
            count = min(SEGMENT_RECORDS, per_partition - start)
            stored = store.write_segment(
                SegmentKey("us-east-1", topic, partition, 0, start, start + count - 1),
                workload(start, count),
            )
            largest = max(largest, stored.size)
    return largest


def measure(records: int, partitions: int, repeat: int = 1) -> list[dict[str, Any]]:
    """``repeat`` measurements on one stack (the segments are written once; each run
    replays them into destination topics, consumer groups and checkpoint topics of its
    own, as separate processes, so that no run finds another's state)."""
    with bench_stack(CONFIG, "ingress") as (config, root):
        store = SegmentStore.for_region(config, "us-west-1")
        segment_bytes = write_segments(store, "bench", records, partitions)
        store.put_json(
            topic_descriptor_s3_key("data", "us-east-1", "bench"),
            {"partitions": partitions, "configs": {}},
        )
        cores = len(os.sched_getaffinity(0))
        runs = []
        for run in range(repeat):
            base_records, _bytes, base_seconds = plain_replay(
                root / "bench.toml",
                "us-west-1",
                ("us-east-1", "bench"),
                partitions,
                f"bench.baseline.{run}",
                cores,
            )
            with profiled("ingress"):
                every_core = replay(root, cores, f"r{run}")
            one = replay(root, 1, f"r{run}") if cores > 1 else every_core
            runs.append(
                {
                    "records": base_records,
                    "baseline": f"{cores} processes reading the segments with pyarrow and "
                    "producing with a plain producer",
                    "baseline_processes": cores,
                    "baseline_records_per_s": base_records / base_seconds,
                    "baseline_seconds": base_seconds,
                    "ingress_processes": cores,
                    "ingress_records_per_s": base_records / every_core["seconds"],
                    "ingress_seconds": every_core["seconds"],
                    "ratio_records_per_s": base_seconds / every_core["seconds"],
                    "ingress_peak_rss_mib": every_core["peak_rss_mib"],
                    "ingress_parent_rss_mib": every_core["parent_rss_mib"],
                    "ingress_records_per_s_after_join": base_records
                    / every_core["seconds_after_join"],
                    "one_process_records_per_s": base_records / one["seconds"],
                    "one_process_records_per_s_after_join": base_records
                    / one["seconds_after_join"],
                    "one_process_peak_rss_mib": one["peak_rss_mib"],
                    "segment_mib": segment_bytes / 2**20,
                    "aws": priced(every_core["requests"], base_records),
                    "segment_limits": f"{SEGMENT_RECORDS:,} records a segment",
                }
            )
    return runs


def is_ingress(command: str) -> bool:
    """The ingress command, or one of its replay processes (started by multiprocessing)."""
    return ("replicator" in command and " ingress " in command) or "spawn_main" in command


def replay(root: Path, processes: int, run: str = "") -> dict[str, Any]:
    """Replay every segment with ``processes`` replay processes into a destination topic
    of its own (named after ``processes`` and ``run``), as a process of its own (as
    operators run it, so that the peak RSS of each process is its own)."""
    name = f"{processes}{run}"
    text = (root / "bench.toml").read_text()
    text = text.replace(
        'destination_topic = "bench.copy"', f'destination_topic = "bench.copy.{name}"'
    )
    text = text.replace(
        "[ingress]\n",
        f'[ingress]\nprocesses = {processes}\ngroup_id = "bench-ingress-{name}"\n'
        f'checkpoint_topic = "bench.checkpoints.{name}"\n'
        f'segment_events_topic = "bench.segmentevents.{name}"\n',
    )
    path = root / f"bench-{name}.toml"
    path.write_text(text)
    command = [sys.executable, "-m", "replicator", "--log-level", "INFO", "--log-format"]
    command += ["json", "ingress", "--config", str(path), "--stop-at-end"]
    service_log = root / f"ingress-{name}.jsonl"
    with (
        PeakRss(is_ingress) as memory,
        counting(root / f"aws-{name}.log") as log,
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
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.records, args.partitions, args.repeat), indent=2))


if __name__ == "__main__":
    main()
