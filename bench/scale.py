"""How each stage's cost grows with its work, side by side in one run.

- **Partitions**: egress and ingress move the same total records spread over 8, 64 and
  512 partitions: what a partition costs beyond its records (Spark tasks, consumers,
  transactional producers, transactions, memory), with the peak RSS of the largest
  process of each and the S3 requests they sent.
- **Segments in a partition**: 100, 1,000 and 10,000 segments: the time and LIST requests
  of ingress's listing, of compaction's planning, of a partition worker choosing its next
  segment once per segment through all of them, and of a worker folding in a removal
  event for every one of them (what it sees after compaction merged them all).

Usage: python -m bench.scale [--records N] [--partitions 8 64 512] [--segments 100 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import ingress_throughput
from bench.aws_requests import count, counting, priced
from bench.egress_throughput import CONFIG as EGRESS_CONFIG
from bench.local_stack import bench_stack
from bench.memory import PeakRss, spark_python_process
from bench.workload import produce_workload
from compaction.planning import plan_partition
from egress.job import EgressJob
from ingress.metrics import IngressMetrics
from ingress.segment_events import REMOVED, SegmentEvent
from ingress.worker import PartitionWorker
from replicator.core.config import CompactionTopicConfig
from replicator.core.kafka.testing import MemoryWriter
from replicator.core.logs import configure_logging
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.selection import ReadingCursor, ReadNext
from replicator.core.segments.store import SegmentStore

SEGMENT_OFFSETS = 100
"""Offsets each listed segment covers (the listing benchmark's segments are empty
objects: only their keys matter to a listing or a plan)."""


def egress_at(partitions: int, records: int) -> dict[str, Any]:
    config_text = EGRESS_CONFIG.replace("{segment_bytes}", "256MiB")
    with bench_stack(config_text, f"scale-egress-{partitions}") as (config, root):
        produce_workload(
            config.region("us-east-1").kafka.bootstrap_servers, "bench", partitions, records
        )
        with PeakRss(spark_python_process) as memory, counting(root / "aws.log") as log:
            started = time.perf_counter()
            run = EgressJob(config, stop_at_end=True).run()
            seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "seconds_in_batches": run.batch_seconds,
        "records_per_s": records / seconds,
        "peak_rss_mib": memory.largest()[0] / 2**20,
        "aws": priced(count(log.read_text()), records),
    }


def ingress_at(partitions: int, records: int) -> dict[str, Any]:
    with bench_stack(ingress_throughput.CONFIG, f"scale-ingress-{partitions}") as (config, root):
        store = SegmentStore.for_region(config, "us-west-1")
        per_partition = records // partitions

        def put(partition: int) -> None:
            key = SegmentKey("us-east-1", "bench", partition, 0, 0, per_partition - 1)
            store.write_segment(key, ingress_throughput.workload(0, per_partition))

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, range(partitions)))
        store.put_json(
            "data/us-east-1/bench/_topic.json", {"partitions": partitions, "configs": {}}
        )
        cores = len(os.sched_getaffinity(0))
        replayed = ingress_throughput.replay(root, cores)
    return {
        "processes": cores,
        "seconds": replayed["seconds"],
        "records_per_s": per_partition * partitions / replayed["seconds"],
        "peak_rss_mib": replayed["peak_rss_mib"],
        "aws": priced(replayed["requests"], per_partition * partitions),
    }


def segments_at(store: SegmentStore, config: Any, root: Path, segments: int) -> dict[str, Any]:
    """Listing, planning and removal events with ``segments`` segments in one partition
    (topic ``scale<segments>``)."""
    topic = f"scale{segments}"
    keys = [
        SegmentKey("us-east-1", topic, 0, 0, i * SEGMENT_OFFSETS, (i + 1) * SEGMENT_OFFSETS - 1)
        for i in range(segments)
    ]
    client, bucket = store.client, store.bucket
    with ThreadPoolExecutor(10) as pool:  # the client's connection pool
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k.to_s3_key("data")), keys))
    with counting(root / f"aws-list-{segments}.log") as log:
        started = time.perf_counter()
        listed = store.list_segments("us-east-1", topic, 0)
        listing_seconds = time.perf_counter() - started
    lists = sum(n for (_s, op), n in count(log.read_text()).items() if op.startswith("List"))
    assert len(listed) == segments, (len(listed), segments)
    rules = CompactionTopicConfig(min_segment_age=0, min_segment_count=2, max_segment_count=1000)
    started = time.perf_counter()
    plan = plan_partition(listed, rules, time.time() + 3600)
    planning_seconds = time.perf_counter() - started
    started = time.perf_counter()
    stepped = replay_steps([s.segment_key for s in listed])
    stepping_seconds = time.perf_counter() - started
    assert stepped == segments, (stepped, segments)
    removals = removal_events(store, config, root, topic, keys)
    return {
        "segments": segments,
        "listing_seconds": listing_seconds,
        "listing_requests": lists,
        "planning_seconds": planning_seconds,
        "merges_planned": len(plan.merges),
        "replay_steps_seconds": stepping_seconds,
        **removals,
    }


def replay_steps(keys: Sequence[SegmentKey]) -> int:
    """How a partition worker finds its next segment, once per segment, through all of
    them (what a partition with that many segments to replay pays besides the reads)."""
    cursor, offset, steps = ReadingCursor(), min(k.start for k in keys), 0
    while isinstance(step := cursor.step(offset, keys), ReadNext):
        offset, steps = step.segment.end + 1, steps + 1
    return steps


def removal_events(
    store: SegmentStore, config: Any, root: Path, topic: str, keys: Sequence[SegmentKey]
) -> dict[str, Any]:
    """A partition worker that has replayed every segment sees a removal event for each
    (compaction merged them): the seconds and LIST requests it takes to fold them in."""
    ingress = config.ingress
    writer = MemoryWriter(checkpoints=[len(keys) * SEGMENT_OFFSETS])  # everything replayed
    worker = PartitionWorker(
        config,
        ingress.source("us-east-1", topic),
        0,
        IngressMetrics(),
        open_writer=lambda _target: writer,
        segments=store,
        stop_at_end=True,
        read_slots=threading.BoundedSemaphore(1),
    )
    for key in keys:
        worker.notify(SegmentEvent(REMOVED, key.to_s3_key("data"), 0, ""))
    with counting(root / f"aws-removals-{len(keys)}.log") as log:
        started = time.perf_counter()
        worker.run()
        seconds = time.perf_counter() - started
    lists = sum(n for (_s, op), n in count(log.read_text()).items() if op.startswith("List"))
    return {"removal_events_seconds": seconds, "removal_events_list_requests": lists}


SEGMENTS_CONFIG = """
[ingress]
region = "us-west-1"
[[ingress.sources]]
region = "us-east-1"
topic_pattern = 'scale.*'
first_segment_delay = "0s"
"""


def measure(
    records: int, partitions: Sequence[int], segment_counts: Sequence[int]
) -> dict[str, Any]:
    result: dict[str, Any] = {"records": records, "partitions": {}, "segments": []}
    for p in partitions:
        result["partitions"][str(p)] = {
            "egress": egress_at(p, records),
            "ingress": ingress_at(p, records),
        }
    with bench_stack(SEGMENTS_CONFIG, "scale-segments") as (config, root):
        # A bucket of its own, without notifications or replication: the local S3's cost
        # of notifying a queue that grows by one message per object would dominate.
        regional = SegmentStore.for_region(config, "us-west-1")
        regional.client.create_bucket(
            Bucket="scale-listing",
            CreateBucketConfiguration={"LocationConstraint": "us-west-1"},
        )
        store = SegmentStore(regional.client, "scale-listing", "data")
        for n in segment_counts:
            result["segments"].append(segments_at(store, config, root, n))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=256_000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--segments", type=int, nargs="+", default=[100, 1_000, 10_000])
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.records, args.partitions, args.segments), indent=2))


if __name__ == "__main__":
    main()
