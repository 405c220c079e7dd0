"""Where egress spends its time per record, outside Spark: the data source's read of one
partition (consume + Arrow), the write of the same batches (split, Parquet, zstd,
upload) that the same Spark task does next, each timed and profiled in this process,
next to one raw consumer reading the same partition. What the Spark run adds on top
(task scheduling, the segment rows handed to the sink) is the inside-batch time minus
these.

Usage: python -m bench.profile_egress [--records N] [--top K] [--output DIR]
Keeps each profile's report and raw statistics in ``bench/results/profiles/``
(``egress-read-cprofile.txt``, ``egress-read.pstats``, and ``egress-write-…``);
``make bench-profile STAGE=egress`` samples the Spark run itself with py-spy.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import pyarrow as pa

from bench.baselines import plain_consume
from bench.egress_throughput import CONFIG
from bench.local_stack import bench_stack
from bench.profiles import PROFILES, cprofile_report, keep_cprofile
from bench.workload import produce_workload
from egress.kafka_source import read_range
from egress.planning import OffsetRange
from egress.segment_sink import LostOffsets, write_range
from replicator.core.logs import configure_logging
from replicator.core.segments.store import SegmentStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--output", type=Path, default=PROFILES, help="directory of the reports")
    args = parser.parse_args()
    configure_logging("WARNING")
    with bench_stack(CONFIG.replace("{segment_bytes}", "256MiB"), "profile-egress") as (config, _):
        bootstrap = config.region("us-east-1").kafka.bootstrap_servers
        produce_workload(bootstrap, "bench", 1, args.records)
        records, _bytes, raw_seconds = plain_consume(bootstrap, "bench", 1)
        rng = OffsetRange("bench", 0, 0, records)

        reading = cProfile.Profile()
        started = time.perf_counter()
        reading.enable()
        batches: list[pa.RecordBatch | LostOffsets] = list(read_range(config, rng))
        reading.disable()
        read_seconds = time.perf_counter() - started

        writing = cProfile.Profile()
        started = time.perf_counter()
        writing.enable()
        store = SegmentStore.for_region(config, "us-east-1")
        written = write_range(config, store, rng, batches)
        writing.disable()
        write_seconds = time.perf_counter() - started
    segments = len(written.segments)
    both = read_seconds + write_seconds
    summary = (
        f"{records:,} records of one partition\n"
        f"  raw consumer                    {records / raw_seconds:>10,.0f} rec/s\n"
        f"  data source read (consume+Arrow) {records / read_seconds:>10,.0f} rec/s\n"
        f"  sink write ({segments} segments)       {records / write_seconds:>10,.0f} rec/s\n"
        f"  read then write, one process    {records / both:>10,.0f} rec/s\n"
    )
    for title, profile in (("read", reading), ("write", writing)):
        report = summary + cprofile_report(
            f"{title}: own time", pstats.Stats(profile), "tottime", args.top
        )
        keep_cprofile(f"egress-{title}", report, profile, args.output)


if __name__ == "__main__":
    main()
