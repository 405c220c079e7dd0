"""The archive path's compiled-client limit: what the Java clients do on the same local
stack with the same records, with nothing of the product's guarantees.

Why: the stages' own baselines are Python loops (one confluent-kafka consumer, a pyarrow
read-and-produce loop), so a ratio near 1 against them still says nothing of what the
machine can do for this work. The limit is a small Java program (``bench/java/
CompiledLimit.java``, compiled by :mod:`bench.peers` against the broker's kafka-clients):

- Kafka -> S3: the benchmark's topic read with the Java consumer, each partition's
  records written as Kafka record batches (uncompressed) concatenated into objects of
  about :data:`OBJECT_BYTES`, PUT to the stack's S3 endpoint, a few in flight.
- S3 -> Kafka: those objects read back and every record produced with the Java producer
  (``acks=all``, idempotent) into a new topic, partition for partition.

Egress, restore and ingress are reported against these (the ``compiled_limit``
benchmark of :mod:`bench.run`); the Python loops stay as the cost of the guarantees.
Each direction is timed by the program from its first fetch or GET to its last PUT or
acknowledgement (client set-up excluded, as the loops' barrier excludes theirs); the
JVM's start is reported beside it.

Usage: python -m bench.compiled_limit [--records N] [--partitions P]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import time
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench.local_stack import bench_stack
from bench.peers import LIMIT_CLASS, limit_classes, limit_classpath
from bench.workload import produce_workload
from infra.broker import java
from replicator.core.logs import configure_logging

OBJECT_BYTES = 16 * 2**20
"""About the size of each object the limit writes (the product's segments are larger
or smaller by configuration; 16 MiB is a few PUTs per partition of the workload)."""
IN_FLIGHT = 4
"""PUTs in flight, and GETs ahead of the producer."""
HEAP = "1g"
TOPIC = "bench"
PREFIX = "limit"
TIMEOUT = 1800.0


def run_limit(mode: str, options: dict[str, str | int]) -> dict[str, Any]:
    """One run of the limit program in ``mode`` (``to-s3`` or ``from-s3``): its JSON line,
    with ``process_seconds`` (the JVM's start included) added."""
    classpath = ":".join(str(p) for p in [limit_classes(), *limit_classpath()])
    command = [java(), f"-Xmx{HEAP}", "-cp", classpath, LIMIT_CLASS, mode]
    for name, value in options.items():
        command += [f"--{name}", str(value)]
    cpu = _children_cpu_seconds()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    seconds = time.perf_counter() - started
    cpu = _children_cpu_seconds() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"the compiled-client limit ({mode}) failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result | {"process_seconds": seconds, "cpu_seconds": cpu}


def _children_cpu_seconds() -> float:
    """CPU seconds of this process's children that have ended (the stack's brokers and
    endpoint run until it stops: between two calls, only the program run counts)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summary(to_s3: dict[str, Any], from_s3: dict[str, Any], records: int) -> dict[str, Any]:
    """The limit's figures from both directions' results; a ValueError if either
    direction moved another number of records than the workload has. Pure."""
    for name, run in (("Kafka -> S3", to_s3), ("S3 -> Kafka", from_s3)):
        if run["records"] != records:
            raise ValueError(f"the limit's {name} moved {run['records']} of {records} records")
    return {
        "records": records,
        "record_bytes": to_s3["bytes"],
        "objects": to_s3["objects"],
        "object_mib": OBJECT_BYTES / 2**20,
        "to_s3_seconds": to_s3["seconds"],
        "to_s3_records_per_s": records / to_s3["seconds"],
        "to_s3_mb_per_s": to_s3["bytes"] / to_s3["seconds"] / 1e6,
        "to_s3_process_seconds": to_s3["process_seconds"],
        "to_s3_cpu_seconds_per_million_records": to_s3["cpu_seconds"] / records * 1e6,
        "from_s3_seconds": from_s3["seconds"],
        "from_s3_records_per_s": records / from_s3["seconds"],
        "from_s3_mb_per_s": from_s3["bytes"] / from_s3["seconds"] / 1e6,
        "from_s3_process_seconds": from_s3["process_seconds"],
        "from_s3_cpu_seconds_per_million_records": from_s3["cpu_seconds"] / records * 1e6,
    }


def measure(records: int, partitions: int) -> dict[str, Any]:
    """Both directions on a stack of their own: the workload into the source cluster,
    out to its bucket, and back into a new topic of the destination cluster."""
    with bench_stack("", "compiled-limit") as (config, root):
        east = config.region("us-east-1").kafka.bootstrap_servers
        west = config.region("us-west-1").kafka.bootstrap_servers
        endpoint = config.s3.endpoint_url
        bucket = config.region("us-east-1").bucket
        secret = config.s3.secret_access_key
        assert endpoint and bucket and secret and config.s3.access_key_id, "the stack has them"
        store: dict[str, str | int] = {
            "endpoint": endpoint,
            "bucket": bucket,
            "in-flight": IN_FLIGHT,
            "access-key": config.s3.access_key_id,
            "secret-key": secret.get_secret_value(),
            "region": "us-east-1",
            "keys": str(root / "limit-objects.txt"),
        }
        produce_workload(east, TOPIC, partitions, records)
        out: dict[str, str | int] = {"bootstrap": east, "topic": TOPIC, "partitions": partitions}
        out |= {"prefix": PREFIX, "object-bytes": OBJECT_BYTES}
        to_s3 = run_limit("to-s3", store | out)
        into = f"{TOPIC}.limit"
        admin = AdminClient({"bootstrap.servers": west})
        admin.create_topics([NewTopic(into, partitions)])[into].result(timeout=30)
        from_s3 = run_limit("from-s3", store | {"bootstrap": west, "into-topic": into})
    return summary(to_s3, from_s3, records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.records, args.partitions), indent=2))


if __name__ == "__main__":
    main()
