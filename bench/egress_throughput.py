"""Egress throughput next to one plain confluent-kafka consumer, on the same records.

Usage: python -m bench.egress_throughput [--records N] [--partitions P]
Starts its own local stack on free ports; prints and returns the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench.aws_requests import count, counting, priced
from bench.baselines import plain_consume
from bench.local_stack import bench_stack
from bench.memory import PeakRss, spark_python_process
from bench.profiles import profiled
from bench.workload import produce_workload
from egress.job import EgressJob
from replicator.core.logs import configure_logging

CONFIG = """
[egress]
region = "us-east-1"
checkpoint_location = "{root}/checkpoint"
state_dir = "{root}/state"
[egress.topics.bench]
max_segment_messages = 1000000
max_segment_bytes = "{segment_bytes}"
max_segment_age = "5m"
"""


SEGMENT_BYTES = "256MiB"
"""The benchmark's ``max_segment_bytes``: 1,000,000-record segments (the message limit)
of about 200 MiB, each a multipart upload of 16 MiB parts."""


def measure(records: int, partitions: int, segment_bytes: str = SEGMENT_BYTES) -> dict[str, Any]:
    template = CONFIG.replace("{segment_bytes}", segment_bytes)
    with bench_stack(template, "egress") as (config, root):
        bootstrap = config.region("us-east-1").kafka.bootstrap_servers
        produce_workload(bootstrap, "bench", partitions, records)
        base_records, base_bytes, base_seconds = plain_consume(bootstrap, "bench", partitions)
        # Spark's Python processes: the worker daemon and the workers it forks.
        with (
            PeakRss(spark_python_process) as memory,
            counting(root / "aws.log") as log,
            profiled("egress"),
        ):
            started = time.perf_counter()
            run = EgressJob(config, stop_at_end=True).run()
            egress_seconds = time.perf_counter() - started
        requests = priced(count(log.read_text()), base_records)
    peak, command = memory.largest()
    return {
        "records": base_records,
        "record_bytes": base_bytes,
        "baseline_records_per_s": base_records / base_seconds,
        "baseline_mb_per_s": base_bytes / base_seconds / 1e6,
        "egress_records_per_s": base_records / egress_seconds,
        "egress_mb_per_s": base_bytes / egress_seconds / 1e6,
        "egress_seconds_including_spark_start": egress_seconds,
        "egress_seconds_in_batches": run.batch_seconds,
        "egress_records_per_s_in_batches": base_records / run.batch_seconds,
        "egress_mb_per_s_in_batches": base_bytes / run.batch_seconds / 1e6,
        "egress_records_exported": run.records,
        "egress_segments": run.segments,
        "ratio_records_per_s": base_seconds / egress_seconds,
        "ratio_records_per_s_in_batches": base_seconds / run.batch_seconds,
        "spark_worker_peak_rss_mib": peak / 2**20,
        "spark_worker_command": command,
        "max_segment_bytes": segment_bytes,
        "aws": requests,
        "segment_limits": f"max_segment_messages 1,000,000, max_segment_bytes {segment_bytes}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--segment-bytes", default=SEGMENT_BYTES, help="max_segment_bytes")
    args = parser.parse_args()
    configure_logging("WARNING")
    figures = measure(args.records, args.partitions, args.segment_bytes)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
