"""MirrorMaker 2, the relay's peer, measured on the relay benchmark's workload and stack.

Apache Kafka's own cross-cluster copier at the local broker's version (fetched by
:mod:`bench.peers`), run as operators run it without a Connect cluster: dedicated mode
(``org.apache.kafka.connect.mirror.MirrorMaker`` with an ``mm2.properties``), one flow
from the source cluster to the destination, the benchmark's topic only, its name kept
(``IdentityReplicationPolicy``, as the relay keeps it), exactly-once source delivery
(``exactly.once.source.support = enabled`` for the destination cluster: records and
source offsets committed in one transaction on the destination, the relay's guarantee),
one task per partition.
Heartbeats, checkpoints (group offset translation) and topic config and ACL syncing are
off: the relay benchmark's workload has no consumer groups to translate, and each would
only add work to the peer. The JVM runs with the options of Kafka's own start script.

Throughput: on the stack where the relay just copied the workload (the same records, the
same two clusters), from MirrorMaker's process start to the moment its offsets topic
(written in the same transactions as the records) holds every partition's last offset;
and from its first committed transaction on, as the relay's is from its first worker on.
Afterwards the destination topic is counted (read_committed): nothing lost, nothing
doubled. Latency: :func:`bench.latency.steady_load` on a stack of its own, exactly as the
relay's latency is measured.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.latency import PARTITIONS as LATENCY_PARTITIONS
from bench.latency import lag_figures, loaded, steady_load
from bench.local_stack import bench_stack
from bench.memory import cpu_seconds
from bench.peers import MIRROR_MAKER_CLASS, mirror_maker_libs
from infra.broker import java
from infra.drill import DestinationTail

SOURCE_ALIAS = "east"
DESTINATION_ALIAS = "west"
HEAP = ["-Xms256M", "-Xmx2G"]
"""``connect-mirror-maker.sh``'s default heap."""
JVM_OPTIONS = [
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
"""``kafka-run-class.sh``'s JVM options."""
STARTED = "Source task finished initialization and start"
"""What a Connect source task logs once it runs (MirrorMaker's tasks are source tasks)."""
TIMEOUT = 1800.0
TASK_DIED = "Task threw an uncaught and unrecoverable exception"
"""What Connect logs when one of its tasks dies. The task is not restarted ("will not
recover until manually restarted"): its partition is never copied, and a measurement that
waits for it would wait out :data:`TIMEOUT`. Seen once at 5,000,000 records, MirrorMaker
4.1.1's exactly-once task failing its own commit: ``OffsetStorageWriter is already
flushing``."""


class PeerFailedError(RuntimeError):
    """MirrorMaker 2 cannot finish the measured copy: its process exited or a task died.
    The run has no peer figures; the peer's own failure, not the relay's."""


LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %-5p [%t] %c - %m%n
"""


def dead_task(log_text: str) -> str | None:
    """What ``log_text`` (whole lines of MirrorMaker's log) says of the first task that died
    — the line without its time and thread, and its first cause — or None. Pure."""
    lines = log_text.splitlines()
    for index, line in enumerate(lines):
        if TASK_DIED in line:
            said = line.split(" - ", 1)[-1]
            trace = []  # up to the next record of the log, which starts with its time
            for following in lines[index + 1 :]:
                if following[:1].isdigit():
                    break
                trace.append(following)
            cause = next((c for c in trace if c.startswith("Caused by: ")), None)
            return said if cause is None else f"{said}; {cause}"
    return None


def mm2_properties(source: str, destination: str, topic: str, tasks: int) -> str:
    """The ``mm2.properties`` of one exactly-once flow of ``topic`` from the cluster at
    bootstrap ``source`` to the one at ``destination``, its name kept, ``tasks`` tasks.
    Pure."""
    flow = f"{SOURCE_ALIAS}->{DESTINATION_ALIAS}"
    back = f"{DESTINATION_ALIAS}->{SOURCE_ALIAS}"
    settings = {
        "clusters": f"{SOURCE_ALIAS}, {DESTINATION_ALIAS}",
        f"{SOURCE_ALIAS}.bootstrap.servers": source,
        f"{DESTINATION_ALIAS}.bootstrap.servers": destination,
        f"{flow}.enabled": "true",
        f"{flow}.topics": topic,
        f"{back}.enabled": "false",
        "replication.policy.class": ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy"),
        # A worker setting: MirrorMaker passes it to the worker of the target cluster
        # named in front of it (top-level, it would be ignored).
        f"{DESTINATION_ALIAS}.exactly.once.source.support": "enabled",
        "tasks.max": str(tasks),
        # Plugins from their ServiceLoader manifests, not a scan of the classpath: what
        # MirrorMaker's own warning recommends (the scan took 15 s a herder here).
        f"{SOURCE_ALIAS}.plugin.discovery": "service_load",
        f"{DESTINATION_ALIAS}.plugin.discovery": "service_load",
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "sync.topic.acls.enabled": "false",
        # One-broker clusters: every topic MirrorMaker makes has one replica.
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
    }
    return "".join(f"{name} = {value}\n" for name, value in settings.items())


def offsets_topic() -> str:
    """Where dedicated mode keeps the flow's source offsets, on the destination cluster."""
    return f"mm2-offsets.{SOURCE_ALIAS}.internal"


def copied_offset(key: bytes | None, value: bytes | None, topic: str) -> tuple[int, int] | None:
    """(partition, last source offset copied) from one record of the offsets topic, or
    None for a record of another topic's or connector's offsets or a tombstone. Pure."""
    if key is None or value is None:
        return None
    connector, source = json.loads(key)
    if connector != "MirrorSourceConnector" or source.get("topic") != topic:
        return None
    if source.get("cluster") != SOURCE_ALIAS:
        return None
    return int(source["partition"]), int(json.loads(value)["offset"])


class MirrorMaker:
    """One dedicated-mode MirrorMaker 2 process, its log in ``directory``."""

    def __init__(self, directory: Path, properties: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.log = directory / "mirror-maker.log"
        (directory / "mm2.properties").write_text(properties)
        (directory / "log4j2.properties").write_text(LOG4J.format(path=self.log))
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        self._scanned = 0
        """Bytes of the log already scanned for a task that died (the log grows by
        megabytes; each check reads only what is new)."""

    def start(self) -> None:
        classpath = f"{mirror_maker_libs()}/*"
        command = [java(), *HEAP, *JVM_OPTIONS]
        command += [f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}"]
        command += ["-cp", classpath, MIRROR_MAKER_CLASS, str(self.directory / "mm2.properties")]
        with (self.directory / "stdout.log").open("ab") as sink:
            self.process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )

    def running(self) -> None:
        """Raises :class:`PeerFailedError` if the process has exited or a task has died."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise PeerFailedError(
                f"MirrorMaker 2 exited with {self.process.returncode}; see {self.log}"
            )
        died = self._dead_task()
        if died is not None:
            raise PeerFailedError(f"a MirrorMaker 2 task died: {died}; see {self.log}")

    def _dead_task(self) -> str | None:
        """:func:`dead_task` of the whole lines logged since the last call."""
        if not self.log.exists():
            return None
        with self.log.open("rb") as log:
            log.seek(self._scanned)
            new = log.read()
        whole = new[: new.rfind(b"\n") + 1]
        self._scanned += len(whole)
        return dead_task(whole.decode(errors="replace"))

    def wait_started(self, tasks: int, timeout: float) -> None:
        """Until ``tasks`` source tasks run."""
        deadline = time.monotonic() + timeout
        while self._log_text().count(STARTED) < tasks:
            self.running()
            if time.monotonic() > deadline:
                raise RuntimeError(f"MirrorMaker 2 started no {tasks} tasks in {timeout:.0f}s")
            time.sleep(0.5)

    def _log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def cpu_seconds(self) -> float:
        """User and system CPU seconds the process has used so far (Linux ``/proc``)."""
        assert self.process is not None
        used = cpu_seconds(self.process.pid)
        assert used is not None, "MirrorMaker exited before its CPU was read"
        return used

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-mm2-ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def _await_offsets(
    mirror: MirrorMaker, destination: str, topic: str, ends: dict[int, int]
) -> tuple[float, float]:
    """Until MirrorMaker's committed source offsets reach ``ends`` (each partition's last
    offset + 1): (when its first offsets were committed, when its last), perf_counter."""
    consumer = Consumer(
        {
            "bootstrap.servers": destination,
            "group.id": "bench-mm2-offsets",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "log_level": 3,
        }
    )
    copied = {p: -1 for p, end in ends.items() if end > 0}
    first: float | None = None
    deadline = time.monotonic() + TIMEOUT
    try:
        stored = offsets_topic()
        while not consumer.list_topics(stored, timeout=5).topics[stored].partitions:
            mirror.running()
            time.sleep(0.2)
        partitions = consumer.list_topics(stored, timeout=5).topics[stored].partitions
        consumer.assign([TopicPartition(stored, p, OFFSET_BEGINNING) for p in partitions])
        while any(copied[p] < ends[p] - 1 for p in copied):
            mirror.running()
            assert time.monotonic() < deadline, "MirrorMaker 2 did not copy every record in time"
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error():
                    continue
                found = copied_offset(message.key(), message.value(), topic)
                if found is not None and found[0] in copied:
                    first = first or time.perf_counter()
                    copied[found[0]] = max(copied[found[0]], found[1])
        return first or time.perf_counter(), time.perf_counter()
    finally:
        consumer.close()


def count_committed(bootstrap: str, topic: str, partitions: int) -> int:
    """Records a read_committed consumer reads from ``topic``'s beginning to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-mm2-count",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    done: set[int] = set()
    records = 0
    try:
        while len(done) < partitions:
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                error = message.error()
                if error is None:
                    records += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    done.add(int(message.partition() or 0))
        return records
    finally:
        consumer.close()


def measure_throughput(
    source: str, destination: str, topic: str, partitions: int, directory: Path
) -> dict[str, Any]:
    """MirrorMaker 2 copying ``topic`` (already filled) from ``source`` to
    ``destination`` (where no topic of that name exists yet)."""
    ends = _end_offsets(source, topic, partitions)
    records = sum(ends.values())
    mirror = MirrorMaker(directory, mm2_properties(source, destination, topic, partitions))
    started = time.perf_counter()
    mirror.start()
    try:
        first, last = _await_offsets(mirror, destination, topic, ends)
        cpu = mirror.cpu_seconds()
    finally:
        mirror.stop()
    copied = count_committed(destination, topic, partitions)
    assert copied == records, f"MirrorMaker 2 copied {copied} records of {records}"
    return {
        "records": records,
        "tasks": partitions,
        "seconds": last - started,
        "records_per_s": records / (last - started),
        "records_per_s_after_first_commit": records / (last - first),
        "cpu_seconds": cpu,
        "cpu_seconds_per_million_records": cpu / records * 1e6,
    }


def measure_latency(rate: int, seconds: float, hog: bool = False) -> dict[str, Any]:
    """MirrorMaker 2's latency at ``rate`` records/s for ``seconds`` on a stack of its
    own, measured as :func:`bench.relay.measure_latency` measures the relay's."""
    with bench_stack("", "mm2-latency") as (config, root):
        east = config.region("us-east-1").kafka.bootstrap_servers
        west = config.region("us-west-1").kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": east})
        admin.create_topics([NewTopic("bench", LATENCY_PARTITIONS)])["bench"].result(timeout=30)
        properties = mm2_properties(east, west, "bench", LATENCY_PARTITIONS)
        mirror = MirrorMaker(root / "mirror-maker", properties)
        mirror.start()
        tail = DestinationTail(west, {"bench": "bench"}, LATENCY_PARTITIONS)
        try:
            mirror.wait_started(LATENCY_PARTITIONS, timeout=180.0)
            with loaded(hog, seconds) as hogged:
                steady_load(east, tail, rate, seconds)
        except AssertionError:  # records missing: a task that died says why, if one did
            mirror.running()
            raise
        finally:
            tail.close()
            mirror.stop()
    return lag_figures(tail.lags["bench"], rate, seconds) | hogged
