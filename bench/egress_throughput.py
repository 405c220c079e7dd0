"""Egress throughput next to one plain confluent-kafka consumer, on the same records.

Usage: python -m bench.egress_throughput [--records N] [--partitions P]
Starts its own local stack on free ports; prints and returns the figures.
"""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import time
from pathlib import Path

from bench.baselines import plain_consume
from bench.workload import produce_workload
from egress.job import EgressJob
from infra.stack import Stack, StackSpec
from replicator.config import load_config
from replicator.logs import configure_logging

CONFIG = """
[s3]
endpoint_url = "http://127.0.0.1:{s3}"
access_key_id = "bench"
secret_access_key = "bench"
[regions.us-east-1]
bucket = "bench-us-east-1"
kafka.bootstrap_servers = "127.0.0.1:{kafka}"
[egress]
region = "us-east-1"
checkpoint_location = "{root}/checkpoint"
state_dir = "{root}/state"
[egress.topics.bench]
max_segment_messages = 1000000
max_segment_bytes = "{segment_bytes}"
max_segment_age = "5m"
"""


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def measure(records: int, partitions: int, segment_bytes: str = "256MiB") -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="bench-egress-"))
    path = root / "bench.toml"
    path.write_text(
        CONFIG.format(s3=_port(), kafka=_port(), root=root, segment_bytes=segment_bytes)
    )
    config = load_config(path)
    stack = Stack(StackSpec.from_config(config, root / "stack"))
    stack.up()
    try:
        bootstrap = config.region("us-east-1").kafka.bootstrap_servers
        produce_workload(bootstrap, "bench", partitions, records)
        base_records, base_bytes, base_seconds = plain_consume(bootstrap, "bench", partitions)
        started = time.perf_counter()
        run = EgressJob(config, stop_at_end=True).run()
        egress_seconds = time.perf_counter() - started
    finally:
        stack.down()
    exported = run.records - run.batches * partitions  # range rows are not records
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
        "egress_rows_read": exported,
        "ratio_records_per_s": base_seconds / egress_seconds,
        "ratio_records_per_s_in_batches": base_seconds / run.batch_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    configure_logging("WARNING")
    figures = measure(args.records, args.partitions)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
