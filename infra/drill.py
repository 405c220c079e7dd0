"""The disaster-recovery drill behind ``make demo``, on the local stack.

It starts both regions, produces a realistic workload to two us-east-1 topics (keyed and
compacted with tombstones and empty values; plain with headers) while egress, the
replication stand-in and ingress stream it to us-west-1; it kills ingress with SIGKILL
midway and starts it again; then it stops the services, runs one compaction pass and
checks, with plain consumers and the segment reader, that

* every destination partition holds exactly the source partition's records, in order
  (key, value, timestamp, headers; the source offset from the provenance header), and
* after compaction the segments in the source bucket still hold every source record.

The services run as the operator runs them: ``replicator egress|ingress|compact``
subprocesses with their own logs. The drill exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.acls import acl_bindings, apply_acls, read_acl_table
from infra.archive_reader import archived_records
from infra.drill_report import (
    Record,
    TopicSummary,
    compare_partition,
    coverage_gaps,
    percentile,
    progress_bar,
    render_summary,
)
from infra.errors import DrillFailedError
from infra.local_config import local_regions, running_stack, security_material
from infra.ports import free_port
from infra.security import BROKER_USER, SERVICE_USERS, SecurityMaterial
from replicator.core.aws.clients import s3_client
from replicator.core.config import Config, required
from replicator.core.groups.stored import read_group_offsets
from replicator.core.kafka import provenance
from replicator.core.kafka.client_logs import client_logger
from replicator.core.kafka.clients import consume_available, retry_while_moving
from replicator.core.segments.selection import exported_end
from replicator.core.segments.store import SegmentStore
from replicator.status import PartitionStatus, collect, render

log = logging.getLogger(__name__)

PLAIN: dict[str, Any] = {"logger": client_logger()}
"""What the drill's own clients share: librdkafka's lines through Python logging, with
repeats held back, as the services' clients."""
Cluster = dict[str, Any] | str
"""The drill's own clients of one cluster: librdkafka settings (bootstrap servers, and on
the secured stack the administrator's SASL_SSL settings), or bootstrap servers alone."""


def settings(cluster: Cluster) -> dict[str, Any]:
    """librdkafka settings of ``cluster``."""
    return {"bootstrap.servers": cluster} if isinstance(cluster, str) else cluster


SOURCE = "us-east-1"
DESTINATION = "us-west-1"
ACCOUNTS = "demo.accounts"
CLICKS = "demo.clicks"
APP_GROUP = "demo-billing"
"""An application's consumer group that fails over to the destination region."""
TOPICS = (ACCOUNTS, CLICKS)
STARTED_LINE = "started (streaming)"
"""What egress logs once its streaming query runs."""

JOB_SECTIONS = """\
[egress]
region = "us-east-1"
checkpoint_location = "{root}/egress-checkpoint"
state_dir = "{root}/egress-state"
trigger_interval = "1s"
metrics_port = {egress_metrics}
consumer_groups = ["demo-.*"]
group_offsets_interval = "1s"

[egress.defaults]
max_segment_age = "2s"
max_segment_bytes = "64MiB"
# Several segments per partition however late egress runs, so compaction has work.
max_segment_messages = 2000

[egress.topics."demo.accounts"]
[egress.topics."demo.clicks"]

[ingress]
region = "us-west-1"
relist_interval = "2s"
group_sync_interval = "2s"
consumer_groups = ["demo-.*"]
segment_events_partitions = 4
metrics_port = {ingress_metrics}

[[ingress.sources]]
region = "us-east-1"
topic = "demo.accounts"
first_segment_delay = "0s"
lost_segment_timeout = "2m"

[[ingress.sources]]
region = "us-east-1"
topic = "demo.clicks"
first_segment_delay = "0s"
lost_segment_timeout = "2m"

[compaction]
region = "us-east-1"
parallelism = 2

[compaction.storage_class]
1 = "STANDARD_IA"

[compaction.topics."demo.accounts"]
min_segment_age = "0s"
min_segment_count = 2

[compaction.topics."demo.clicks"]
min_segment_age = "0s"
min_segment_count = 2
"""


