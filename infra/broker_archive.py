"""The local brokers' class archive: a broker that answers sooner, on less CPU.

Why: before a broker answers, its JVM loads, parses and verifies the classes of Kafka's
jars, and formatting its storage first starts another JVM that does the same. The test
suite starts dozens of brokers on two cores (each worker's stack, the relay's upstreams,
the secured stack, the soak, the drill). Measured on this project's two-core machine
with the suite's C1-only JVMs (``tests/fixtures/jvm.py``), while a test run shared the
cores: a broker answered after 11.2 s having used 4.65 s of CPU, and with the archive
after 7.4 s and 3.00 s; the storage format took 1.83 s of CPU, with it 1.25 s. JDK's
class-data sharing (JEP 350, dynamic archives) maps the classes an earlier run loaded
from a file instead.

The rules, and why:

- It serves one JVM and one class path: it is named by a hash of the ``java`` binary and
  every jar of the fetched release (name, size, modification time) and kept beside the
  release (``.kafka/<version>``). Another Java or release finds none and starts as
  before; a JVM handed an archive that does not match ignores it, told to say nothing
  (its notices would go to the broker's output).
- It is recorded on purpose by ``make setup`` (``python -m infra.broker archive``), never
  as a side effect: a broker in a directory of its own runs a transaction and a consumer
  group's commit, then stops; its JVM writes the classes it loaded when it exits. The
  file is written under a fresh name and renamed into place once complete.
- Nothing the broker does changes: the same classes, mapped instead of parsed. The
  benchmarks' brokers use it too; it shortens their start, which no figure includes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infra.errors import StackError
from infra.ports import port_open

log = logging.getLogger(__name__)

QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""The JVM's notices about the archive off."""

RECORD_TIMEOUT = 120.0


def archive_path(java: str, libs: Path) -> Path:
    """Where the archive for ``java`` running the jars in ``libs`` is (or would be)."""
    digest = hashlib.sha256()
    binary = Path(java).resolve()
    status = binary.stat()
    digest.update(f"{binary} {status.st_size} {status.st_mtime_ns}\n".encode())
    for jar in sorted(libs.glob("*.jar")):
        jar_status = jar.stat()
        digest.update(f"{jar.name} {jar_status.st_size} {jar_status.st_mtime_ns}\n".encode())
    return libs.parent / f"classes-{digest.hexdigest()[:24]}.jsa"


def archive_options(java: str, libs: Path) -> tuple[str, ...]:
    """The JVM options that map the recorded archive, or none when there is none."""
    path = archive_path(java, libs)
    if not path.is_file():
        return ()
    return (f"-XX:SharedArchiveFile={path}", *QUIET)


def record(timeout: float = RECORD_TIMEOUT) -> tuple[Path, bool]:
    """The archive for this Java and release, recorded unless it exists: (its path,
    whether it was recorded now). Raises :class:`StackError` naming why it could not."""
    from infra import broker

    libs = broker.kafka_libs()
    target = archive_path(broker.java(), libs)
    if target.is_file():
        return target, False
    with (
        tempfile.TemporaryDirectory(prefix="broker-archive-") as scratch,
        _fresh(target) as partial,
    ):
        spec = broker.BrokerSpec("127.0.0.1", broker.free_port(), Path(scratch))
        broker.prepare(spec)
        command = list(broker.command(spec))
        command.insert(1, f"-XX:ArchiveClassesAtExit={partial}")
        output = Path(scratch) / "broker.out"
        with output.open("wb") as sink:
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
            try:
                _exercise(spec.bootstrap, time.monotonic() + timeout)
            finally:
                process.send_signal(signal.SIGTERM)  # the JVM writes the archive as it exits
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if not partial.is_file():
            raise StackError(
                f"the broker exited ({process.returncode}) without writing its class "
                f"archive:\n{output.read_text(errors='replace')[-3000:]}"
            )
        os.replace(partial, target)
    for old in libs.parent.glob("classes-*.jsa"):
        if old != target:
            old.unlink(missing_ok=True)
    return target, True


def _exercise(bootstrap: str, deadline: float) -> None:
    """What the brokers serve in tests, so that their classes are in the archive: a
    topic, a transaction, a consumer group's fetch and commit."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from replicator.core.kafka.client_logs import client_logger

    host, _, port = bootstrap.rpartition(":")
    while not port_open(host, int(port)):  # before a client: it would log each refusal
        if time.monotonic() > deadline:
            raise StackError(f"the broker at {bootstrap} did not answer")
        time.sleep(0.2)
    common: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": client_logger()}
    admin = AdminClient(common)
    admin.create_topics([NewTopic("archive", 1, 1)])["archive"].result(60)
    producer = Producer({**common, "transactional.id": "archive"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("archive", b"value", b"key", headers=[("h", b"v")])
    producer.commit_transaction(30)
    consumer = Consumer(
        {
            **common,
            "group.id": f"archive-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["archive"])
        while (message := consumer.poll(1.0)) is None or message.error():
            if time.monotonic() > deadline:
                raise StackError("the broker served no record to a consumer group")
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()


@contextlib.contextmanager
def _fresh(target: Path) -> Iterator[Path]:
    """A path beside ``target`` no one else uses (the JVM creates the file), removed
    unless renamed into place."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        yield partial
    finally:
        partial.unlink(missing_ok=True)
