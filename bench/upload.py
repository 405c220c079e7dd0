"""Uploading one segment-sized object with a round trip added to every S3 request.

On loopback the local S3 answers in microseconds, so how many parts travel at once
changes nothing there (egress and compaction measured the same either way). On AWS each
request waits for the network; this adds a fixed delay to every request (before it is
sent, in the thread that sends it) to show the writer's parts in flight against one part
at a time, with the same bytes, client and endpoint in one run.

Usage: python -m bench.upload [--mib 64] [--delay 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench.local_stack import bench_stack
from replicator.core.aws.s3_streams import PARTS_IN_FLIGHT, S3MultipartWriter
from replicator.core.logs import configure_logging
from replicator.core.segments.store import SegmentStore

PART_BYTES = 16 * 1024 * 1024


def measure(mib: int, delay: float) -> dict[str, Any]:
    with bench_stack("", "upload") as (config, _root):
        store = SegmentStore.for_region(config, "us-east-1")
        body = os.urandom(mib * 1024 * 1024)
        events = store.client.meta.events

        def round_trip(**_: Any) -> None:
            time.sleep(delay)

        events.register("before-send.s3", round_trip)
        try:
            seconds = {
                in_flight: upload(store, body, in_flight) for in_flight in (1, PARTS_IN_FLIGHT)
            }
        finally:
            events.unregister("before-send.s3", round_trip)
    one, several = seconds[1], seconds[PARTS_IN_FLIGHT]
    return {
        "object_mib": mib,
        "part_mib": PART_BYTES // 2**20,
        "added_seconds_per_request": delay,
        "parts_in_flight": PARTS_IN_FLIGHT,
        "seconds_one_part_at_a_time": one,
        "seconds_parts_in_flight": several,
        "mb_per_s_one_part_at_a_time": len(body) / one / 1e6,
        "mb_per_s_parts_in_flight": len(body) / several / 1e6,
    }


def upload(store: SegmentStore, body: bytes, in_flight: int) -> float:
    writer = S3MultipartWriter(
        store.client,
        store.bucket,
        f"bench/upload-{in_flight}",
        PART_BYTES,
        {},
        parts_in_flight=in_flight,
    )
    started = time.perf_counter()
    try:
        writer.write(body)
        writer.complete()
    except BaseException:
        writer.abort()
        raise
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.1)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.mib, args.delay), indent=2))


if __name__ == "__main__":
    main()
