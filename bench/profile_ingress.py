"""Where ingress spends its time: cProfile of one partition worker replaying segments.

Usage: python -m bench.profile_ingress [--records N] [--top K] [--output DIR] [--no-profile]
Builds the ingress benchmark's segments for one partition on a local stack, replays them
with ``replicator ingress --stop-at-end`` logic in this process, profiling the worker
thread (cProfile sees one thread; one partition keeps the picture whole), and prints the
functions with the most cumulative and own time, keeping the report and the raw
statistics in ``bench/results/profiles/`` (``ingress-worker-cprofile.txt``,
``ingress-worker.pstats``). ``make bench-profile STAGE=ingress`` samples every process
of the real benchmark with py-spy instead. ``--no-profile`` replays without cProfile and
reports only the CPU seconds (cProfile costs every call it sees from Python, so it weighs
on code calling ``produce`` per record in Python more than on code that does not).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

from bench.ingress_throughput import CONFIG, SEGMENT_RECORDS, workload
from bench.local_stack import bench_stack
from bench.profiles import PROFILES, cprofile_report, keep_cprofile
from ingress.service import IngressService
from ingress.worker import PartitionWorker
from replicator.core.logs import configure_logging
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore

PROFILE = cProfile.Profile()
WORKER_CPU: list[float] = []
"""CPU seconds of each worker thread (the profiler's included when on): compare runs by it."""
PROFILING = [True]
"""Whether the worker threads are profiled (``--no-profile``: not)."""


class ProfiledWorker(PartitionWorker):
    def run(self) -> None:
        started = time.thread_time()
        if PROFILING[0]:
            PROFILE.enable()
        try:
            super().run()
        finally:
            PROFILE.disable()
            WORKER_CPU.append(time.thread_time() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--output", type=Path, default=PROFILES, help="directory of the report")
    parser.add_argument("--no-profile", action="store_true", help="CPU seconds only")
    args = parser.parse_args()
    PROFILING[0] = not args.no_profile
    configure_logging("WARNING")
    with bench_stack(CONFIG, "profile-ingress") as (config, _root):
        store = SegmentStore.for_region(config, "us-west-1")
        for start in range(0, args.records, SEGMENT_RECORDS):
            count = min(SEGMENT_RECORDS, args.records - start)
            store.write_segment(
                SegmentKey("us-east-1", "bench", 0, 0, start, start + count - 1),
                workload(start, count),
            )
        store.put_json(
            topic_descriptor_s3_key("data", "us-east-1", "bench"), {"partitions": 1, "configs": {}}
        )
        import ingress.service

        ingress.service.PartitionWorker = ProfiledWorker  # type: ignore[misc]
        started, cpu_started = time.perf_counter(), time.process_time()
        code = IngressService(config, stop_at_end=True, handle_signals=False).run()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    worker_cpu = sum(WORKER_CPU)
    report = (
        f"replayed {args.records:,} records in {seconds:.1f}s (exit {code}); CPU of the "
        f"process {cpu:.1f} s ({cpu / args.records * 1e6:.1f} s per million records), of "
        f"the worker thread {worker_cpu:.1f} s ({worker_cpu / args.records * 1e6:.1f} s "
        f"per million{', profiler included' if PROFILING[0] else ''})\n"
    )
    if not PROFILING[0]:
        print(report, end="")
        return
    stats = pstats.Stats(PROFILE)
    report += cprofile_report("cumulative", stats, "cumulative", args.top)
    report += cprofile_report("own time", stats, "tottime", args.top)
    keep_cprofile("ingress-worker", report, PROFILE, args.output)


if __name__ == "__main__":
    main()
