"""Restore throughput next to one plain confluent-kafka producer sending the same records
from memory, in the same run.

Usage: python -m bench.restore_throughput [--records N] [--partitions P]
Starts its own local stack on free ports, writes the archive into the us-west-1 bucket,
restores it with ``replicator restore`` (Spark, local[cores]) and prints the figures as
JSON: whole-process time (Spark start-up included) and the time the tasks took (from
the first submitted to the last result).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from bench.ingress_throughput import SEGMENT_RECORDS, plain_produce, workload
from bench.local_stack import bench_stack
from replicator.core.logs import configure_logging
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore

TOPIC = "bench"


def measure(records: int, partitions: int) -> dict[str, float]:
    with bench_stack("", "restore") as (config, root):
        store = SegmentStore.for_region(config, "us-west-1")
        per_partition = records // partitions
        batches = []
        payload = 0
        for partition in range(partitions):
            for start in range(0, per_partition, SEGMENT_RECORDS):
                count = min(SEGMENT_RECORDS, per_partition - start)
                batch = workload(start, count)
                store.write_segment(
                    SegmentKey("us-east-1", TOPIC, partition, 0, start, start + count - 1), batch
                )
                payload += sum(batch.column(c).nbytes for c in ("key", "value"))
                batches.append((partition, batch))
        store.put_json(
            topic_descriptor_s3_key("data", "us-east-1", TOPIC),
            describe(TOPIC, partitions, {}, "us-east-1", {p: 0 for p in range(partitions)}),
        )
        bootstrap = config.region("us-west-1").kafka.bootstrap_servers
        base_records, base_seconds = plain_produce(bootstrap, "bench.baseline", partitions, batches)
        del batches
        command = [sys.executable, "-m", "replicator", "--log-level", "WARNING", "restore"]
        command += ["--config", str(root / "bench.toml"), "--topic", TOPIC]
        command += ["--from-region", "us-east-1", "--into-region", "us-west-1"]
        command += ["--into-topic", "bench.restored", "--json"]
        command += ["--master", f"local[{os.cpu_count() or 2}]"]
        started = time.perf_counter()
        result = subprocess.run(command, check=True, timeout=1800, capture_output=True, text=True)
        whole = time.perf_counter() - started
    report = json.loads(result.stdout[result.stdout.index('{\n  "seconds"') :])
    restored = sum(p["records"] for p in report["partitions"])
    assert restored == base_records, f"restored {restored} of {base_records} records"
    inside = report["tasks_seconds"]
    return {
        "records": base_records,
        "baseline_records_per_s": base_records / base_seconds,
        "baseline_mb_per_s": payload / base_seconds / 1e6,
        "restore_records_per_s": base_records / whole,
        "restore_mb_per_s": payload / whole / 1e6,
        "restore_records_per_s_in_tasks": base_records / inside,
        "restore_seconds": whole,
        "restore_seconds_in_tasks": inside,
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