@dataclass(frozen=True)
class DrillOptions:
    workdir: Path
    records: int = 300_000
    """Records produced in all, half to each topic."""
    seconds: float = 60.0
    """Production is spread evenly over this long, so the services stream it."""
    partitions: int = 4
    kill_at: float = 0.5
    """Ingress is killed and restarted once this fraction of the records is produced and
    this fraction of those is replayed: mid-stream, with work on both sides of the kill."""
    drain_timeout: float = 180.0
    """Longest wait, after production ends, for the destination to catch up."""
    secured: bool = False
    """Every broker listener on SASL_SSL with SCRAM-SHA-512 and ACLs enforced; each
    service runs as its own user holding only the ACLs ``docs/security.md`` lists."""


@dataclass
class DrillResult:
    summaries: list[TopicSummary]
    status_running: list[PartitionStatus] = field(default_factory=list)
    status_stopped: list[PartitionStatus] = field(default_factory=list)
    source_ends: dict[tuple[str, int], int] = field(default_factory=dict)
    """Log end of every source partition, read at the end by a plain consumer."""
    problems: list[str] = field(default_factory=list)
    """Problems not tied to one topic (a service that failed, a timeout)."""

    @property
    def passed(self) -> bool:
        return not self.problems and all(s.verified for s in self.summaries)


# --------------------------------------------------------------------------- workload


class Workload:
    """Produces both topics at an even rate from a background thread.

    Accounts: keys from a pool of 5,000 so keys repeat (a compacted topic), every 8th
    record a tombstone (null value) and every 50th an empty value, which must stay
    different. Clicks: no key, three headers, one of them sometimes with a null value.
    """

    def __init__(self, cluster: Cluster, options: DrillOptions) -> None:
        self.cluster = cluster
        self.options = options
        self.produced = 0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="drill-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # reported by the drill, not swallowed
            self.error = exc
        finally:
            self.done.set()

    def _produce(self) -> None:
        producer = Producer(
            {
                **PLAIN,
                **settings(self.cluster),
                "linger.ms": 20,
                "compression.type": "lz4",
            }
        )
        rng = random.Random(20261122)
        total = self.options.records
        rate = total / self.options.seconds
        started = time.monotonic()
        for i in range(total):
            if i % 2 == 0:
                producer.produce(ACCOUNTS, **_account(rng, i))
            else:
                producer.produce(CLICKS, **_click(rng, i))
            self.produced = i + 1
            if i % 500 == 499:
                producer.poll(0)
                ahead = (i + 1) / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        _require_flushed(producer, 60)


def _account(rng: random.Random, i: int) -> dict[str, Any]:
    account = rng.randrange(5_000)
    key = b"account-%05d" % account
    if i % 16 == 0:
        value: bytes | None = None
    elif i % 100 == 2:
        value = b""
    else:
        value = json.dumps(
            {"account": account, "balance": rng.randrange(10**7), "currency": "EUR", "seq": i}
        ).encode()
    return {"key": key, "value": value}


PAGES = ("/", "/pricing", "/docs/replication", "/checkout", "/account/settings")


def _click(rng: random.Random, i: int) -> dict[str, Any]:
    value = json.dumps(
        {
            "page": rng.choice(PAGES),
            "session": f"{rng.getrandbits(64):016x}",
            "agent": "Mozilla/5.0 (X11; Linux x86_64) drill",
            "seq": i,
        }
    ).encode()
    headers: list[tuple[str, bytes | None]] = [
        ("source", rng.choice((b"web", b"ios", b"android"))),
        ("trace-id", b"%032x" % rng.getrandbits(128)),
        ("retry", None if i % 7 else b"1"),
    ]
    return {"key": None, "value": value, "headers": headers}


def _require_flushed(producer: Producer, timeout: float) -> None:
    left = producer.flush(timeout)
    if left:
        raise RuntimeError(f"{left} records were not acknowledged by the source cluster")


# ------------------------------------------------------------------- destination tail


