"""The local two-region stack: one Kafka broker per region, one S3+SQS endpoint, and the
S3 replication stand-in, all derived from a deployment config.

- Kafka: an Apache Kafka broker per region (:mod:`infra.broker`: a one-node KRaft
  cluster, data under ``<state_dir>/kafka-<region>``, kept across restarts), on the host
  and port of that region's ``kafka.bootstrap_servers``.
- S3 and SQS: one moto server (:mod:`infra.s3_endpoint`: its dispatch cached, its request
  log off) at ``[s3] endpoint_url``, with every region's bucket, the
  ingress region's notification queue (plus a dead-letter queue as its redrive target)
  receiving ``s3:ObjectCreated:*`` and ``s3:ObjectRemoved:*``, and a lifecycle rule that
  aborts incomplete multipart uploads.
- Secured mode (``security = "sasl_ssl"``, chosen by a config whose regions all say
  ``security_protocol = "SASL_SSL"``, or by ``replicator stack up --security sasl_ssl``):
  every broker listener on SASL_SSL with SCRAM-SHA-512 and ACLs enforced, with the CA,
  certificates and users made under ``<state_dir>/security`` (:mod:`infra.security`).
- Replication: :mod:`infra.replication` copies each ingress source region's bucket into
  the ingress region's bucket, as S3 CRR does in AWS.

``up`` is idempotent and waits until every service answers. Each process is recorded in
``<state_dir>/<name>.pid`` with its start time, so ``down`` stops exactly the processes
``up`` started (never an unrelated process that reused a pid). Logs go to
``<state_dir>/<name>.log``. Test fixtures use this same code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from infra.broker import BrokerSpec
from infra.broker import command as broker_command
from infra.broker import prepare as prepare_broker
from infra.errors import StackError
from infra.ports import port_open
from infra.security import BROKER_USER, SECURITY_PROTOCOL, SecurityMaterial, make_material
from replicator.core.config import Config
from replicator.core.kafka.client_logs import client_logger

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)

Security = Literal["plaintext", "sasl_ssl"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
STARTUP_TIMEOUT = 60.0
DLQ_SUFFIX = "-dlq"
MAX_RECEIVE_COUNT = 5
"""Deliveries of one SQS message before it moves to the dead-letter queue."""


@dataclass(frozen=True)
class Service:
    """One process of the stack."""

    name: str
    argv: tuple[str, ...]
    host: str
    port: int | None
    env: tuple[tuple[str, str], ...] = ()
    prepare: Callable[[], None] | None = field(default=None, compare=False)
    """Run before each start (a broker writes its settings and formats new storage)."""

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}" if self.port else "-"


@dataclass(frozen=True)
class StackSpec:
    """What the stack runs, derived from a deployment config by :meth:`from_config`."""

    state_dir: Path
    s3_endpoint: str
    aws_region: str
    access_key_id: str
    secret_access_key: str
    brokers: dict[str, tuple[str, int]]
    buckets: dict[str, str]
    """bucket -> its AWS region"""
    queues: dict[str, str] = field(default_factory=dict)
    """bucket -> queue receiving its notifications (in the bucket's AWS region)"""
    replication: tuple[tuple[str, str], ...] = ()
    """(source bucket, destination bucket) pairs"""
    security: Security = "plaintext"
    """``sasl_ssl``: every broker listener SASL_SSL with SCRAM-SHA-512 and ACLs enforced."""

    @property
    def material(self) -> SecurityMaterial | None:
        """The secured stack's CA, certificates and users; None when plaintext."""
        if self.security != "sasl_ssl":
            return None
        return SecurityMaterial(self.state_dir / "security")

    def admin_settings(self) -> dict[str, str]:
        """librdkafka settings of the stack's administrator (the brokers' own user when
        secured; nothing when plaintext)."""
        material = self.material
        return material.client_settings(BROKER_USER) if material is not None else {}

    @classmethod
    def from_config(
        cls,
        config: Config,
        state_dir: str | os.PathLike[str],
        security: Security | None = None,
    ) -> StackSpec:
        """``security`` None: what the config's regions say (``sasl_ssl`` when every
        region's ``security_protocol`` is SASL_SSL)."""
        if not config.s3.endpoint_url:
            raise StackError("the local stack needs [s3] endpoint_url (it runs the S3 endpoint)")
        brokers = {}
        for name, region in config.regions.items():
            host, port = _single_local_address(region.kafka.bootstrap_servers, f"regions.{name}")
            brokers[name] = (host, port)
        queues = {
            r.bucket: r.sqs_queue for r in config.regions.values() if r.bucket and r.sqs_queue
        }
        pairs: list[tuple[str, str]] = []
        if config.ingress:
            destination = config.bucket(config.ingress.region)
            for source in config.ingress.sources:
                pair = (config.bucket(source.region), destination)
                if pair not in pairs:
                    pairs.append(pair)
        secret = config.s3.secret_access_key
        if security is None:
            protocols = {r.kafka.security_protocol for r in config.regions.values()}
            security = "sasl_ssl" if protocols == {SECURITY_PROTOCOL} else "plaintext"
        return cls(
            state_dir=Path(state_dir),
            s3_endpoint=config.s3.endpoint_url,
            aws_region=next(iter(config.regions.values())).aws_region or next(iter(config.regions)),
            access_key_id=config.s3.access_key_id or "test",
            secret_access_key=secret.get_secret_value() if secret else "test",
            brokers=brokers,
            buckets={
                r.bucket: r.aws_region or name for name, r in config.regions.items() if r.bucket
            },
            queues=queues,
            replication=tuple(pairs),
            security=security,
        )

    def services(self) -> list[Service]:
        """In start order; ``down`` stops them in reverse."""
        s3 = urlparse(self.s3_endpoint)
        if s3.hostname not in LOCAL_HOSTS or not s3.port:
            raise StackError(
                f"[s3] endpoint_url {self.s3_endpoint!r}: the local stack runs only on a "
                "loopback address with an explicit port"
            )
        services = [
            Service(
                "s3",
                (sys.executable, "-m", "infra.s3_endpoint", "-H", s3.hostname, "-p", str(s3.port)),
                s3.hostname,
                s3.port,
            )
        ]
        for region, (host, port) in self.brokers.items():
            broker = broker_spec(self.state_dir, region, host, port, self.material)
            services.append(
                Service(
                    f"kafka-{region}",
                    broker_command(broker),
                    host,
                    port,
                    prepare=partial(_prepare_broker, broker),
                )
            )
        if self.replication:
            argv = [
                sys.executable,
                "-m",
                "infra.replication",
                "--endpoint",
                self.s3_endpoint,
                "--region",
                self.aws_region,
            ]
            for source, destination in self.replication:
                argv += ["--pair", f"{source}={destination}"]
            services.append(
                Service(
                    "replication",
                    tuple(argv),
                    "-",
                    None,
                    env=(
                        ("AWS_ACCESS_KEY_ID", self.access_key_id),
                        ("AWS_SECRET_ACCESS_KEY", self.secret_access_key),
                    ),
                )
            )
        return services


def _single_local_address(bootstrap: str, where: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    host = host.strip("[]")
    if host not in LOCAL_HOSTS or not port.isdigit():
        raise StackError(
            f"{where}.kafka.bootstrap_servers {bootstrap!r}: the local stack runs brokers "
            "only on loopback addresses like 127.0.0.1:19092"
        )
    return host, int(port)


def broker_spec(
    state_dir: Path,
    region: str,
    host: str,
    port: int,
    material: SecurityMaterial | None = None,
) -> BrokerSpec:
    """The broker of ``region``: its settings and data under ``state_dir/kafka-<region>``,
    secured with ``material`` when given."""
    return BrokerSpec(host, port, state_dir / f"kafka-{region}", security=material)


def _prepare_broker(broker: BrokerSpec) -> None:
    """A secured broker's CA, certificate and users exist before its storage is formatted."""
    if broker.security is not None:
        make_material(broker.security.directory)
    prepare_broker(broker)


# ---------------------------------------------------------------------------------------
# Processes


def _process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None if it is gone.

    Together with the pid this identifies a process: a reused pid has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie has exited
        return None
    return fields[19]


@dataclass
class ServiceState:
    service: Service
    pid: int | None
    running: bool

    @property
    def status(self) -> str:
        if self.running:
            return f"running (pid {self.pid})"
        return "stale pid file" if self.pid else "stopped"


class Stack:
    """Start, check and stop the local stack described by ``spec``."""

    def __init__(self, spec: StackSpec) -> None:
        self.spec = spec
        self.state_dir = spec.state_dir

    def _pid_file(self, service: Service) -> Path:
        return self.state_dir / f"{service.name}.pid"

    def log_file(self, service: Service) -> Path:
        return self.state_dir / f"{service.name}.log"

    def _recorded(self, service: Service) -> tuple[int, str] | None:
        try:
            data = json.loads(self._pid_file(service).read_text())
            return int(data["pid"]), str(data["start_time"])
        except (OSError, ValueError, KeyError):
            return None

    def state(self, service: Service) -> ServiceState:
        recorded = self._recorded(service)
        if recorded is None:
            return ServiceState(service, None, False)
        pid, start_time = recorded
        return ServiceState(service, pid, _process_start_time(pid) == start_time)

    def status(self) -> list[ServiceState]:
        return [self.state(service) for service in self.spec.services()]

    # -- up -------------------------------------------------------------------------------

    def up(self, timeout: float = STARTUP_TIMEOUT) -> list[ServiceState]:
        """Start what is not running, wait until all answer, create buckets and queues."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        services = self.spec.services()
        started = []
        for service in services:
            if service.name == "replication":
                continue  # needs the buckets; started after provisioning
            if self._start(service):
                started.append(service)
        deadline = time.monotonic() + timeout
        for service in services:
            if service.name == "s3":
                self._wait(service, deadline, self._s3_ready)
            elif service.name.startswith("kafka-"):
                self._wait(
                    service,
                    deadline,
                    partial(_kafka_ready, service, self.spec.admin_settings()),
                )
        self.provision()
        for service in services:
            if service.name == "replication":
                self._start(service)
                self._wait(service, deadline, lambda: True)
        return self.status()

    def _start(self, service: Service) -> bool:
        if self.state(service).running:
            log.info("%s already running", service.name)
            return False
        if service.port and port_open(service.host, service.port):
            raise StackError(
                f"{service.name}: {service.endpoint} is already in use by a process this stack "
                "did not start; stop it or change the port in the config"
            )
        if service.prepare is not None:
            service.prepare()
        log_path = self.log_file(service)
        env = dict(os.environ)
        env.update(dict(service.env))
        # The replication stand-in is importable from the project root.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH")) if p
        )
        with log_path.open("ab") as out:
            process = subprocess.Popen(
                service.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # survives the CLI; down() signals its group
            )
        start_time = _process_start_time(process.pid)
        self._pid_file(service).write_text(
            json.dumps({"pid": process.pid, "start_time": start_time, "argv": list(service.argv)})
        )
        log.info("started %s (pid %d) at %s", service.name, process.pid, service.endpoint)
        return True

    def _wait(self, service: Service, deadline: float, ready: Any) -> None:
        while True:
            if not self.state(service).running:
                raise StackError(
                    f"{service.name} exited during startup; last log lines:\n" + self._tail(service)
                )
            if ready():
                return
            if time.monotonic() > deadline:
                raise StackError(
                    f"{service.name} did not answer at {service.endpoint} in time; last log "
                    "lines:\n" + self._tail(service)
                )
            time.sleep(0.2)

    def _tail(self, service: Service, lines: int = 15) -> str:
        try:
            text = self.log_file(service).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- S3 and SQS resources -------------------------------------------------------------

    def s3_client(self, aws_region: str | None = None) -> S3Client:
        return boto3.client("s3", **self._aws_kwargs(aws_region))

    def sqs_client(self, aws_region: str | None = None) -> SQSClient:
        """SQS queues live in one AWS region: ask for the queue's own."""
        return boto3.client("sqs", **self._aws_kwargs(aws_region))

    def _aws_kwargs(self, aws_region: str | None) -> dict[str, Any]:
        return {
            "endpoint_url": self.spec.s3_endpoint,
            "region_name": aws_region or self.spec.aws_region,
            "aws_access_key_id": self.spec.access_key_id,
            "aws_secret_access_key": self.spec.secret_access_key,
            "config": BotoConfig(
                s3={"addressing_style": "path"}, retries={"max_attempts": 2}, connect_timeout=2
            ),
        }

    def _s3_ready(self) -> bool:
        try:
            self.s3_client().list_buckets()
            return True
        except (BotoCoreError, ClientError):
            return False

    def provision(self) -> None:
        """Create the buckets, queues, notifications and lifecycle rules (idempotent)."""
        for bucket, aws_region in self.spec.buckets.items():
            create_bucket(self.s3_client(aws_region), bucket, aws_region)
        for bucket, queue in self.spec.queues.items():
            aws_region = self.spec.buckets[bucket]
            connect_bucket_to_queue(
                self.s3_client(aws_region), self.sqs_client(aws_region), bucket, queue
            )

    # -- down -----------------------------------------------------------------------------

    def down(self, timeout: float = 10.0) -> list[str]:
        """Stop the processes this stack started, newest first; returns their names."""
        stopped = []
        for service in reversed(self.spec.services()):
            state = self.state(service)
            if state.running and state.pid is not None:
                _terminate(state.pid, timeout)
                stopped.append(service.name)
                log.info("stopped %s (pid %d)", service.name, state.pid)
            self._pid_file(service).unlink(missing_ok=True)
        return stopped


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``timeout``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _process_start_time(pid) is None:
                _reap(pid)
                return
            time.sleep(0.05)
    _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _kafka_ready(service: Service, settings: dict[str, str]) -> bool:
    conf: dict[str, Any] = {
        **settings,
        "bootstrap.servers": service.endpoint,
        "socket.timeout.ms": 1000,
        "logger": client_logger(),
    }
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=1.0)
        return True
    except KafkaException:
        return False


def create_bucket(s3: S3Client, bucket: str, aws_region: str) -> None:
    """Create ``bucket`` if missing, with the rule that aborts abandoned multipart uploads."""
    try:
        if aws_region == "us-east-1":
            s3.create_bucket(Bucket=bucket)
        else:
            s3.create_bucket(
                Bucket=bucket,
                CreateBucketConfiguration={"LocationConstraint": aws_region},  # type: ignore[typeddict-item]
            )
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "abort-incomplete-multipart-uploads",
                    "Status": "Enabled",
                    "Filter": {"Prefix": ""},
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                }
            ]
        },
    )


def connect_bucket_to_queue(s3: S3Client, sqs: SQSClient, bucket: str, queue: str) -> str:
    """Create ``queue`` (with a dead-letter queue) and send ``bucket``'s object-created and
    object-removed notifications to it. Returns the queue URL."""
    dlq_url = sqs.create_queue(QueueName=queue + DLQ_SUFFIX)["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    sqs.set_queue_attributes(
        QueueUrl=queue_url,
        Attributes={
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(MAX_RECEIVE_COUNT)}
            ),
            "VisibilityTimeout": "60",
        },
    )
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "Id": "replicator-segment-events",
                    "QueueArn": queue_arn,
                    "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
                }
            ]
        },
    )
    return queue_url
