"""Restore throughput next to its loop (:func:`bench.baselines.plain_replay`: the same
segments read from the same S3 endpoint with pyarrow and produced with a plain producer,
one process per core as restore's ``local[cores]``), in the same run.

Usage: python -m bench.restore_throughput [--records N] [--partitions P] [--repeat N]
Starts its own local stack on free ports, writes the archive into the us-west-1 bucket,
restores it with ``replicator restore`` (Spark, local[cores]) and prints the figures as
JSON: whole-process time (Spark start-up included), the time the tasks took (from
the first submitted to the last result) and the CPU seconds of restore's process tree
(its Python driver, Spark's JVM and the Python workers, sampled from /proc every
``CPU_INTERVAL`` seconds: what the machine spent on it, the figure to compare changes by
on a shared machine; a process's last fraction of an interval is missed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.baselines import plain_replay
from bench.ingress_throughput import write_segments
from bench.local_stack import bench_stack
from bench.memory import (
    command_line,
    cpu_seconds,
    descendants,
    parents,
    spark_python_process,
)
from bench.profiles import profiled
from replicator.core.logs import configure_logging
from replicator.core.segments.descriptor import describe
from replicator.core.segments.key import topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore

TOPIC = "bench"
CPU_INTERVAL = 0.5


def measure(records: int, partitions: int, repeat: int = 1) -> list[dict[str, Any]]:
    """``repeat`` measurements on one stack: the archive is written once and each run
    restores it into a topic of its own (restore is a process of its own each time, its
    Spark started anew)."""
    with bench_stack("", "restore") as (config, root):
        store = SegmentStore.for_region(config, "us-west-1")
        write_segments(store, TOPIC, records, partitions)
        store.put_json(
            topic_descriptor_s3_key("data", "us-east-1", TOPIC),
            describe(TOPIC, partitions, {}, "us-east-1", {p: 0 for p in range(partitions)}),
        )
        cores = os.cpu_count() or 2
        runs = []
        for run in range(repeat):
            base_records, payload, base_seconds = plain_replay(
                root / "bench.toml",
                "us-west-1",
                ("us-east-1", TOPIC),
                partitions,
                f"bench.baseline.{run}",
                cores,
            )
            with profiled("restore"):
                whole, cpu, report = restore(root / "bench.toml", f"bench.restored.{run}", cores)
            restored = sum(p["records"] for p in report["partitions"])
            assert restored == base_records, f"restored {restored} of {base_records} records"
            inside = report["tasks_seconds"]
            runs.append(
                {
                    "records": base_records,
                    "baseline": f"{cores} processes reading the segments with pyarrow and "
                    "producing with a plain producer",
                    "baseline_processes": cores,
                    "baseline_records_per_s": base_records / base_seconds,
                    "baseline_mb_per_s": payload / base_seconds / 1e6,
                    "baseline_seconds": base_seconds,
                    "restore_records_per_s": base_records / whole,
                    "restore_mb_per_s": payload / whole / 1e6,
                    "restore_records_per_s_in_tasks": base_records / inside,
                    "restore_seconds": whole,
                    "restore_seconds_in_tasks": inside,
                    "restore_cpu_seconds": sum(cpu.values()),
                    "restore_cpu_seconds_by_process": cpu,
                    "restore_cpu_seconds_per_million_records": sum(cpu.values())
                    / base_records
                    * 1e6,
                }
            )
    return runs


def restore(
    config: Path, into_topic: str, cores: int
) -> tuple[float, dict[str, float], dict[str, Any]]:
    """``replicator restore`` of topic ``bench`` into ``into_topic`` on ``local[cores]``:
    (whole-process seconds, CPU seconds of its process tree by kind of process, its
    JSON report)."""
    command = [sys.executable, "-m", "replicator", "--log-level", "WARNING", "restore"]
    command += ["--config", str(config), "--topic", TOPIC]
    command += ["--from-region", "us-east-1", "--into-region", "us-west-1"]
    command += ["--into-topic", into_topic, "--json", "--master", f"local[{cores}]"]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        with subprocess.Popen(command, stdout=out, stderr=err, text=True) as run:
            cpu = _tree_cpu(run, started + 1800, command)
        whole = time.perf_counter() - started
        out.seek(0), err.seek(0)
        stdout = out.read()
        if run.returncode:
            raise subprocess.CalledProcessError(run.returncode, command, stdout, err.read())
    report: dict[str, Any] = json.loads(stdout[stdout.index('{\n  "seconds"') :])
    return whole, cpu, report


def _tree_cpu(run: subprocess.Popen[str], deadline: float, command: list[str]) -> dict[str, float]:
    """CPU seconds of ``run`` (of ``command``) and its descendants, sampled until it ends
    (killed at ``deadline``), by kind of process: the driver (``run``), Spark's Python
    workers, the rest (Spark's JVM and its launcher)."""
    seen: dict[int, tuple[float, str]] = {}
    while run.poll() is None:
        if time.perf_counter() > deadline:
            run.kill()
            raise TimeoutError(f"restore still running at the benchmark's limit: {command}")
        for pid in [run.pid, *descendants(run.pid, parents())]:
            used = cpu_seconds(pid)
            if used is None:
                continue
            kind = seen[pid][1] if pid in seen else _kind(pid, run.pid)
            seen[pid] = (max(seen.get(pid, (0.0, ""))[0], used), kind)
        time.sleep(CPU_INTERVAL)
    kinds: dict[str, float] = {"driver": 0.0, "python workers": 0.0, "jvm and others": 0.0}
    for used, kind in seen.values():
        kinds[kind] += used
    return kinds


def _kind(pid: int, driver: int) -> str:
    if pid == driver:
        return "driver"
    return "python workers" if spark_python_process(command_line(pid)) else "jvm and others"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure(args.records, args.partitions, args.repeat), indent=2))


if __name__ == "__main__":
    main()