class DestinationTail:
    """Reads the destination topics as they fill (read_committed, like an application
    failing over would) and records, per record, the seconds from its source timestamp to
    the moment it became readable: the end-to-end lag."""

    def __init__(self, cluster: Cluster, destinations: dict[str, str], partitions: int) -> None:
        self.cluster = cluster
        self.destinations = destinations  # source topic -> destination topic
        self.partitions = partitions
        self.counts: dict[tuple[str, int], int] = {}
        self.lags: dict[str, list[float]] = {t: [] for t in destinations}
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-tail", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        self._thread.join(30)

    def replayed(self, topic: str | None = None) -> int:
        return sum(n for (t, _), n in self.counts.items() if topic in (None, t))

    def _run(self) -> None:
        consumer = Consumer(
            {
                **PLAIN,
                **settings(self.cluster),
                "group.id": "drill-tail",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                # The lag measured must be the pipeline's, not this consumer's fetch wait.
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            wanted = set(self.destinations.values())
            while not self.stop.is_set():
                topics = consumer.list_topics(timeout=5).topics
                if all(t in topics and topics[t].partitions for t in wanted):
                    break
                self.stop.wait(0.5)
            source_of = {d: s for s, d in self.destinations.items()}
            consumer.assign(
                [
                    TopicPartition(t, p, OFFSET_BEGINNING)
                    for t in sorted(wanted)
                    for p in range(self.partitions)
                ]
            )
            while not self.stop.is_set():
                for message in consume_available(consumer, 1000, 0.2):
                    if message.error():
                        continue
                    now = time.time()
                    topic = source_of[str(message.topic())]
                    key = (topic, int(message.partition() or 0))
                    self.counts[key] = self.counts.get(key, 0) + 1
                    self.lags[topic].append(now - message.timestamp()[1] / 1000)
        finally:
            consumer.close()


# ------------------------------------------------------------------------ services


class Service:
    """One ``replicator`` subprocess in its own process group, logging to a file."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.args = list(args)
        self.log_path = log_path
        self.env = dict(env or {})
        """Added to the drill's environment: on the secured stack, the service's own user."""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "replicator", *self.args],
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **self.env},
            )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def wait_for_log(self, line: str, timeout: float) -> None:
        """Until ``line`` appears in the service's log; DrillFailedError if it exits first or
        ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while line not in self.log_path.read_text(errors="replace"):
            if self.exited() is not None:
                raise DrillFailedError(
                    f"{self.name} exited with code {self.exited()}; see {self.log_path}"
                )
            if time.monotonic() > deadline:
                raise DrillFailedError(f"{self.name} did not log {line!r} within {timeout:.0f}s")
            time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL to the whole process group: no shutdown hook, no final checkpoint."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM to the service (it stops gracefully), SIGKILL after ``timeout``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0fs; killing it", self.name, timeout)
                self.kill()
        return self.process.returncode


# --------------------------------------------------------------------------- drill


class Drill:
    def __init__(self, options: DrillOptions, out: IO[str] | None = None) -> None:
        self.options = options
        self.out = out if out is not None else sys.stdout
        self.started = time.monotonic()
        self.material: SecurityMaterial | None = None
        """The secured stack's CA and users (None: plaintext)."""

    def say(self, text: str) -> None:
        self.out.write(f"[{time.monotonic() - self.started:5.0f}s] {text}\n")
        self.out.flush()

    def run(self) -> DrillResult:
        root = self.options.workdir.resolve()
        if root.exists():
            shutil.rmtree(root)
        (root / "logs").mkdir(parents=True)
        config_path = root / "demo.toml"
        if self.options.secured:
            self.material = security_material(root / "stack")
        toml = (
            "# Written by the disaster-recovery drill (make demo); ports are free ones.\n"
            + local_regions(
                "demo", ca_location=self.material.ca_file if self.material is not None else None
            )
            + JOB_SECTIONS.format(
                egress_metrics=free_port(), ingress_metrics=free_port(), root=root
            )
        )
        self.say(f"starting the local stack (config {config_path})")
        services: list[Service] = []
        try:
            with running_stack(
                config_path, toml, root / "stack", secured=self.options.secured
            ) as config:
                try:
                    return self._drill(config, config_path, root, services)
                finally:
                    for service in services:
                        service.kill()
        finally:
            self.say("local stack stopped")

    def _drill(
        self, config: Config, config_path: Path, root: Path, services: list[Service]
    ) -> DrillResult:
        options = self.options
        east, west = self._cluster(config, SOURCE), self._cluster(config, DESTINATION)
        create_workload_topics(east, options.partitions)
        self.say(
            f"created {ACCOUNTS} (compacted, keyed, tombstones) and {CLICKS} (headers), "
            f"{options.partitions} partitions each, in {SOURCE}"
        )
        egress_config, ingress_config = required(config, "egress"), required(config, "ingress")
        destinations = {s.topic: s.destination for s in ingress_config.sources}
        self._grant_acls(east, west, destinations)
        common = ["--config", str(config_path)]
        egress = Service(
            "egress", ["egress", *common], root / "logs" / "egress.log", self._env("egress")
        )
        ingress = Service(
            "ingress", ["ingress", *common], root / "logs" / "ingress-1.log", self._env("ingress")
        )
        services += [egress, ingress]
        egress.start()
        ingress.start()
        self.say(
            f"egress (pid {egress.pid}, metrics :{egress_config.metrics_port}) and ingress "
            f"(pid {ingress.pid}, metrics :{ingress_config.metrics_port}) started"
        )
        self._wait_for_egress(egress)
        tail = DestinationTail(west, destinations, options.partitions)
        tail.start()
        workload = Workload(east, options)
        workload.start()
        self.say(
            f"producing {options.records:,} records over {options.seconds:.0f}s "
            f"while egress, replication and ingress stream them"
        )
        result = DrillResult(summaries=[])
        store = SegmentStore.for_region(config, SOURCE)
        killed = False
        last_report = 0.0
        drain_deadline: float | None = None
        while True:
            time.sleep(0.25)
            for service in services:
                if service.exited() is not None:
                    raise DrillFailedError(
                        f"{service.name} exited with code {service.exited()}; "
                        f"see {service.log_path}"
                    )
            if workload.error is not None:
                raise DrillFailedError(f"producing the workload failed: {workload.error}")
            if (
                not killed
                and workload.produced >= options.kill_at * options.records
                and tail.replayed() >= options.kill_at * workload.produced
            ):
                killed = True
                old = ingress.pid
                ingress.kill()
                services.remove(ingress)
                ingress = Service(
                    "ingress",
                    ["ingress", *common],
                    root / "logs" / "ingress-2.log",
                    self._env("ingress"),
                )
                services.append(ingress)
                ingress.start()
                self.say(
                    f"killed ingress (pid {old}) with SIGKILL mid-stream; "
                    f"started it again (pid {ingress.pid})"
                )
            now = time.monotonic()
            ends: dict[tuple[str, int], int] | None = None
            if workload.done.is_set():
                if drain_deadline is None:
                    drain_deadline = now + options.drain_timeout
                    self.say(f"all {options.records:,} records produced; waiting for replay")
                ends = source_ends(east, options.partitions)
                if killed and all(tail.counts.get(k, 0) >= n for k, n in ends.items()):
                    self._progress(workload, store, tail)
                    break
                if now > drain_deadline:
                    result.problems.append(
                        f"the destination did not catch up within {options.drain_timeout:.0f}s"
                    )
                    break
            if now - last_report >= 3:
                last_report = now
                self._progress(workload, store, tail)

        self._fail_over_group(config, config_path, destinations, result)
        result.status_running = collect(config)
        self.say("replicator status, services running:")
        self.out.write(render(result.status_running) + "\n")
        for service in (egress, ingress):
            code = service.stop()
            if code not in (0, None):
                result.problems.append(f"{service.name} exited with code {code} on SIGTERM")
        tail.close()
        self.say("egress and ingress stopped (SIGTERM); replicator status, services down:")
        result.status_stopped = collect(config)
        self.out.write(render(result.status_stopped) + "\n")

        self.say("running one compaction pass (level 0 -> 1)")
        compaction = subprocess.run(
            [sys.executable, "-m", "replicator", "compact", *common, "--once"],
            stdout=subprocess.PIPE,
            stderr=(root / "logs" / "compaction.log").open("wb"),
            text=True,
            timeout=600,
            env={**os.environ, **self._env("compaction")},
        )
        if compaction.returncode != 0:
            result.problems.append(
                f"compaction exited with code {compaction.returncode}; "
                f"see {root / 'logs' / 'compaction.log'}"
            )
        for line in compaction.stdout.splitlines():
            self.say(f"compaction: {line}")

        self.say("verifying every destination partition against its source partition")
        result.summaries = [
            self._verify(config, topic, destinations[topic], tail, result) for topic in TOPICS
        ]
        return result

    def _fail_over_group(
        self, config: Config, config_path: Path, destinations: dict[str, str], result: DrillResult
    ) -> None:
        """An application's consumer group moves to the destination region: it commits
        offsets in the source (two thirds through each partition of demo.clicks, one
        partition at 0, one at the end), egress exports them, ``replicator failover
        --apply`` commits the translated offsets, and a consumer of the group in the
        destination must read first, per partition, exactly the record it had committed."""
        east, west = self._cluster(config, SOURCE), self._cluster(config, DESTINATION)
        ends = source_ends(east, self.options.partitions)
        committed = {p: ends[(CLICKS, p)] * 2 // 3 for p in range(self.options.partitions)}
        committed[0], committed[self.options.partitions - 1] = (
            0,
            ends[(CLICKS, self.options.partitions - 1)],
        )
        commit_group(east, APP_GROUP, CLICKS, committed)
        self.say(
            f"application group {APP_GROUP} committed {CLICKS} offsets {committed} in "
            f"{SOURCE}; waiting for egress to export them"
        )
        store = SegmentStore.for_region(config, DESTINATION)
        deadline = time.monotonic() + 60
        while True:
            exported = {g.group: g.offsets for g in read_group_offsets(store, SOURCE, CLICKS)}
            if exported.get(APP_GROUP) == committed:
                break
            if time.monotonic() > deadline:
                result.problems.append(f"the offsets of {APP_GROUP} did not reach {DESTINATION}")
                return
            time.sleep(0.5)
        failover = subprocess.run(
            [
                sys.executable,
                "-m",
                "replicator",
                "failover",
                "--config",
                str(config_path),
                "--group",
                APP_GROUP,
                "--apply",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **self._env("failover")},
        )
        self.say(f"replicator failover --group {APP_GROUP} --apply (exit {failover.returncode}):")
        self.out.write(failover.stdout)
        if failover.returncode != 0:
            result.problems.append(
                f"replicator failover exited with {failover.returncode}: {failover.stderr.strip()}"
            )
            return
        expected = {
            partition: next(
                (r[0] for r in read_partition(east, CLICKS, partition) if r[0] >= offset), None
            )
            for partition, offset in committed.items()
        }
        wanted = {p for p, offset in expected.items() if offset is not None}
        first = first_reads(west, APP_GROUP, destinations[CLICKS], wanted)
        for partition in committed:
            if first.get(partition) != expected[partition]:
                result.problems.append(
                    f"group {APP_GROUP} partition {partition}: read source offset "
                    f"{first.get(partition)} first in {DESTINATION}, expected "
                    f"{expected[partition]}"
                )
        if not any(p.startswith(f"group {APP_GROUP}") for p in result.problems):
            self.say(
                f"a consumer of {APP_GROUP} in {DESTINATION} read first exactly the records "
                "it had not read in the source"
            )

    def _cluster(self, config: Config, region: str) -> Cluster:
        """The drill's own clients of ``region``: the administrator on the secured stack."""
        admin = self.material.client_settings(BROKER_USER) if self.material is not None else {}
        return {"bootstrap.servers": config.region(region).kafka.bootstrap_servers, **admin}

    def _env(self, service: str) -> dict[str, str]:
        """What a service process adds to its environment: its own user (secured)."""
        return self.material.service_env(service) if self.material is not None else {}

    def _grant_acls(self, east: Cluster, west: Cluster, destinations: dict[str, str]) -> None:
        """On the secured stack, each service's ACLs exactly as ``docs/security.md`` lists
        them, in both clusters (a service is granted in both what it needs in either)."""
        if self.material is None:
            return
        bindings = acl_bindings(read_acl_table(), SERVICE_USERS, destinations, [APP_GROUP])
        for cluster in (east, west):
            apply_acls(AdminClient({**PLAIN, **settings(cluster)}), bindings)
        self.say(
            f"applied the {len(bindings)} ACLs of docs/security.md in both regions; each "
            "service runs as its own user (SASL_SSL, SCRAM-SHA-512)"
        )

    def _wait_for_egress(self, egress: Service) -> None:
        """Production starts once egress's streaming query runs, so that the lag measured
        is the pipeline's and not Spark's start-up."""
        self.say("waiting for egress's Spark query to start")
        egress.wait_for_log(STARTED_LINE, timeout=180.0)

    def _progress(self, workload: Workload, store: SegmentStore, tail: DestinationTail) -> None:
        exported = segments = 0
        for topic in TOPICS:
            for partition in range(self.options.partitions):
                listed = store.list_segments(SOURCE, topic, partition)
                segments += len(listed)
                exported += exported_end(s.segment_key for s in listed) or 0
        lags = [x for values in tail.lags.values() for x in values[-2000:]]
        p50 = percentile(lags, 50)
        self.say(
            f"produced {progress_bar(workload.produced, self.options.records)} "
            f"{workload.produced:,} | in S3 {exported:,} ({segments} segments) | "
            f"replayed {tail.replayed():,}"
            + (f" | recent lag p50 {p50:.1f}s" if p50 is not None else "")
        )

    def _verify(
        self,
        config: Config,
        topic: str,
        destination: str,
        tail: DestinationTail,
        result: DrillResult,
    ) -> TopicSummary:
        east, west = self._cluster(config, SOURCE), self._cluster(config, DESTINATION)
        summary = TopicSummary(topic, destination, partitions=self.options.partitions)
        summary.lags = tail.lags[topic]
        store = SegmentStore.for_region(config, SOURCE)
        s3 = s3_client(config, SOURCE)
        for partition in range(self.options.partitions):
            source = read_partition(east, topic, partition)
            result.source_ends[(topic, partition)] = source[-1][0] + 1 if source else 0
            summary.records += len(source)
            copied = [
                _with_source_offset(r, SOURCE, topic, partition)
                for r in read_partition(west, destination, partition)
            ]
            summary.problems += [
                f"partition {partition}: {p}" for p in compare_partition(source, copied)
            ]
            segments = store.list_segments(SOURCE, topic, partition)
            for segment in segments:
                summary.segments[segment.segment_key.level] = (
                    summary.segments.get(segment.segment_key.level, 0) + 1
                )
                summary.s3_bytes += segment.size
            end = result.source_ends[(topic, partition)]
            gaps = coverage_gaps(
                ((s.segment_key.start, s.segment_key.end) for s in segments), 0, end
            )
            if gaps:
                summary.problems.append(f"partition {partition}: S3 misses offsets {gaps}")
                continue
            # The archive's verdict comes from a reader independent of the product's.
            backup, damaged = archived_records(
                s3, config.bucket(SOURCE), config.s3.prefix, SOURCE, topic, partition
            )
            backup = [r for r in backup if r[0] < end]
            summary.problems += [f"partition {partition}: S3 backup {p}" for p in damaged]
            summary.problems += [
                f"partition {partition}: S3 backup {p}" for p in compare_partition(source, backup)
            ]
        return summary


def create_workload_topics(cluster: Cluster, partitions: int) -> None:
    """The workload's two topics: accounts compacted, clicks plain."""
    admin = AdminClient({**PLAIN, **settings(cluster)})
    futures = admin.create_topics(
        [
            NewTopic(ACCOUNTS, partitions, config={"cleanup.policy": "compact"}),
            NewTopic(CLICKS, partitions),
        ]
    )
    for future in futures.values():
        future.result(timeout=30)


def commit_group(cluster: Cluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({**PLAIN, **settings(cluster), "group.id": group})
    try:
        # A stack started a moment ago may still be loading its offsets topic.
        retry_while_moving(
            lambda: consumer.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        )
    finally:
        consumer.close()


def first_reads(
    cluster: Cluster, group: str, topic: str, wanted: set[int]
) -> dict[int, int | None]:
    """The source offset (provenance) of the first record a consumer of ``group`` reads
    from each partition of ``topic``, starting at the group's committed offsets: until
    every partition of ``wanted`` gave one, then 2 s more (a record in another partition
    is read too, and shows)."""
    consumer = Consumer(
        {
            **PLAIN,
            **settings(cluster),
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    first: dict[int, int | None] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if wanted <= set(first):
                deadline = min(deadline, time.monotonic() + 2)
            if message is None or message.error() is not None:
                continue
            partition = message.partition() or 0
            if partition not in first:
                named = provenance.SourcePartition(SOURCE, CLICKS, partition)
                headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
                first[partition] = provenance.source_offset(headers, named)
    finally:
        consumer.close()
    return first


def source_ends(cluster: Cluster, partitions: int) -> dict[tuple[str, int], int]:
    consumer = Consumer({**PLAIN, **settings(cluster), "group.id": "drill-ends"})
    try:
        return {
            (topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for topic in TOPICS
            for p in range(partitions)
        }
    finally:
        consumer.close()


def read_partition(cluster: Cluster, topic: str, partition: int) -> list[Record]:
    """Every record of one partition, read_committed, with a plain consumer."""
    consumer = Consumer(
        {
            **PLAIN,
            **settings(cluster),
            "group.id": "drill-verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    records: list[Record] = []
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        if high <= 0:
            return records
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        while True:
            message = consumer.poll(10)
            if message is None:
                raise DrillFailedError(f"reading {topic}[{partition}] stalled before offset {high}")
            error = message.error()
            offset = int(message.offset() or 0)
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if offset >= high:
                        return records
                    continue
                raise DrillFailedError(f"reading {topic}[{partition}]: {error}")
            raw = cast(list[tuple[str, Any]], message.headers() or [])
            headers = tuple((name, _bytes(value)) for name, value in raw)
            records.append(
                (
                    offset,
                    _bytes(message.key()),
                    _bytes(message.value()),
                    message.timestamp()[1],
                    headers,
                )
            )
            if offset + 1 >= high:
                return records
    finally:
        consumer.close()


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _with_source_offset(record: Record, region: str, topic: str, partition: int) -> Record:
    _, key, value, timestamp, headers = record
    offset = provenance.source_offset(
        list(headers), provenance.SourcePartition(region, topic, partition)
    )
    kept = tuple(h for h in headers if h[0] != provenance.HEADER)
    return (-1 if offset is None else offset, key, value, timestamp, kept)


WHERE_NEXT = """\
Where to look next:
  this drill's logs       {root}/logs/  (egress.log, ingress-1.log, ingress-2.log, compaction.log)
  this drill's config     {root}/demo.toml
  your own stack          make stack-up, then replicator egress|ingress --config config.example.toml
  where partitions stand  replicator status --config FILE  (docs/operations/status.md)
  metrics                 docs/metrics.md; egress and ingress serve /metrics on metrics_port
"""


def run_drill(options: DrillOptions, out: IO[str] | None = None) -> DrillResult:
    drill = Drill(options, out)
    try:
        result = drill.run()
    except DrillFailedError as exc:
        drill.say(f"drill stopped: {exc}")
        return DrillResult(summaries=[], problems=[str(exc)])
    sink = drill.out
    sink.write("\n" + render_summary(result.summaries) + "\n")
    for problem in result.problems:
        sink.write(f"FAILED: {problem}\n")
    verdict = "PASSED" if result.passed else "FAILED"
    sink.write(
        f"\nDrill {verdict} in {time.monotonic() - drill.started:.0f}s: ingress was killed "
        f"midway and nothing was lost or duplicated.\n"
        if result.passed
        else f"\nDrill {verdict} in {time.monotonic() - drill.started:.0f}s.\n"
    )
    sink.write("\n" + WHERE_NEXT.format(root=options.workdir.resolve()))
    sink.flush()
    return result


def main(argv: Sequence[str] | None = None, exit: Callable[[int], Any] = sys.exit) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m infra.drill",
        description="Disaster-recovery drill on the local stack (make demo).",
    )
    parser.add_argument("--records", type=int, default=DrillOptions.records)
    parser.add_argument("--seconds", type=float, default=DrillOptions.seconds)
    parser.add_argument("--partitions", type=int, default=DrillOptions.partitions)
    parser.add_argument("--workdir", type=Path, default=Path(".replicator/demo"))
    parser.add_argument(
        "--security",
        choices=["plaintext", "sasl_ssl"],
        default="plaintext",
        help="sasl_ssl: brokers demand SASL_SSL (SCRAM-SHA-512) and enforce ACLs",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    options = DrillOptions(
        workdir=args.workdir,
        records=args.records,
        seconds=args.seconds,
        partitions=args.partitions,
        secured=args.security == "sasl_ssl",
    )
    exit(0 if run_drill(options).passed else 1)


if __name__ == "__main__":
    main()
