"""What the local S3 endpoint spends to store the same bytes as one multipart upload and
as single PUTs: the CPU of its process and of the client, in one run.

Why: the archive path is judged against the compiled-client limit, and both upload to the
stack's S3 endpoint (moto, in Python) on the same two cores as the brokers and the measured
stage. The limit PUTs 16 MiB objects; egress's benchmark writes 200 MiB segments as
multipart uploads of 16 MiB parts, and the stand-in spends more CPU a byte on those — it
joins the parts into a new object at completion, work that S3 does on its own machines. So
the stand-in's cost is part of the machine a ratio is measured on, and this says how large
that part is for each way of uploading.

Usage: python -m bench.s3_stand_in [--mib 256]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import time
from typing import Any

from bench.compiled_limit import OBJECT_BYTES
from bench.local_stack import bench_stack
from bench.memory import command_line, cpu_seconds, descendants, parents
from replicator.core.aws.s3_streams import S3MultipartWriter, upload_stream
from replicator.core.logs import configure_logging
from replicator.core.segments.store import SegmentStore

ROUNDS = 3
"""Each way is measured this many times, alternating; the figures are medians."""


def endpoint_cpu_seconds(pid: int) -> float:
    used = cpu_seconds(pid)
    if used is None:
        raise RuntimeError(f"the S3 endpoint (pid {pid}) exited during the benchmark")
    return used


def s3_endpoint_pid() -> int:
    """The stack's S3 endpoint, a descendant of this process."""
    for pid in descendants(os.getpid(), parents()):
        if "infra.s3_endpoint" in command_line(pid):
            return pid
    raise RuntimeError("no S3 endpoint process below this one")


def measure(mib: int) -> dict[str, Any]:
    body = os.urandom(mib * 2**20)
    with bench_stack("", "s3-stand-in") as (config, _root):
        store = SegmentStore.for_region(config, "us-east-1")
        endpoint = s3_endpoint_pid()

        def multipart(key: str) -> None:
            upload_stream(io.BytesIO(body), store.sink(key))

        def single_puts(key: str) -> None:
            # A part size above the object's: the writer sends each object as one PUT
            # with its MD5, as it does a segment smaller than a part.
            for start in range(0, len(body), OBJECT_BYTES):
                sink = S3MultipartWriter(
                    store.client, store.bucket, f"{key}/{start}", OBJECT_BYTES + 1, {}
                )
                upload_stream(io.BytesIO(body[start : start + OBJECT_BYTES]), sink)

        ways = {"multipart": multipart, "single_puts": single_puts}
        spent: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
        for round_ in range(ROUNDS):
            for way, upload in ways.items():
                endpoint_before, client_before = endpoint_cpu_seconds(endpoint), time.process_time()
                started = time.perf_counter()
                upload(f"stand-in/{way}/{round_}")
                spent[way].append(
                    (
                        endpoint_cpu_seconds(endpoint) - endpoint_before,
                        time.process_time() - client_before,
                        time.perf_counter() - started,
                    )
                )
    figures: dict[str, Any] = {"object_mib": mib, "put_mib": OBJECT_BYTES // 2**20}
    for way, rounds in spent.items():
        endpoint_s, client_s, wall_s = map(statistics.median, zip(*rounds, strict=True))
        figures[way] = {
            "endpoint_cpu_seconds": endpoint_s,
            "client_cpu_seconds": client_s,
            "seconds": wall_s,
            "endpoint_cpu_ns_per_byte": endpoint_s / len(body) * 1e9,
        }
    figures["endpoint_cpu_multipart_over_single_puts"] = (
        figures["multipart"]["endpoint_cpu_seconds"]
        / figures["single_puts"]["endpoint_cpu_seconds"]
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="bytes uploaded each way")
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.mib), indent=2))


if __name__ == "__main__":
    main()
