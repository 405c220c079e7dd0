"""The local stack's Kafka: Apache Kafka brokers, each a one-node KRaft cluster (combined
broker and controller), with its data on disk.

Why Apache Kafka itself: every guarantee the product makes rests on the broker's
transactions (fencing of a zombie producer, aborts after ``transaction.timeout.ms``,
read_committed ends), on CreatePartitions and DeleteRecords, on retention and the log
cleaner, and on SASL/ACLs. Operators run Apache Kafka (or MSK and Confluent Platform,
with the same protocol and semantics), so the tests, the drill, the soak and the
benchmarks run on it too.

Where it comes from: ``make setup`` runs ``python -m infra.broker fetch``, which has
Maven copy ``org.apache.kafka:kafka_2.13`` at :data:`KAFKA_VERSION`, its runtime
dependencies and a log4j2 binding (``infra/kafka/pom.xml``) into
``.kafka/<version>/libs`` in the checkout, once. Nothing is downloaded while tests run:
a missing cache is an error that says to run ``make setup``.

A broker's directory holds ``server.properties``, ``log4j2.properties`` and ``data/``.
:func:`prepare` writes the first two and formats the storage only when ``data/`` is not
formatted yet, so a broker restarted on the same directory keeps its topics, offsets
and transactions (its controller port is read back from the old properties).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from infra.broker_archive import archive_options
from infra.broker_archive import record as record_archive
from infra.errors import StackError
from infra.ports import free_port
from infra.security import SecurityMaterial, broker_settings, scram_arguments

log = logging.getLogger(__name__)

KAFKA_VERSION = "4.1.1"
"""The Apache Kafka release the local stack runs (``org.apache.kafka:kafka_2.13``)."""
PROJECT_ROOT = Path(__file__).resolve().parent.parent
POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
KAFKA_HOME_ENV = "REPLICATOR_KAFKA_HOME"
"""Overrides where the fetched release lives (``<it>/libs/*.jar``)."""
HEAP = "512m"
"""Each broker's maximum heap: several brokers and Spark share a 2-core, small machine."""

ONE_NODE_SETTINGS: Mapping[str, str] = {
    # A one-node cluster: internal topics with one replica, and few partitions of them
    # (50 each by default, created on the first group or transaction).
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "8",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # A group's first member starts at once instead of waiting 3 s for others.
    "group.initial.rebalance.delay.ms": "0",
    # The product creates and grows its topics itself; a producer or consumer never does.
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    # Records are kept until a topic says otherwise (retention.ms). Kafka's time retention
    # applies to the records' own timestamps, and tests replay records stamped from 1970
    # to 2023: under the default 7 days the broker would delete them as they arrive.
    "log.retention.ms": "-1",
    # Background work on a local clock instead of minutes: transactions past their
    # timeout are aborted within a second of it, retention and the cleaner run promptly
    # (tests use topics with a tiny retention.ms or cleanup.policy=compact).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "log.retention.check.interval.ms": "1000",
    "log.initial.task.delay.ms": "1000",
    "log.cleaner.backoff.ms": "1000",
    # The controller appends a no-op record to the metadata log every 500 ms by default,
    # so that other controllers and brokers can tell a quiet quorum from a stalled one;
    # a one-node cluster has none to tell. Off: an idle broker's CPU 2.7 % -> 1.8 % of a
    # core (60 s, this machine), and every test and the demo run several of them.
    "metadata.max.idle.interval.ms": "0",
    # ACLs are enforced, and a resource without any is open to everyone, as on a cluster
    # that has none: a test denies one operation on one resource to meet a real refusal.
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    # Threads for a 2-core machine running several brokers.
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "log.cleaner.threads": "1",
}


def kafka_home() -> Path:
    override = os.environ.get(KAFKA_HOME_ENV)
    return Path(override) if override else PROJECT_ROOT / ".kafka" / KAFKA_VERSION


def kafka_libs() -> Path:
    """The fetched release's jars; a clear error if ``make setup`` has not fetched them."""
    libs = kafka_home() / "libs"
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        raise StackError(
            f"Apache Kafka {KAFKA_VERSION} is not in {libs}: run `make setup` "
            "(it fetches the broker with Maven, Java 17+ and Maven 3.8+ needed)"
        )
    return libs


def fetch(home: Path | None = None) -> Path:
    """Copy the pinned release's jars into ``home/libs`` with Maven, unless the same
    version and artifact list (``infra/kafka/pom.xml``) were fetched there already."""
    home = home or kafka_home()
    wanted = f"{KAFKA_VERSION} {hashlib.sha256(POM.read_bytes()).hexdigest()}\n"
    return maven_libs(POM, home / "libs", home / ".fetched", wanted, "Apache Kafka")


def maven_libs(pom: Path, libs: Path, marker: Path, wanted: str, what: str) -> Path:
    """``pom``'s runtime dependencies (at :data:`KAFKA_VERSION`) copied by Maven into
    ``libs``, unless ``marker`` says ``wanted`` was fetched there already. The jars land in
    a directory beside ``libs`` first and are renamed into place, so an interrupted fetch
    leaves nothing half-copied; ``what`` names the artifacts in messages."""
    if marker.exists() and marker.read_text() == wanted:
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError(f"Maven 3.8+ (mvn) is needed to fetch {what}")
    partial = libs.with_name(libs.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [
        mvn,
        "--batch-mode",
        "--quiet",
        "--file",
        str(pom),
        "dependency:copy-dependencies",
        f"-Dkafka.version={KAFKA_VERSION}",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={partial}",
    ]
    log.info("fetching %s %s into %s", what, KAFKA_VERSION, libs)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StackError(
            f"Maven could not fetch {what} {KAFKA_VERSION}:\n" + (done.stdout + done.stderr)[-3000:]
        )
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    marker.write_text(wanted)
    return libs


def java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate and candidate.exists():
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise StackError("Java 17+ is needed to run the local Kafka broker (java not found)")
    return found


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, as Kafka's
    ``Uuid`` prints them, and like Kafka's never starting with "-" (one in 64 would, and
    the storage tool then reads it as an option)."""
    while True:
        made = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not made.startswith("-"):
            return made


@dataclass(frozen=True)
class BrokerSpec:
    """One local broker: its client listener, directory and extra settings."""

    host: str
    port: int
    directory: Path
    settings: Mapping[str, str] = field(default_factory=dict)
    """Overrides and additions to the generated ``server.properties``."""
    security: SecurityMaterial | None = None
    """The secured mode (:mod:`infra.security`): every listener SASL_SSL with SCRAM, ACLs
    enforced with nothing allowed by default; None for plaintext."""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log4j_file(self) -> Path:
        return self.directory / "log4j2.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"


EXTRA_JVM_OPTIONS_ENV = "KAFKA_OPTS"
"""Extra JVM options for the local brokers, after ours (the JVM takes the last of two
conflicting flags), under the name Kafka's own ``kafka-run-class.sh`` reads. The test
suite sets ``-XX:TieredStopAtLevel=1`` here: its brokers live for minutes and carry
little load, where the optimizing compiler costs more CPU than it saves. The benchmarks
and the drill run the brokers as operators do, without it."""


def _shared_jvm_options() -> tuple[str, ...]:
    """Options every Kafka JVM of the stack takes (the broker and its storage tool, as
    Kafka's scripts give both ``KAFKA_OPTS``): the class archive ``make setup`` recorded,
    if any (:mod:`infra.broker_archive`), then :data:`EXTRA_JVM_OPTIONS_ENV`'s."""
    return (
        *archive_options(java(), kafka_libs()),
        *shlex.split(os.environ.get(EXTRA_JVM_OPTIONS_ENV, "")),
    )


def command(spec: BrokerSpec) -> tuple[str, ...]:
    """The broker's command line; :func:`prepare` must have run on its directory."""
    return (
        java(),
        "-Xms128m",
        f"-Xmx{HEAP}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        *_shared_jvm_options(),
        f"-Dlog4j2.configurationFile={spec.log4j_file}",
        "-cp",
        str(kafka_libs() / "*"),
        "kafka.Kafka",
        str(spec.properties_file),
    )


def server_properties(spec: BrokerSpec, controller_port: int) -> dict[str, str]:
    host = spec.host
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{host}:{controller_port}",
        "listeners": f"PLAINTEXT://{host}:{spec.port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{spec.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(spec.data_dir),
        **ONE_NODE_SETTINGS,
    }
    if spec.security is not None:
        properties.update(broker_settings(spec.security, host, spec.port, controller_port))
    properties.update(spec.settings)
    return properties


LOG4J2 = """\
# The broker's own log: warnings and errors, and the lines that say it started or stopped.
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
# What the authorizer refused, naming the principal, operation and resource.
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = INFO
"""


def read_properties(path: Path) -> dict[str, str]:
    properties = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            properties[name.strip()] = value.strip()
    return properties


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    """Written readable by the owner only: a secured broker's file holds its password."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write("".join(f"{name}={value}\n" for name, value in properties.items()))


def _controller_port(spec: BrokerSpec) -> int:
    """The controller port of an earlier run of this directory, else a free one: the
    quorum's voters are stored with the data, so a restart must keep the port."""
    if spec.properties_file.exists():
        voters = read_properties(spec.properties_file).get("controller.quorum.voters", "")
        port = voters.rpartition(":")[2]
        if port.isdigit():
            return int(port)
    return free_port()


def prepare(spec: BrokerSpec) -> None:
    """Write the broker's settings and format its storage if it is new (idempotent)."""
    spec.directory.mkdir(parents=True, exist_ok=True)
    write_properties(spec.properties_file, server_properties(spec, _controller_port(spec)))
    spec.log4j_file.write_text(LOG4J2)
    if (spec.data_dir / "meta.properties").exists():
        return
    done = subprocess.run(
        [
            java(),
            "-Xmx256m",
            *_shared_jvm_options(),
            f"-Dlog4j2.configurationFile={spec.log4j_file}",
            "-cp",
            str(kafka_libs() / "*"),
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={new_cluster_id()}",
            "--config",
            str(spec.properties_file),
            "--ignore-formatted",
            *(scram_arguments(spec.security) if spec.security is not None else []),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise StackError(
            f"formatting the Kafka storage in {spec.data_dir} failed:\n"
            + (done.stdout + done.stderr)[-3000:]
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.broker")
    parser.add_argument("action", choices=["fetch", "libs", "archive"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.action == "archive":
            started = time.monotonic()
            path, recorded = record_archive()
            took = f"recorded in {time.monotonic() - started:.0f} s" if recorded else "in place"
            sys.stdout.write(f"the brokers' class archive is {took}: {path}\n")
            return 0
        libs = fetch() if args.action == "fetch" else kafka_libs()
    except StackError as exc:
        log.error("%s", exc)
        return 1
    sys.stdout.write(f"{libs}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
