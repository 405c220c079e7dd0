"""Compaction merge throughput next to a plain single-process pyarrow read-and-rewrite of
the same segments, in the same run.

Usage: python -m bench.compaction_throughput [--records N] [--partitions P] [--segments S]
Starts its own local stack on free ports; prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from typing import Any

import pyarrow.parquet as pq

from bench.aws_requests import count, counting, priced
from bench.ingress_throughput import workload
from bench.local_stack import bench_stack
from bench.profiles import profiled
from compaction.job import CompactionJob
from replicator.core.logs import configure_logging
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import SegmentStore
from replicator.core.spark import spark_session

PARALLELISM = 2
CONFIG = f"""
[compaction]
region = "us-east-1"
parallelism = {PARALLELISM}
[compaction.topics.bench]
min_segment_age = "0s"
min_segment_count = 2
max_segment_count = 1000
max_segment_bytes = "4GiB"
"""


def plain_rewrite(store: SegmentStore, partitions: int) -> tuple[int, float]:
    """Per partition: download every level-0 segment, read it with pyarrow, write one
    zstd Parquet file of all of them, upload it. Returns (bytes read, seconds)."""
    client, bucket = store.client, store.bucket
    total = 0
    started = time.perf_counter()
    for partition in range(partitions):
        tables = []
        for segment in store.list_segments("us-east-1", "bench", partition):
            body = client.get_object(Bucket=bucket, Key=segment.s3_key)["Body"].read()
            total += len(body)
            tables.append(pq.read_table(io.BytesIO(body)))
        out = io.BytesIO()
        with pq.ParquetWriter(out, tables[0].schema, compression="zstd") as writer:
            for table in tables:
                writer.write_table(table)
        client.put_object(Bucket=bucket, Key=f"baseline/{partition}.parquet", Body=out.getvalue())
    return total, time.perf_counter() - started


def measure(records: int, partitions: int, segments: int) -> dict[str, Any]:
    with bench_stack(CONFIG, "compaction") as (config, root):
        store = SegmentStore.for_region(config, "us-east-1")
        per_segment = records // partitions // segments
        for partition in range(partitions):
            for s in range(segments):
                start = s * per_segment
                store.write_segment(
                    SegmentKey("us-east-1", "bench", partition, 0, start, start + per_segment - 1),
                    workload(start, per_segment),
                )
        base_bytes, base_seconds = plain_rewrite(store, partitions)
        with counting(root / "aws.log") as log, profiled("compaction"):
            # The session the job would start, started here to time it apart: a cron run
            # pays it every time, a long-lived driver once.
            started = time.perf_counter()
            spark = spark_session(
                f"local[{PARALLELISM}]",
                "replicator-compaction-us-east-1",
                {},
                config.spark,
                bounded=True,
            )
            spark_start = time.perf_counter() - started
            try:
                report = CompactionJob(config, spark=spark).run_once()
            finally:
                spark.stop()
            seconds = time.perf_counter() - started
        requests = priced(count(log.read_text()), report.records)
    return {
        "segment_bytes": base_bytes,
        "baseline_mb_per_s": base_bytes / base_seconds / 1e6,
        "compaction_mb_per_s": report.bytes_in / seconds / 1e6,
        "compaction_seconds_including_spark_start": seconds,
        "spark_start_seconds": spark_start,
        "compaction_mb_per_s_after_spark_start": report.bytes_in / (seconds - spark_start) / 1e6,
        "compaction_mb_per_s_in_merges": report.bytes_in
        / (report.merge_seconds / PARALLELISM)
        / 1e6,
        "ratio": (report.bytes_in / seconds) / (base_bytes / base_seconds),
        "segments_written": report.segments_written,
        "records": report.records,
        "baseline_records_per_s": report.records / base_seconds,
        "compaction_records_per_s": report.records / seconds,
        "compaction_records_per_s_in_merges": report.records / (report.merge_seconds / PARALLELISM),
        "aws": requests,
        "segment_limits": f"{segments} level-0 segments a partition merged into one",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--segments", type=int, default=10)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.records, args.partitions, args.segments), indent=2))


if __name__ == "__main__":
    main()
